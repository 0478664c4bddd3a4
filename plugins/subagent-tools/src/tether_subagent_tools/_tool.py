"""The delegation tool: start a child through the bound provider, foreground or background."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tether.agents import Agent, Tool, ToolContext, ToolError
from tether.errors import TetherError
from tether.subagents import SubagentStartRequest, receipt
from tether.subagents.notices import failure_text, notice_text

if TYPE_CHECKING:
    from . import ToolSettings

__all__ = ("delegation_tool", "failure_text", "notice_text")


def _parameters(settings: ToolSettings) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "description": {
            "type": "string",
            "description": "A short (3-5 word) description of the task.",
        },
        "prompt": {
            "type": "string",
            "description": "The task for the subagent, complete and self-contained.",
        },
    }
    required = ["description", "prompt"]
    if settings.run_in_background and settings.background == "continuable":
        properties["run_in_background"] = {
            "type": "boolean",
            "description": "Start a continuable task (the default): the call returns a task id "
            "at once and the result arrives in a <task_result> message. false waits for a "
            "one-shot answer instead.",
        }
        properties["taskId"] = {
            "type": "string",
            "description": "Send prompt to this task (from a receipt) instead of starting one; "
            "description is then not needed.",
        }
        required = ["prompt"]
    elif settings.run_in_background:
        properties["run_in_background"] = {
            "type": "boolean",
            "description": "Start it as a background task: the call returns a task id at once "
            "and the result arrives in a <task_result> message.",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def delegation_tool(settings: ToolSettings) -> Tool:
    """The ``subagent`` tool of one plugin instance."""

    # eve's root-only copy works in its parent's sandbox; otherwise the provider decides.
    share_workspace = settings.share_workspace
    if share_workspace is None and settings.root_only:
        share_workspace = True

    def request_for(
        agent: Agent, arguments: dict[str, Any], *, task: bool = False
    ) -> SubagentStartRequest:
        return SubagentStartRequest(
            prompt=arguments["prompt"],
            parent=agent,
            agent_options=settings.agent_options,
            max_depth=settings.max_depth if isinstance(settings.max_depth, int) else None,
            tool_filter=settings.tool_filter.to_filter() if settings.tool_filter else None,
            persona=settings.persona,
            output_schema=settings.output_schema,
            label=arguments["description"],
            tool=settings.tool_name if task else None,
            share_workspace=share_workspace,
        )

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        agent = context.agent
        if settings.root_only and not _is_root(agent):
            raise ToolError(
                f"{settings.tool_name} is offered to root sessions only, and this session was "
                "delegated; do the task yourself"
            )
        if agent.runtime is None:
            raise ToolError("delegation is unavailable: this agent was composed without a runtime")
        continuable = settings.background == "continuable" and settings.run_in_background
        background = bool(arguments.get("run_in_background", continuable))
        if background and not settings.run_in_background:
            raise ToolError("run_in_background is disabled for this tool")
        runtime = agent.runtime.subagents
        tasks = runtime.tasks
        task_id = arguments.get("taskId")
        if task_id is not None:
            try:
                return await tasks.send(
                    agent, str(task_id), settings.tool_name, arguments["prompt"]
                )
            except TetherError as exc:
                raise ToolError(str(exc)) from exc
        if "description" not in arguments:
            raise ToolError("description is required to start a task (only taskId calls omit it)")
        request = request_for(agent, arguments, task=background)
        if background:
            try:
                with tasks.slot(agent):  # counted from the check until it is registered
                    if continuable:
                        started = await runtime.start_continuable(settings.provider, request)
                        return receipt(started.child_id, settings.tool_name, continuable=True)
                    child = await runtime.start(settings.provider, request)
                    tasks.track(agent, child, settings.tool_name, request.label)
            except TetherError as exc:
                raise ToolError(str(exc)) from exc
            return receipt(child.id, settings.tool_name, continuable=False)
        try:
            child = await runtime.start(settings.provider, request)
        except TetherError as exc:
            raise ToolError(str(exc)) from exc
        try:
            result = await child.result()
        finally:
            await child.dispose()
        if result.stop_reason != "completed":
            raise ToolError(failure_text(result))
        if settings.output_schema is not None:
            return json.dumps(result.structured, ensure_ascii=False)
        return result.output

    description = (
        "Delegate a self-contained task to a subagent with its own session, which works on it "
        "alone and returns its final answer. Give it everything it needs in the prompt."
    )
    if settings.run_in_background and settings.background == "continuable":
        description += (
            f" By default it is a continuable task: the call returns a task id at once, the "
            f"result arrives in a <task_result> message (task_wait waits for it), and calling "
            f"{settings.tool_name} again with taskId sends the task more work."
        )
    elif settings.run_in_background:
        description += (
            " With run_in_background, the call returns a task id at once and the result "
            "arrives in a <task_result> message (task_wait waits for it)."
        )
    provider = settings.provider

    root_only = settings.root_only

    def available(agent: Agent) -> bool:
        # The tool exists only while its provider is registered (dsh's provider-added/removed).
        if root_only and not _is_root(agent):
            return False  # eve's root-only copy: a delegated session never sees it
        return agent.runtime is not None and agent.runtime.subagents.get(provider) is not None

    return Tool(
        settings.tool_name,
        description,
        run,
        _parameters(settings),
        safe=True,
        available=available,
    )


def _is_root(agent: Agent) -> bool:
    """A root session: nobody delegated it (no parent, depth 0)."""
    header = agent.header
    return header.parent_session is None and header.delegation_depth == 0
