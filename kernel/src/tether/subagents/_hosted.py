"""A one-shot child another process drives: the runtime's child host (a cluster) runs it.

:func:`start_hosted_child` writes the child's session and setup window (its first prompt
accepted with it) to the parent's store, as a local child's, gives the session's lease up, and
hands the session to the host, whose driver (on any worker) restores it and runs the prompt.
The run then follows the child's log in the shared store until the prompt's turn has ended:
nothing of the child lives in this process, so the parent's process may die and the child
still finishes; a retry of the parent's turn is told the call was interrupted, as for a local
child.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from ..agents import carry_trace
from ..budgets._accounts import Accounts
from ..contracts import SubagentResult, SubagentStartRequest
from ..errors import TetherError
from ..store import (
    AssistantMessage,
    Event,
    InboxAccepted,
    InboxDiscarded,
    MessageSource,
    StoredEvent,
    TurnEnded,
    TurnStarted,
)
from ._child import (
    DISPOSE_TIMEOUT,
    STRUCTURED_RETRIES,
    LocalChildRun,
    new_message_id,
    parse_structured,
    start_local_child,
)
from ._kit import create_child_session

if TYPE_CHECKING:
    from ..agents import Agent
    from ..models import Model
    from ..runtime import SessionHost

__all__ = ("HostedChildRun", "start_child", "start_hosted_child")

log = logging.getLogger("tether.subagents")

#: How often the child's log is read for what its driver appended, in seconds.
FOLLOW_POLL = 0.05


async def start_child(
    request: SubagentStartRequest,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
    model: Model | None = None,
) -> LocalChildRun | HostedChildRun:
    """Start a one-shot child where the parent's runtime runs children: here
    (:func:`start_local_child`), or, when the runtime has a ``child_host`` (a ``tether worker``
    does), on the host, which drives the child's session from the shared store (a
    :class:`~tether.subagents._hosted.HostedChildRun`). A child with a ``model`` of the
    provider's own (a remote agent) always runs here: its model is an object of this process.
    The providers ``spawn``, ``fork`` and the specialists' use this."""
    runtime = request.parent.runtime
    host = runtime.child_host if runtime is not None else None
    if host is None or model is not None:
        return await start_local_child(
            request, provider=provider, seed=seed, keep_tool_list=keep_tool_list, model=model
        )
    return await start_hosted_child(
        request, host, provider=provider, seed=seed, keep_tool_list=keep_tool_list
    )


async def start_hosted_child(
    request: SubagentStartRequest,
    host: SessionHost,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
) -> HostedChildRun:
    """Create the child's session with its task accepted, and have ``host`` drive it."""
    parent = request.parent
    prompt = InboxAccepted(
        message_id=new_message_id(),
        content=request.prompt,
        source=MessageSource(kind="subagent", sender=parent.session_id),
        trace=carry_trace(parent),  # the child's turns are spans of the delegating call
    )
    _, header, _ = await create_child_session(
        request,
        provider=provider,
        seed=seed,
        keep_tool_list=keep_tool_list,
        first_prompt=prompt,
    )
    store = parent.store
    try:
        await store.release(header.id)  # the host's driver takes it
        await host.send(header.id, request.prompt, message_id=prompt.message_id)
    except BaseException:
        with anyio.CancelScope(shield=True), anyio.move_on_after(DISPOSE_TIMEOUT):
            try:  # nobody was told of it: leave nothing (unless a driver took it already)
                await store.acquire(header.id)
                await store.delete(header.id)
            except TetherError:
                log.warning("child %s was left in the store after its start failed", header.id)
        raise
    return HostedChildRun(host, request, header.id, prompt.message_id, prompt.trace)


class HostedChildRun:
    """A child session the runtime's child host drives (:class:`~tether.subagents.SettlingRun`).

    ``result()`` follows the child's log until its task's turn has ended (an output schema's
    retries are sent to it the same way); a cancel of the request, or ``dispose()``, asks the
    host to stop the child, whose turn then ends ``aborted``."""

    def __init__(
        self,
        host: SessionHost,
        request: SubagentStartRequest,
        child_id: str,
        message_id: str,
        trace: dict[str, str] | None = None,
    ) -> None:
        self._host = host
        self._request = request
        self._child_id = child_id
        self._message_id = message_id
        self._trace = trace  # the delegating call's: the schema's retries are its spans too
        self._result: SubagentResult | None = None
        self._following = anyio.Lock()
        self._after = 0
        self._stopped = False
        self._disposed = False
        self._settling = False

    @property
    def id(self) -> str:
        return self._child_id

    @property
    def local_agent(self) -> Agent | None:
        return None

    async def result(self) -> SubagentResult:
        async with self._following:  # one reader of the log; later callers get its result
            if self._result is None:
                self._result = await self._settle()
                # Its task's turn has ended: it no longer works under the budgets above it
                # (its agent, on another process, never closes in this one).
                accounts = Accounts.find(self._request.parent.store)
                if accounts is not None:
                    accounts.child_left(self._child_id)
        return self._result

    async def dispose(self) -> None:
        """Stop the child if it has not settled, and wait (bounded) for its turn's end."""
        if self._disposed:
            return
        self._disposed = True
        if self._result is not None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(DISPOSE_TIMEOUT):
            await self._stop()
            await self.result()

    def on_settled(self, callback: Callable[[SubagentResult], Awaitable[None]]) -> bool:
        """Await ``callback(result)`` in a job of the parent's once the child's task has
        ended; ``False`` when the run was disposed or is settling already."""
        if self._disposed or self._settling:
            return False
        self._settling = True

        async def settle() -> None:
            try:
                result = await self.result()
            except TetherError as exc:
                # The child's log could not be read (the store failed, the session is gone):
                # the parent is told so, instead of its job failing and taking it down.
                result = SubagentResult(output="", stop_reason="error", diagnostic=str(exc))
            self._disposed = True
            try:
                await callback(result)
            except Exception:
                log.exception("the on_settled callback of child %s failed", self._child_id)

        try:
            self._request.parent.start_job(settle)
        except RuntimeError:
            self._settling = False
            return False
        return True

    # ------------------------------------------------------------------ reading the child

    async def _settle(self) -> SubagentResult:
        schema = self._request.output_schema
        message_id = self._message_id
        for attempt in range(STRUCTURED_RETRIES + 1):
            stop, output, error = await self._follow(message_id)
            if self._stopped or self._request.cancel.cancelled:
                return SubagentResult(output=output, stop_reason="aborted")
            if stop != "completed":
                return SubagentResult(output=output, stop_reason=stop, diagnostic=error)  # type: ignore[arg-type]
            if schema is None:
                return SubagentResult(output=output, stop_reason="completed")
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
            message_id = await self._host.send(
                self._child_id,
                "Your final answer must be JSON valid against the output schema given with the "
                "task. Problems with your last answer:\n- "
                + "\n- ".join(problems)
                + "\nAnswer again with the corrected JSON only.",
                message_id=new_message_id(),
                trace=self._trace,
            )
        raise AssertionError("unreachable")

    async def _follow(self, message_id: str) -> tuple[str, str, str | None]:
        """Read the child's log until the turn of ``message_id`` has ended: its stop reason,
        its last non-empty answer and its error. A cancel of the request stops the child
        meanwhile."""
        found: list[tuple[str, str, str | None]] = []
        failure: TetherError | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._stop_on_cancel)
            try:
                found.append(await self._read_turn(message_id))
            except TetherError as exc:
                failure = exc  # raised as itself, not in the task group's exception group
            group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return found[0]

    async def _stop_on_cancel(self) -> None:
        await self._request.cancel.wait()
        await self._stop()

    async def _stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            with anyio.CancelScope(shield=True):  # delivered even when the reader is done
                await self._host.cancel(self._child_id)

    async def _read_turn(self, message_id: str) -> tuple[str, str, str | None]:
        store = self._request.parent.store
        turn: int | None = None
        output = ""
        while True:
            events: list[StoredEvent] = await store.events(self._child_id, after=self._after)
            for stored in events:
                self._after = stored.seq
                event = stored.event
                if isinstance(event, TurnStarted) and event.message_id == message_id:
                    turn, output = event.turn, ""  # (again, when a cut turn is run again)
                elif isinstance(event, InboxDiscarded) and event.message_id == message_id:
                    return "aborted", "", None  # stopped before it began
                elif turn is None:
                    continue
                elif isinstance(event, AssistantMessage) and event.content.strip():
                    output = event.content
                elif isinstance(event, TurnEnded) and event.turn == turn:
                    return event.stop_reason, output, event.error
            await anyio.sleep(FOLLOW_POLL)
