"""Tool calls: how an agent runs the calls of one model answer.

Order: calls run in the order the model wrote them, except that a run of consecutive calls to
``safe`` tools runs concurrently (:func:`run_in_batches`). Each call (:func:`run_tool`) is
checked before its tool runs, and every refusal is a tool result the model reads:

1. the delegation's call policy (``agent.spec.tool_policy``) permits the name;
2. the tool exists;
3. its argument text was a JSON object (a model's unparseable text is quoted back);
4. the arguments satisfy the tool's schema;
5. the agent's ``tool_call`` guardrails let its arguments through (a replacement is the
   call's result; a stop ends the turn: :mod:`._guards`);
6. a tool marked ``needs_approval`` is approved (:func:`approve`: the agent's ``spec.approval``
   policy, else the runtime's permission host);

then the tool runs; an exception it raises is its error result. What it returned (or its
error) passes the agent's ``tool_result`` guardrails. A result longer than the
agent's ``limits.tool_result_max_chars`` is saved to its workspace and the model reads a
preview (:mod:`._evict`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..models import ToolCall
from ..store import ToolResult
from ._approvals import TOOL_OPTIONS, PermissionQuestion, ask_permission, question_path
from ._evict import evict
from ._guards import GuardTrip, Outcome, arguments_text, begin, check
from ._tools import ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("QUOTED_ARGUMENTS", "approve", "invalid_arguments_error", "run_in_batches", "run_tool")


async def run_in_batches(
    agent: Agent, calls: Sequence[ToolCall], run: Callable[[ToolCall], Coroutine[Any, Any, None]]
) -> None:
    """``run(call)`` for each call, in order, except that consecutive calls to safe tools run
    concurrently (all of a batch finish before the next call starts)."""
    batch: list[ToolCall] = []
    for call in [*calls, None]:
        tool = agent.tools.get(call.name, agent) if call is not None else None
        if call is not None and tool is not None and tool.safe:
            batch.append(call)
            continue
        if len(batch) > 1:
            async with anyio.create_task_group() as group:
                for queued in batch:
                    group.start_soon(run, queued)
        elif batch:
            await run(batch[0])
        batch = []
        if call is not None:
            await run(call)


async def run_tool(agent: Agent, call: ToolCall) -> ToolResult:
    """Run one tool call of ``agent``'s: the checks in the module docstring's order, then the
    tool. Every failure is a result the model reads (``is_error``), never an exception."""
    tool = agent.tools.get(call.name, agent)
    policy = agent.spec.tool_policy
    blocked = policy is not None and not policy.permits(call.name)
    if tool is not None and blocked and not tool.keep_on_restrict:
        return ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content=f'error: tool "{call.name}" is not available to this agent: the task '
            "was delegated without it",
            is_error=True,
        )
    if tool is None:
        known = ", ".join(agent.tools.names(agent)) or "none"
        return ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content=f'error: there is no tool "{call.name}"; available tools: {known}',
            is_error=True,
        )
    if call.invalid_arguments is not None:
        return ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content=invalid_arguments_error(call.invalid_arguments),
            is_error=True,
        )
    problems = tool.argument_errors(call.arguments)
    if problems:
        return ToolResult(
            tool_call_id=call.id,
            name=call.name,
            content="error: invalid arguments: " + "; ".join(problems),
            is_error=True,
        )
    guards = agent.spec.guards
    if guards.of("tool_call"):
        asked = arguments_text(call.arguments)
        seen = begin(agent, "tool_call", asked, target=call.id, tool=call.name)
        if seen is not None and not isinstance(seen, Outcome):
            seen = await seen
        if seen is not None and seen.events:  # not run: the replacement is its result
            await agent.lease.append(*seen.events, hold=True)
            return ToolResult(
                tool_call_id=call.id, name=call.name, content=seen.content, is_error=True
            )
    if tool.needs_approval:
        refusal = await approve(agent, call)
        if refusal is not None:
            return ToolResult(tool_call_id=call.id, name=call.name, content=refusal, is_error=True)
    try:
        context = ToolContext(agent, call.id, call.name)
        content = await tool.call(dict(call.arguments), context)
    except (anyio.get_cancelled_exc_class(), KeyboardInterrupt, GuardTrip):
        raise  # a trip: a child's result a guardrail stopped
    except ToolError as exc:
        text = await evict(agent, call.id, await _guarded(agent, call, f"error: {exc}"))
        return ToolResult(tool_call_id=call.id, name=call.name, content=text, is_error=True)
    except Exception as exc:
        failed = f"error: {type(exc).__name__}: {exc}"
        text = await evict(agent, call.id, await _guarded(agent, call, failed))
        return ToolResult(tool_call_id=call.id, name=call.name, content=text, is_error=True)
    if guards.of("tool_result"):
        said = content if content.__class__ is str else str(content)  # ToolOutput: its text
        seen = begin(agent, "tool_result", said, target=call.id, tool=call.name)
        if seen is not None and not isinstance(seen, Outcome):
            seen = await seen
        if seen is not None and seen.events:
            await agent.lease.append(*seen.events, hold=True)
            content = seen.content  # a replacement: the tool's images are dropped with its text
    text = await evict(agent, call.id, content)
    if isinstance(content, ToolOutput) and content.images:
        return ToolResult(
            tool_call_id=call.id, name=call.name, content=str(text), images=content.images
        )
    return ToolResult(tool_call_id=call.id, name=call.name, content=text)


async def _guarded(agent: Agent, call: ToolCall, text: str) -> str:
    """A tool's result as its ``tool_result`` guardrails let it through (their records
    stored before it); a trip ends the turn."""
    if not agent.spec.guards.of("tool_result"):
        return text
    seen = await check(agent, "tool_result", text, target=call.id, tool=call.name)
    if seen.events:
        await agent.lease.append(*seen.events, hold=True)
    return seen.content


async def approve(agent: Agent, call: ToolCall) -> str | None:
    """``None`` when the call may run, else the error the model sees."""
    if agent.spec.approval == "allow":
        return None
    if agent.spec.approval == "deny":
        return (
            f'error: tool "{call.name}" needs approval, and this agent may not ask for it '
            "(its approval policy is deny)"
        )
    host = agent.runtime.permission_host if agent.runtime is not None else None
    if host is None:
        return f'error: tool "{call.name}" needs approval, and there is nobody to ask'
    arguments = json.dumps(call.arguments, ensure_ascii=False)[:300]
    question = PermissionQuestion(
        session=agent.session_id,
        asker=f'agent "{agent.name or "default"}"',
        title=f"{call.name}({arguments})",
        kind=None,
        options=TOOL_OPTIONS,
        tool_call_id=call.id,
        path=await question_path(agent),
    )
    answer = await ask_permission(host, question)
    if answer == "allow":
        return None
    return f'error: tool "{call.name}" was not approved'


#: How much of a call's invalid argument text its error result quotes back to the model.
QUOTED_ARGUMENTS = 500


def invalid_arguments_error(raw: str) -> str:
    """The tool result for a call whose argument text is not a JSON object: what is wrong
    with it (the JSON parser's words and position, or what it is instead), then the text."""
    quoted = raw if len(raw) <= QUOTED_ARGUMENTS else raw[:QUOTED_ARGUMENTS] + "..."
    try:
        value: object = json.loads(raw)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if "\n" in raw else f"column {exc.colno}"
        at = " " if exc.msg.endswith(" at") else " at "  # "Unterminated string starting at"
        why = f"the arguments are not valid JSON: {exc.msg}{at}{where}"
    except (ValueError, RecursionError) as exc:
        why = f"the arguments are not valid JSON: {exc}"
    else:
        kinds: dict[type, str] = {
            dict: "an object",
            list: "an array",
            str: "a string",
            bool: "a boolean",
        }
        kind = kinds.get(type(value), "null" if value is None else "a number")
        why = f"the arguments must be a JSON object, not {kind}"
    if not raw.strip():
        why = "the arguments are empty (they must be a JSON object, {} for none)"
    return f"error: {why}: {quoted}; call the tool again with a JSON object"
