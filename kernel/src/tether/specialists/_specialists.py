"""Declared subagents (specialists) as tools, and the task tools that come with them.

An agent's declared subagents (``[agent.NAME] subagents``, or the ``subagents/`` folders of an
agent folder) are other agents of the profile. Each listed one is a tool of the agent, named
after it, with eve's input ``{message, output_schema?, taskId?}``; a deferred one is found with
``find_subagents`` and called with ``call_subagent``; a hidden one has no tool. A call starts a
task (see :mod:`tether.subagents._tasks`) whose child is the subagent's own preset: its own
instructions, tools, skills, model and limits; it inherits nothing from the caller but its
lineage (depth, root, ownership). The built-in plugin (:mod:`tether.specialists._plugin`)
offers these tools to each agent through ``tether_preset_tools``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..agents import AgentPreset, PreStep, Specialist, Tool, ToolContext, ToolError
from ..agents._tools import kernel_schema
from ..errors import AgentError, ErrorCode, SubagentError, TetherError
from ..ground import format_loc
from ..subagents import SubagentStartRequest, receipt
from ..subagents._tasks import WAIT_DEFAULT, tasks_note
from ._provider import SPECIALIST_PROVIDER

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = (
    "TASKS_NOTE",
    "TASK_TOOLS",
    "declared_tools",
    "preset_tools",
    "task_tools",
)

#: The tools an agent with declared subagents also gets.
TASK_TOOLS = ("task_wait", "task_cancel", "task_output")

#: The ``[Tasks]`` pre-step (one per agent, whoever adds it).
TASKS_NOTE = PreStep("tasks", tasks_note)

_NOTE = (
    " It cannot see your conversation: put everything it needs in message. It works in the "
    "background: the call returns a task id at once and the result arrives in a <task_result> "
    "message (task_wait waits for it). Call it again with taskId to send that task another "
    "message; with output_schema its answer is JSON valid against that schema."
)


def _parameters(*, named: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if named:
        properties["name"] = {"type": "string", "description": "The subagent to call."}
    properties.update(
        {
            "message": {
                "type": "string",
                "description": "Everything the subagent needs: it sees nothing else of yours.",
            },
            "output_schema": {
                "type": "object",
                "description": "A JSON Schema (object-rooted) its answer must satisfy; the "
                "task is then one-shot.",
            },
            "taskId": {
                "type": "string",
                "description": "Continue this task (from a receipt) instead of starting one.",
            },
        }
    )
    return kernel_schema(
        {
            "type": "object",
            "properties": properties,
            "required": ["name", "message"] if named else ["message"],
            "additionalProperties": False,
        }
    )


def unavailable(agent: Agent, spec: Specialist) -> SubagentError:
    """``SUBAGENT_UNAVAILABLE``: ``spec`` is not offered to the caller ``agent`` runs for."""
    caller = agent.caller
    who = f'caller "{caller.id}"' if caller is not None else "a session with no caller"
    return SubagentError(
        ErrorCode.SUBAGENT_UNAVAILABLE,
        f'subagent "{spec.tool_name}" is unavailable: it is not offered to {who} '
        f"({spec.when.describe() if spec.when is not None else 'offered to nobody'} use it)",
        remedy="call a subagent the latest subagent list (or find_subagents) names",
    )


async def run_specialist(agent: Agent, spec: Specialist, arguments: dict[str, Any]) -> str:
    """A call of ``spec``'s tool: start a task, or continue one with ``taskId``; refused
    (``SUBAGENT_UNAVAILABLE``) when ``spec`` is not offered to the agent's current caller."""
    runtime = agent.runtime
    if runtime is None:
        raise ToolError("delegation is unavailable: this agent was composed without a runtime")
    if not spec.offered_to(agent.caller):
        raise ToolError(str(unavailable(agent, spec)))
    service = runtime.subagents
    message = str(arguments["message"])
    task_id = arguments.get("taskId")
    schema = arguments.get("output_schema")
    try:
        if task_id is not None:
            return await _continue(agent, spec, str(task_id), message, schema)
        request = SubagentStartRequest(
            prompt=message,
            parent=agent,
            max_depth=runtime.kernel.profile.tether.max_depth,
            output_schema=schema,
            label=_label(spec, message),
            agent=spec.agent,
            tool=spec.tool_name,
        )
        # A deferred subagent is reached through call_subagent: its receipt says so.
        via = "call_subagent" if spec.visibility == "deferred" else None
        with service.tasks.slot(agent):  # counted from the check until it is registered
            if schema is None and agent.store.durable:
                started = await service.start_continuable(SPECIALIST_PROVIDER, request)
                return receipt(started.child_id, spec.tool_name, continuable=True, via=via)
            run = await service.start(SPECIALIST_PROVIDER, request)
            service.tasks.track(agent, run, spec.tool_name, request.label)
        return receipt(run.id, spec.tool_name, continuable=False)
    except TetherError as exc:
        raise ToolError(str(exc)) from exc


async def _continue(
    agent: Agent, spec: Specialist, task_id: str, message: str, schema: object
) -> str:
    service = agent.runtime.subagents if agent.runtime else None
    assert service is not None
    if schema is not None:
        raise SubagentError(
            ErrorCode.SUBAGENT_INVALID,
            "output_schema applies to a new task; a continued task answers in text",
            remedy="drop output_schema, or start a new task without taskId",
        )
    return await service.tasks.send(agent, task_id, spec.tool_name, message)


def _label(spec: Specialist, message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    return f"{spec.tool_name}: {first[:60]}" if first else spec.tool_name


def specialist_tool(spec: Specialist) -> Tool:
    """The tool of one listed declared subagent."""

    async def run(arguments: dict[str, Any], context: ToolContext) -> str:
        return await run_specialist(context.agent, spec, arguments)

    return Tool(spec.tool_name, spec.description.strip() + _NOTE, run, _parameters(named=False))


def _deferred_tools(deferred: Sequence[Specialist]) -> list[Tool]:
    by_name = {spec.tool_name: spec for spec in deferred}

    async def find(arguments: dict[str, Any], context: ToolContext) -> str:
        words = str(arguments.get("query", "")).lower().split()
        conditional = any(spec.when is not None for spec in deferred)
        caller = context.agent.caller if conditional else None
        found = [
            spec
            for spec in deferred
            if spec.offered_to(caller)
            and all(w in f"{spec.tool_name} {spec.description}".lower() for w in words)
        ]
        if not found:
            return "(no subagent matches; an empty query lists them all)"
        return "\n".join(f"- {spec.tool_name}: {spec.description.strip()}" for spec in found)

    async def call(arguments: dict[str, Any], context: ToolContext) -> str:
        spec = by_name.get(str(arguments["name"]))
        if spec is None:
            raise ToolError(
                f'no deferred subagent named "{arguments["name"]}"; find_subagents lists them'
            )
        return await run_specialist(context.agent, spec, arguments)

    return [
        Tool(
            "find_subagents",
            "Search the subagents you can call with call_subagent, by words of their name and "
            "description; an empty query lists them all.",
            find,
            kernel_schema(
                {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "additionalProperties": False,
                }
            ),
            safe=True,
        ),
        Tool(
            "call_subagent",
            "Start a task with a subagent find_subagents or a subagent list names (by its "
            "name)." + _NOTE,
            call,
            _parameters(named=True),
        ),
    ]


def task_tools() -> tuple[Tool, ...]:
    """``task_wait``, ``task_cancel`` and ``task_output``: the same three tools for every
    agent that starts tasks (a delegation plugin offers them too; an agent gets them once)."""
    if not _TASK_TOOLS:
        _TASK_TOOLS.extend(_make_task_tools())
    return tuple(_TASK_TOOLS)


_TASK_TOOLS: list[Tool] = []


def _make_task_tools() -> list[Tool]:
    async def wait(arguments: dict[str, Any], context: ToolContext) -> str:
        agent = context.agent
        assert agent.runtime is not None
        ids = [str(i) for i in arguments.get("taskIds", ())]
        try:
            return await agent.runtime.subagents.tasks.wait(
                agent,
                ids,
                wait_for_all=bool(arguments.get("all", False)),
                timeout=float(arguments.get("timeoutSeconds", WAIT_DEFAULT)),
            )
        except TetherError as exc:
            raise ToolError(str(exc)) from exc

    async def cancel(arguments: dict[str, Any], context: ToolContext) -> str:
        agent = context.agent
        assert agent.runtime is not None
        task_id = str(arguments["taskId"])
        try:
            return await agent.runtime.subagents.tasks.cancel(agent, task_id, None)
        except TetherError as exc:
            raise ToolError(str(exc)) from exc

    async def output(arguments: dict[str, Any], context: ToolContext) -> str:
        agent = context.agent
        assert agent.runtime is not None
        try:
            return await agent.runtime.subagents.tasks.output(
                agent, str(arguments["taskId"]), int(arguments.get("offset", 0))
            )
        except TetherError as exc:
            raise ToolError(str(exc)) from exc

    task_id = {"type": "string", "description": "A task id from a receipt."}
    return [
        Tool(
            "task_wait",
            "Wait until a task settles (any of taskIds, or all with all=true; default: every "
            "working task), timeoutSeconds pass (default 60, at most 600), or a new message "
            "arrives. Results arrive in <task_result> messages right after.",
            wait,
            kernel_schema(
                {
                    "type": "object",
                    "properties": {
                        "taskIds": {"type": "array", "items": {"type": "string"}},
                        "all": {"type": "boolean"},
                        "timeoutSeconds": {"type": "number", "minimum": 0},
                    },
                    "additionalProperties": False,
                }
            ),
            safe=True,
        ),
        Tool(
            "task_cancel",
            "Stop a task's current work. A continuable task keeps its conversation and can be "
            "sent another message later.",
            cancel,
            kernel_schema(
                {
                    "type": "object",
                    "properties": {"taskId": task_id},
                    "required": ["taskId"],
                    "additionalProperties": False,
                }
            ),
        ),
        Tool(
            "task_output",
            "Read a task's result from offset (what a [truncated] result left out), or what a "
            "working task has written so far.",
            output,
            kernel_schema(
                {
                    "type": "object",
                    "properties": {"taskId": task_id, "offset": {"type": "integer", "minimum": 0}},
                    "required": ["taskId"],
                    "additionalProperties": False,
                }
            ),
            safe=True,
        ),
    ]


def declared_tools(
    specialists: Sequence[Specialist], agent: str | None, taken: Sequence[Tool]
) -> tuple[Tool, ...]:
    """The tools an agent's declared subagents give it (its nearest layer): one per listed
    subagent, ``find_subagents`` and ``call_subagent`` for deferred ones, and the task tools.
    A name another tool of the agent has, or two subagents share, is an error (eve's rule:
    no winner is picked); the task tools are added only when no plugin gave them already."""
    taken_ids = {id(tool) for tool in taken}
    owner = format_loc(("agent", str(agent)), ("subagents",))
    seen: dict[str, str] = {}
    for spec in specialists:
        if spec.visibility is False:
            continue
        if spec.tool_name in seen:
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'found multiple subagents named "{spec.tool_name}" for agent "{agent}": '
                f"{seen[spec.tool_name]} and {spec.agent}",
                key=owner,
                remedy="rename one of them (its folder, or tool_name)",
            )
        seen[spec.tool_name] = spec.agent
    # A subagent offered only to some callers is reached through call_subagent, whatever its
    # visibility: the tool list stays the same when the caller changes (docs/callers.md).
    listed = [s for s in specialists if s.visibility is True and s.when is None]
    deferred = [s for s in specialists if s.visibility == "deferred" or (s.visibility and s.when)]
    tools = [specialist_tool(spec) for spec in listed]
    if deferred:
        tools += _deferred_tools(deferred)
    if listed or deferred:
        tools += [tool for tool in task_tools() if id(tool) not in taken_ids]
    names = {tool.name for tool in taken}
    for tool in tools:
        if tool.name in names:
            what = "Subagent" if tool.name in seen else "The task tool"
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'{what} "{tool.name}" of agent "{agent}" collides with another tool name',
                key=owner,
                remedy="rename the subagent (its folder, or tool_name), or hide it with "
                "tool = false and call it from your own tool",
            )
    return tuple(tools)


def preset_tools(preset: AgentPreset) -> tuple[Tool, ...]:
    """The tools ``preset``'s declared subagents give it (none when it declares none): what
    the built-in plugin offers the preset through ``tether_preset_tools``."""
    if not preset.specialists:
        return ()
    taken = [tool for layer in preset.tool_layers for _, tool in layer]
    return declared_tools(preset.specialists, preset.name, taken)
