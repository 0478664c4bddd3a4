"""The delegation tool: start a child through the bound provider, foreground or background."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio

from tether.agents import Agent, Tool, ToolContext, ToolError
from tether.errors import TetherError
from tether.store import MessageSource
from tether.subagents import SettlingRun, SubagentResult, SubagentStartRequest
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
    if settings.run_in_background and settings.background == "continuable":
        properties["run_in_background"] = {
            "type": "boolean",
            "description": "Start a continuable subagent (the default): the call returns its id "
            "at once, you can send it more work with send_message, and you get a notice when it "
            "settles. false waits for a one-shot answer instead.",
        }
    elif settings.run_in_background:
        properties["run_in_background"] = {
            "type": "boolean",
            "description": "Start it in the background and get a notice when it finishes.",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": ["description", "prompt"],
        "additionalProperties": False,
    }


def delegation_tool(settings: ToolSettings) -> Tool:
    """The ``subagent`` tool of one plugin instance."""

    def request_for(agent: Agent, arguments: dict[str, Any]) -> SubagentStartRequest:
        return SubagentStartRequest(
            prompt=arguments["prompt"],
            parent=agent,
            agent_options=settings.agent_options,
            max_depth=settings.max_depth if isinstance(settings.max_depth, int) else None,
            tool_filter=settings.tool_filter.to_filter() if settings.tool_filter else None,
            persona=settings.persona,
            output_schema=settings.output_schema,
            label=arguments["description"],
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
        request = request_for(agent, arguments)
        if background and continuable:
            try:
                started = await runtime.start_continuable(settings.provider, request)
            except TetherError as exc:
                raise ToolError(str(exc)) from exc
            return f"started subagent {started.child_id}"
        if background:
            return await _background(agent, runtime, settings.provider, request)
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
            " By default the subagent is continuable: the call returns its id at once, the "
            "subagent keeps its conversation, you can send it more work with send_message, and "
            "you get a notice when it settles."
        )
    elif settings.run_in_background:
        description += (
            " With run_in_background, the call returns at once with a task id and you get a "
            "notice when the subagent finishes."
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


async def _background(
    agent: Agent, runtime: Any, provider: str, request: SubagentStartRequest
) -> str:
    """Start the child; a notice reaches the parent when it ends. A run that settles in its
    own task (``SettlingRun``: spawn's and fork's) calls back; otherwise a job the parent owns
    waits for it."""
    try:
        child = await runtime.start(provider, request)
    except TetherError as exc:
        raise ToolError(str(exc)) from exc

    async def notify(result: SubagentResult) -> None:
        await agent.steer(
            notice_text(child.id, result), source=MessageSource(kind="notice", sender=child.id)
        )

    if isinstance(child, SettlingRun) and child.on_settled(notify):
        return f"started background subagent task {child.id}"

    async def job() -> None:
        try:
            result = await child.result()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await child.dispose()
            raise
        except Exception as exc:
            result = SubagentResult(output="", stop_reason="error", diagnostic=str(exc))
        with anyio.CancelScope(shield=True):
            await child.dispose()
        await notify(result)

    agent.start_job(job)
    return f"started background subagent task {child.id}"


def _is_root(agent: Agent) -> bool:
    """A root session: nobody delegated it (no parent, depth 0)."""
    header = agent.header
    return header.parent_session is None and header.delegation_depth == 0
