"""A local child agent: composed in its setup window, run in its own session, disposed.

Both in-process providers (spawn and fork) use :func:`start_local_child`; they differ in the
seed (fork copies the parent's completed turns) and in how a tool filter is applied (fork keeps
the parent's tool list byte-identical for prompt-cache reuse and refuses filtered calls).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..agents import new_header, resolve_preset_model
from ..agents._delegation import CONTINUABLE_DESCRIPTOR, DELEGATION_DESCRIPTOR
from ..errors import ErrorCode, SubagentError
from ..store import (
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    MessageSource,
)
from ._depth import child_depth
from ._types import SubagentResult, SubagentStartRequest
from .notices import CONTINUABLE_NOTE, DELEGATION_NOTE

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = (
    "CONTINUABLE_DESCRIPTOR",
    "LocalChildRun",
    "compose_local_child",
    "final_output",
    "parse_structured",
    "restore_local_child",
    "start_local_child",
)

REPORT_HINT = " Use the report tool to tell it something before you finish."
#: How many times an answer that breaks the output schema is sent back before the run fails.
STRUCTURED_RETRIES = 2
#: How long ``dispose()`` waits for a cancelled child to record its end, in seconds.
DISPOSE_TIMEOUT = 10.0

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```\s*$", re.DOTALL)


def final_output(messages: Sequence[Any]) -> str:
    """The last non-empty assistant message's text (usage-only, empty ones skipped)."""
    for message in reversed(messages):
        if message.role == "assistant" and message.content.strip():
            return message.content
    return ""


def parse_structured(text: str, schema: Any) -> tuple[Any, list[str]]:
    """``(value, problems)``: the JSON in ``text`` (a fenced block is accepted) and what is
    wrong with it against ``schema`` (empty when valid)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced[1]
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, [f"the answer is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    problems = [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in validator.iter_errors(value)
    ]
    return value, problems


class LocalChildRun:
    """A child agent running in this process, hosted by a task its parent agent owns (so the
    parent's teardown also ends the child). ``dispose()`` may be called from any task."""

    def __init__(self, child: Agent, request: SubagentStartRequest, history_start: int) -> None:
        self._child = child
        self._request = request
        self._history_start = history_start
        self._disposed = False
        self._result: SubagentResult | None = None
        self._release = anyio.Event()
        self._ready = anyio.Event()
        self._hosted = anyio.Event()
        self._host_error: BaseException | None = None

    async def host_in(self, parent: Agent) -> None:
        """Open the child in a job of ``parent``'s (left when the parent is left) and wait
        until it is open; what opening it raised is raised here. The job then runs the
        child's accepted task in its own task (no task more per child)."""
        try:
            parent.start_job(self._host)
            parent.on_teardown(self, self._stop)
        except RuntimeError:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                f'agent "{parent.session_id}" is not running, so it cannot host a child',
                remedy="delegate from inside `async with agent:`",
            ) from None
        await self._ready.wait()
        if self._host_error is not None:
            raise self._host_error

    async def _host(self) -> None:
        """The child's ``async with``, entered and left in this one task, which the parent
        owns. Shielded, so that the child's cancelled turn still records its end
        (``aborted``); the parent's teardown releases it through ``Agent.on_teardown``."""
        try:
            with anyio.CancelScope(shield=True):
                async with self._child:
                    self._ready.set()
                    await self._child.run_parked()  # the accepted task, inline
                    await self._release.wait()
        except Exception as exc:  # reported to whoever waits; never crashes the parent
            self._host_error = exc
        finally:
            self._request.parent.on_teardown(self, None)
            self._ready.set()
            self._hosted.set()

    def _stop(self) -> None:
        """The parent is being left: end the child's turn (it records its end) and leave."""
        self._child.interrupt()
        self._release.set()

    @property
    def id(self) -> str:
        return self._child.session_id

    @property
    def local_agent(self) -> Agent:
        return self._child

    async def result(self) -> SubagentResult:
        if self._result is None:
            self._result = await self._settle()
        return self._result

    async def _settle(self) -> SubagentResult:
        child, request = self._child, self._request
        # A callback, not a watcher task: one task fewer per child.
        request.cancel.on_cancel(child.interrupt)
        result = await self._until_answered()
        if request.cancel.cancelled and result.stop_reason == "completed":
            return result.model_copy(update={"stop_reason": "aborted"})
        return result

    async def _until_answered(self) -> SubagentResult:
        child, schema = self._child, self._request.output_schema
        await child.when_idle()
        for attempt in range(STRUCTURED_RETRIES + 1):
            stop = child.last_stop_reason
            output = final_output(child.messages[self._history_start :])
            if child.fault is not None:
                return SubagentResult(output="", stop_reason="error", diagnostic=str(child.fault))
            if stop != "completed":
                diagnostic = child.last_error if stop == "error" else None
                return SubagentResult(output=output, stop_reason=stop, diagnostic=diagnostic)
            if schema is None:
                return SubagentResult(output=output, stop_reason=stop)
            value, problems = parse_structured(output, schema)
            if not problems:
                return SubagentResult(output=output, structured=value, stop_reason="completed")
            if attempt == STRUCTURED_RETRIES:
                return SubagentResult(
                    output=output,
                    stop_reason="error",
                    diagnostic="the final answer did not match the output schema: "
                    + "; ".join(problems)[:2000],
                )
            await child.run(
                "Your final answer must be JSON valid against the output schema given with the "
                "task. Problems with your last answer:\n- "
                + "\n- ".join(problems)
                + "\nAnswer again with the corrected JSON only.",
                source=MessageSource(kind="system"),
            )
        raise AssertionError("unreachable")

    async def dispose(self) -> None:
        """Cancel the child and wait until it is quiet (bounded by ``DISPOSE_TIMEOUT``)."""
        if self._disposed:
            return
        self._disposed = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(DISPOSE_TIMEOUT):
            await self._child.cancel()
            self._release.set()
            await self._hosted.wait()


async def compose_local_child(
    request: SubagentStartRequest,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
    continuable: bool = False,
    model: Any = None,
    model_route: str | None = None,
    first_prompt: InboxAccepted | None = None,
) -> Agent:
    """The setup window: create the child's session and log, and return its agent, restored
    and not yet entered. With ``continuable``, a ``subagent`` descriptor (what a cold restore
    rebuilds the child from) follows the delegation descriptor."""
    parent = request.parent
    runtime = parent.runtime
    if runtime is None:
        raise SubagentError(
            ErrorCode.SUBAGENT_INVALID,
            f'agent "{parent.session_id}" was composed without a runtime, so it cannot delegate',
            remedy="compose agents with tether.runtime.compose_agent",
        )
    depth = child_depth(parent, request.max_depth)
    # The parent agent preset's plugins first: the child is that preset in a child scope.
    preset = runtime.preset(parent.name)
    options = request.agent_options
    remote = model is not None
    if model_route is None and options is not None:
        model_route = options.model
    if model is None:
        model = parent.model
        if model_route is not None:
            model = resolve_preset_model(preset, model_route)
    limits = _limits(parent.limits, options.max_output_tokens if options else None)
    # The parent's explicit overrides, snapshotted now: a child starts from the parent's own
    # tools and call policy (a delegated parent's narrowing carries down), never the preset's.
    overrides: dict[str, Any] = {}
    if parent.tools.names() != preset.tools.names():
        overrides["tools"] = parent.tools.names()
    if parent.tool_policy is not None:
        overrides["tool_policy"] = parent.tool_policy.as_data()
    tools = parent.tools
    policy = parent.tool_policy
    if request.tool_filter is not None:
        # A name no plugin offers is a misspelling; a name an ancestor's delegation already
        # took away (or this agent never had) is narrowed again, which changes nothing.
        known = runtime.known_tool_names()
        if not keep_tool_list:
            # A scoped restrict(): a new registry for this child; the parent's stays as it is.
            tools = tools.restrict(request.tool_filter, known=known)
        else:
            request.tool_filter.check_names([*known, *tools.names()], available=tools.names())
            policy = request.tool_filter.narrow(policy)
    if continuable:
        tools = _with_kept_tools(tools, parent.tools)
    seed = [e for e in seed if not isinstance(e, InboxAccepted | InboxDiscarded)]
    header = new_header(
        agent=parent.name,
        label=request.label,
        parent_session=parent.session_id,
        origin="subagent",
        delegation_depth=depth,
        seed_length=len(seed),
        model=None if remote else (model_route or parent.model_spec),
    )
    setup: list[Event] = [*seed]
    # The delegated policy, snapshotted now and recorded in the child's own log: what every
    # route that continues the child restores it with (tether.agents applies it on restore).
    setup.append(
        DescriptorEvent(
            kind=DELEGATION_DESCRIPTOR,
            version=1,
            data={
                "provider": provider,
                "parent_session": parent.session_id,
                "approval": "deny",
                "parent_overrides": overrides,
                "max_depth": request.max_depth,
                "tool_filter": _filter_data(request),
                "persona": request.persona,
                "output_schema": request.output_schema,
                "tools": tools.names(),
                "policy": policy.as_data() if policy is not None else None,
            },
        )
    )
    if continuable:
        setup.append(
            DescriptorEvent(
                kind=CONTINUABLE_DESCRIPTOR,
                version=1,
                data={
                    "mode": "continuable",
                    "provider": provider,
                    "label": request.label,
                    "model": model_route,
                    "max_output_tokens": limits.max_output_tokens,
                    "persona": request.persona,
                    "tool_filter": _filter_data(request),
                    "tools": tools.names() if tools is not preset.tools else None,
                    "policy": policy.as_data() if policy is not None else None,
                    "max_depth": request.max_depth,
                },
            )
        )
    note = DELEGATION_NOTE
    if request.persona:
        note += f"\n\nYour persona for this task:\n{request.persona}"
    if policy is not None:
        allowed = policy.as_data()
        note += f"\n\nOnly these tools are yours to call for this task: {json.dumps(allowed)}."
    if request.output_schema is not None:
        note += (
            "\n\nEnd with a final answer that is only JSON valid against this JSON Schema:\n"
            + json.dumps(request.output_schema)
        )
    if continuable:
        # A child behind a provider-supplied model (a remote agent) cannot call our tools.
        hint = REPORT_HINT if tools.get("report") and not remote else ""
        note += "\n\n" + CONTINUABLE_NOTE + hint
    setup.append(ContextMessage(role="user", content=note, origin="delegation"))
    if first_prompt is not None:
        setup.append(first_prompt)  # accepted with the session: one durable step
    # The session and its setup window are created together: never half a child.
    await parent.store.create(header, setup)
    try:
        child = preset.agent(
            header, parent.store, model, limits=limits, cwd=parent.cwd, runtime=runtime
        )
        child.tools = tools
        child.scope = (parent.scope or runtime.kernel.global_scope).child(header.id)
        child.tool_policy = policy
        child.approval = "deny"  # pinned by the delegation (recorded as approval: deny above)
        await child.restore(log=setup)  # just written: no need to read it back
    except BaseException:
        with anyio.CancelScope(shield=True):
            await parent.store.delete(header.id)  # nobody was told of it: leave nothing
        raise
    return child


async def restore_local_child(parent: Agent, header: Any, descriptor: DescriptorEvent) -> Agent:
    """A continuable child rebuilt from its own log (a cold restore), restored and not yet
    entered. The provider is not called: the descriptor says everything the setup window
    decided (its model and budget here; its tools, their policy and its approvals are pinned
    by its ``delegation`` descriptor, which ``Agent.restore`` applies), and the log holds the
    rest."""
    runtime = parent.runtime
    assert runtime is not None
    data = descriptor.data
    preset = runtime.preset(header.agent)
    model = parent.model
    if data.get("model"):
        model = resolve_preset_model(preset, data["model"])
    limits = _limits(parent.limits, data.get("max_output_tokens"))
    child = preset.agent(
        header, parent.store, model, limits=limits, cwd=parent.cwd, runtime=runtime
    )
    child.scope = (parent.scope or runtime.kernel.global_scope).child(header.id)
    child.approval = "deny"
    await child.restore()
    return child


async def start_local_child(
    request: SubagentStartRequest,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
    model: Any = None,
) -> LocalChildRun:
    """Compose the child (its setup window), accept its first prompt, return its run.
    ``model`` replaces the child's model (a provider whose children are remote agents)."""
    parent = request.parent
    prompt = InboxAccepted(
        message_id=new_message_id(),
        content=request.prompt,
        source=MessageSource(kind="subagent", sender=parent.session_id),
    )
    child = await compose_local_child(
        request,
        provider=provider,
        seed=seed,
        keep_tool_list=keep_tool_list,
        model=model,
        first_prompt=prompt,
    )
    # The task is accepted with the session; the child's history starts before it.
    run = LocalChildRun(child, request, len(child.messages))
    await run.host_in(parent)  # the host runs the accepted task
    return run


def new_message_id() -> str:
    """An inbox message id, as agents make them."""
    return f"msg_{os.urandom(8).hex()}"


def _limits(limits: Any, max_output_tokens: int | None) -> Any:
    if max_output_tokens is None:
        return limits
    return dataclasses.replace(limits, max_output_tokens=max_output_tokens)


def _with_kept_tools(tools: Any, parent_tools: Any) -> Any:
    """``tools`` plus the parent's tools a filter does not remove (``report``)."""
    missing = [t for t in parent_tools if t.keep_on_restrict and tools.get(t.name) is None]
    if not missing:
        return tools
    return type(tools)([*tools, *missing])


def _filter_data(request: SubagentStartRequest) -> dict[str, Any] | None:
    return request.tool_filter.as_data() if request.tool_filter is not None else None
