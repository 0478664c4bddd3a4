"""A one-shot local child: composed in its setup window, run in its own session, disposed.

Both in-process providers (spawn and fork) use :func:`start_local_child`; they differ in the
seed (fork copies the parent's completed turns) and in how a tool filter is applied (fork keeps
the parent's tool list byte-identical for prompt-cache reuse and refuses filtered calls). The
child is composed with the local-child kit (:mod:`tether.subagents._kit`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from ..agents import carry_trace
from ..contracts import SubagentResult, SubagentStartRequest
from ..errors import ErrorCode, SubagentError
from ..store import Event, InboxAccepted, MessageSource
from ._kit import compose_local_child

if TYPE_CHECKING:
    from ..agents import Agent
    from ..models import Message, Model

__all__ = (
    "LocalChildRun",
    "final_output",
    "new_message_id",
    "parse_structured",
    "start_local_child",
)

log = logging.getLogger("tether.subagents")

#: How many times an answer that breaks the output schema is sent back before the run fails.
STRUCTURED_RETRIES = 2
#: How long ``dispose()`` waits for a cancelled child to record its end, in seconds.
DISPOSE_TIMEOUT = 10.0

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```\s*$", re.DOTALL)


def final_output(messages: Sequence[Message]) -> str:
    """The last non-empty assistant message's text (usage-only, empty ones skipped)."""
    for message in reversed(messages):
        if message.role == "assistant" and message.content.strip():
            return message.content
    return ""


def answers_of(agent: Agent) -> int:
    """How many answers ``agent``'s session holds: those a compaction summary replaced and
    those in its history. A position in the history does not mark where a task began (a
    compaction shortens the history); this count only grows."""
    return agent.budget.earlier_answers + sum(1 for m in agent.messages if m.role == "assistant")


def output_since(agent: Agent, answers: int) -> str:
    """The last non-empty answer ``agent`` gave after its first ``answers`` (see
    :func:`answers_of`): what a task begun then wrote, even after a compaction replaced the
    history the task began with."""
    new = answers_of(agent) - answers
    for message in reversed(agent.messages):
        if new <= 0:
            break
        if message.role == "assistant":
            new -= 1
            if message.content.strip():
                return message.content
    return ""


def parse_structured(text: str, schema: Mapping[str, Any]) -> tuple[Any, list[str]]:
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
        # typeshed's deprecated two-argument overload of iter_errors is untyped
        for error in validator.iter_errors(value)  # pyright: ignore[reportUnknownMemberType]
    ]
    return value, problems


class LocalChildRun:
    """A child agent running in this process, hosted by one task its parent agent owns (so the
    parent's teardown also ends the child). The host enters the child, runs its task, settles
    its result (output-schema retries included), hands it to an ``on_settled`` callback if one
    was given, and keeps the child open until it is disposed. ``dispose()`` may be called from
    any task but the callback's.

    A live child holds few waitable objects: an Event is made only while someone waits (for the
    child to open, for its result, for its host to leave, or the host for its release)."""

    __slots__ = (
        "_answers_start",
        "_calling_back",
        "_cancelled",
        "_child",
        "_disposed",
        "_gone",
        "_host_error",
        "_hosting",
        "_on_settled",
        "_opened",
        "_parent",
        "_release",
        "_released",
        "_result",
        "_schema",
        "_settled",
        "_stopped",
    )

    def __init__(self, child: Agent, request: SubagentStartRequest, answers_start: int) -> None:
        # Not the request: what the run needs of it is its parent and output schema, and
        # whether its signal fired (told by a callback: a signal nobody else holds can no
        # longer fire, and a background child's is held by nobody once its call returned).
        self._child = child
        self._parent = request.parent
        self._schema = request.output_schema
        self._answers_start = answers_start
        self._cancelled = False
        self._result: SubagentResult | None = None
        self._host_error: BaseException | None = None
        self._hosting = False
        self._opened: anyio.Event | None = None
        self._released = False  # disposed or stopped: the host may leave once settled
        self._release: anyio.Event | None = None
        self._settled: anyio.Event | None = None  # result() callers before the result
        self._gone: anyio.Event | None = None  # dispose() waiting for the host to leave
        self._on_settled: Callable[[SubagentResult], Awaitable[None]] | None = None
        self._calling_back = False
        self._stopped = False
        self._disposed = False
        # A callback, not a watcher task: one task fewer per child.
        request.cancel.on_cancel(self._cancel)

    async def host_in(self, parent: Agent) -> None:
        """Open the child in a job of ``parent``'s (left when the parent is left) and wait
        until it is open; what opening it raised is raised here. The job then runs the
        child's accepted task in its own task (no task more per child)."""
        self._opened = anyio.Event()
        try:
            parent.start_job(self._host)
            parent.on_teardown(self, self._stop)
        except RuntimeError:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                f'agent "{parent.session_id}" is not running, so it cannot host a child',
                remedy="delegate from inside `async with agent:`",
            ) from None
        self._hosting = True
        await self._opened.wait()
        self._opened = None
        if self._host_error is not None:
            raise self._host_error

    async def _host(self) -> None:
        """The child's ``async with``, entered and left in this one task, which the parent
        owns. Once it is open, the child's own task group (entered in this task, around the
        rest of the body) is shielded: the parent's cancelled group does not reach the
        child's turn, which records its end (``aborted``) when the parent's teardown releases
        it through ``Agent.on_teardown``, nor the ``on_settled`` callback, which delivers its
        result. Entering needs no shield (a cancelled entry undoes itself, leaving the session
        as a crash would), nor does leaving (its writes shield themselves)."""
        try:
            async with self._child as child:
                child.loop.require_open().cancel_scope.shield = True
                _set(self._opened)
                await child.loop.run_parked()  # the accepted task, inline
                self._result = await self._settle()
                _set(self._settled)
                await self._serve()
        except Exception as exc:  # reported to whoever waits; never crashes the parent
            self._host_error = exc
        finally:
            self._parent.on_teardown(self, None)
            self._hosting = False
            for event in (self._opened, self._settled, self._gone):
                _set(event)

    async def _serve(self) -> None:
        """Settled: call the ``on_settled`` callback (then leave: the run is disposed), or
        keep the child open until it is disposed or its parent is left."""
        while True:
            callback, self._on_settled = self._on_settled, None
            if callback is not None and not self._stopped and self._result is not None:
                self._released = self._calling_back = True
                try:
                    await callback(self._result)
                except Exception:
                    log.exception("the on_settled callback of child %s failed", self.id)
                finally:
                    self._calling_back = False
                self._disposed = True
                return
            if self._released:
                return
            self._release = anyio.Event()
            await self._release.wait()

    def _cancel(self) -> None:
        """The request's signal fired: abort the child's turn (its result says ``aborted``)."""
        self._cancelled = True
        self._child.interrupt()

    def _stop(self) -> None:
        """The parent is being left: end the child's turn (it records its end) and leave."""
        self._stopped = True
        self._child.interrupt()
        self._released = True
        _set(self._release)

    def on_settled(self, callback: Callable[[SubagentResult], Awaitable[None]]) -> bool:
        """Await ``callback(result)`` in the run's own task once the result is known (at once
        if it is), then dispose of the child: the run needs no task of the caller's to be
        waited for. Not called when the parent is left first. ``False`` when the run has ended
        already (its result is there for :meth:`result`)."""
        if not self._hosting or self._released:
            return False
        self._on_settled = callback
        _set(self._release)
        return True

    @property
    def id(self) -> str:
        return self._child.session_id

    @property
    def local_agent(self) -> Agent:
        return self._child

    async def result(self) -> SubagentResult:
        if self._result is None and self._hosting:
            if self._settled is None:
                self._settled = anyio.Event()
            await self._settled.wait()
        if self._result is not None:
            return self._result
        if self._host_error is not None:
            raise self._host_error
        return SubagentResult(output="", stop_reason="aborted")  # disposed before it settled

    async def _settle(self) -> SubagentResult:
        result = await self._until_answered()
        if self._cancelled and result.stop_reason == "completed":
            return result.model_copy(update={"stop_reason": "aborted"})
        return result

    async def _until_answered(self) -> SubagentResult:
        child, schema = self._child, self._schema
        await child.when_idle()
        for attempt in range(STRUCTURED_RETRIES + 1):
            stop = child.loop.last_stop_reason
            output = output_since(child, self._answers_start)
            if child.fault is not None:
                return SubagentResult(output="", stop_reason="error", diagnostic=str(child.fault))
            if stop != "completed":
                diagnostic = child.loop.last_error if stop == "error" else None
                return SubagentResult(output=output, stop_reason=stop, diagnostic=diagnostic)
            if schema is None:
                return SubagentResult(output=output, stop_reason=stop)
            value, problems = parse_structured(output, schema)
            if not problems:
                return SubagentResult(output=output, structured=value, stop_reason="completed")
            if attempt == STRUCTURED_RETRIES or self._released:
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
        if self._calling_back:
            return  # the callback's own task: the run is disposed once the callback returns
        with anyio.CancelScope(shield=True), anyio.move_on_after(DISPOSE_TIMEOUT):
            await self._child.cancel()
            self._released = True
            _set(self._release)
            if self._hosting:
                self._gone = anyio.Event()
                await self._gone.wait()


def _set(event: anyio.Event | None) -> None:
    if event is not None:
        event.set()


async def start_local_child(
    request: SubagentStartRequest,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
    model: Model | None = None,
) -> LocalChildRun:
    """Compose the child (its setup window), accept its first prompt, return its run.
    ``model`` replaces the child's model (a provider whose children are remote agents)."""
    parent = request.parent
    prompt = InboxAccepted(
        message_id=new_message_id(),
        content=request.prompt,
        source=_subagent_source(parent.session_id),
        trace=carry_trace(parent),  # the child's turns are spans of the delegating call
    )
    child = await compose_local_child(
        request,
        provider=provider,
        seed=seed,
        keep_tool_list=keep_tool_list,
        model=model,
        first_prompt=prompt,
    )
    # The task is accepted with the session; its answers are the ones given from here on.
    run = LocalChildRun(child, request, answers_of(child))
    await run.host_in(parent)  # the host runs the accepted task
    return run


@functools.lru_cache(maxsize=64)
def _subagent_source(sender: str) -> MessageSource:
    """The source of a first prompt ``sender`` delegates: one frozen object shared by its
    children (each live child keeps its prompt's source)."""
    return MessageSource(kind="subagent", sender=sender)


def new_message_id() -> str:
    """An inbox message id, as agents make them."""
    return f"msg_{os.urandom(8).hex()}"
