"""The activities a worker runs: they act on the tether store with the worker's runtime.

Each is safe to run again after it was cut short (Temporal retries an activity whose worker
died): opening a session that exists does nothing, a message already in the mailbox or the log
is not posted twice, and a drive restores the session from its log (taking the lease over from
a dead driver and closing the turn it left open) before it runs what is waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from tether.agents import admit_caller, new_header, resolve_agent_name
from tether.contracts import Admission, Caller
from tether.errors import CallerError, ErrorCode, StoreError, TetherError
from tether.runtime import HeldSession, Runtime
from tether.store import (
    Event,
    InboxAccepted,
    MessageSource,
    SessionStore,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.store.replay import fold
from tether.subagents.local import find_continuable_descriptor

from ._workflow import DRIVE, FAIL, OPEN, POST, DriveResult, SessionMessage, SessionStart

__all__ = ("SessionActivities",)

#: tether errors another attempt can get past (a lease that has not expired yet, a busy or
#: unreachable store); any other is final for the drive.
_RETRY = {ErrorCode.SESSION_BUSY, ErrorCode.STORE_BUSY, ErrorCode.STORE_UNAVAILABLE}
#: How long a cancelled drive waits for its aborted turn to record its end, in seconds.
CANCEL_GRACE = 10.0


class SessionActivities:
    """The activities of one worker, acting through its open ``runtime`` on its ``store``."""

    def __init__(self, runtime: Runtime, store: SessionStore, heartbeat_every: float) -> None:
        self.runtime = runtime
        self.store = store
        self.heartbeat_every = heartbeat_every
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def all(self) -> list[Callable[..., Any]]:
        return [self.open_session, self.post_message, self.drive_session, self.fail_waiting]

    @activity.defn(name=OPEN)
    async def open_session(self, start: SessionStart) -> dict[str, Any] | None:
        """Create the session if it does not exist yet (its lease given back at once), for
        the caller of the message that starts it (its initiator). A caller the agent's gates
        refuse a new session: nothing is created, and the refusal is returned
        (:func:`refusal_of`) for the workflow to answer the message with."""
        with _failures():
            try:
                await self.store.header(start.session_id)
                return None
            except StoreError as exc:
                if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                    raise
            preset = self.runtime.preset(resolve_agent_name(self.runtime.kernel, start.agent))
            caller = cluster_caller(start.caller)
            try:
                admit_caller(
                    preset.caller_gates, Admission(start.session_id, preset.name, caller, "session")
                )
            except CallerError as exc:
                return refusal_of(exc)
            header = new_header(
                session_id=start.session_id,
                agent=preset.name,
                label=start.label,
                model=preset.model_spec,
                caller=caller,
            )
            try:
                await self.store.create(header)
            except StoreError as exc:
                if exc.code is not ErrorCode.SESSION_EXISTS:
                    raise
                return None
            await self.store.release(start.session_id)
            return None

    @activity.defn(name=POST)
    async def post_message(self, session_id: str, message: SessionMessage) -> None:
        """Post ``message`` to the session's mailbox, once: a retry after a post that landed
        finds it in the mailbox, or already taken into the log."""
        with _failures():
            if any(
                m.message_id == message.message_id for m in await self.store.mailbox(session_id)
            ):
                return
            for stored in await self.store.events(session_id):
                event = stored.event
                if isinstance(event, InboxAccepted) and event.message_id == message.message_id:
                    return
            kind = {"turn": "followup", "step": "steer", "context": "inject"}[message.delivery]
            caller = cluster_caller(message.caller)
            header = await self.store.header(session_id)
            preset = self.runtime.preset(resolve_agent_name(self.runtime.kernel, header.agent))
            # The agent's gates, as a local session asks them: a refused message is not posted.
            # One that names no caller (its parent's worker retrying a hosted child, an
            # anonymous submitter) is asked about as the session's initiator, as a local
            # session asks about its current caller.
            asking = caller if caller is not None else header.caller
            admit_caller(preset.caller_gates, Admission(session_id, preset.name, asking, kind))  # type: ignore[arg-type]
            await self.store.post(
                session_id,
                InboxAccepted(
                    message_id=message.message_id,
                    content=message.content,
                    delivery=message.delivery,  # type: ignore[arg-type]
                    source=MessageSource(
                        kind=kind,  # type: ignore[arg-type]
                        sender=message.sender,
                        caller=caller,
                    ),
                    trace=message.trace or None,
                ),
            )

    @activity.defn(name=DRIVE)
    async def drive_session(self, session_id: str, discard: bool = False) -> DriveResult:
        """Restore the session on this worker and run what waits (the mailbox, and messages a
        cut drive left unrun) until it is quiet; heartbeats all the while. With ``discard``
        (a cancel came before this drive), drop what waits instead of running it.

        A cancel of the activity (the workflow's ``cancel`` or ``interrupt`` signal, seen at a
        heartbeat) aborts the running turn, which records its end, and parks the messages not
        begun."""
        turns: list[str] = []

        def hear(event: object) -> None:
            if isinstance(event, TurnEnded):
                turns.append(event.stop_reason)

        beating = asyncio.create_task(self._heartbeat())
        try:
            with _failures():
                runtime = self.runtime
                # A continuable child runs under its root (its activation, follow-up authority
                # and notices are its ancestors'): the root's recovery restores it and runs
                # its mail. Any other session (a root, a one-shot child) is driven itself.
                agent = await runtime.compose(session_id=await self._driver_of(session_id))
                agent.listen(hear)
                # Held as every session is: restored (the lease taken over from a dead
                # driver), its children recovered, its model closed once the drive is done;
                # a store fault that stopped it is raised on leaving.
                async with runtime.hold(agent, recover=True) as held:
                    if discard:
                        await agent.cancel(keep_inbox=False)
                    else:
                        work = asyncio.ensure_future(_drive(held))
                        try:
                            await asyncio.shield(work)
                        except asyncio.CancelledError:
                            # Stopped by the workflow: the turn ends ``aborted`` (recorded)
                            # and what waits stays parked (a cancel's next drive drops it, an
                            # interrupt's next message runs it); then the cancel goes on.
                            await agent.cancel(keep_inbox=True)
                            with contextlib.suppress(Exception):
                                await asyncio.wait_for(work, CANCEL_GRACE)
                            raise
        finally:
            beating.cancel()
        return DriveResult(
            turns=len(turns), stop_reason=turns[-1] if turns else "completed", worker=self.name
        )

    @activity.defn(name=FAIL)
    async def fail_waiting(self, session_id: str, error: str) -> int:
        """Answer each message the session accepted and never ran with a turn of its own that
        ends ``error`` (``error`` says why: the drive failed for good); how many. A session
        whose last turn a crash left open is left alone (the next driver repairs it); one
        another process drives is ``SESSION_BUSY`` (tried again)."""
        store = self.store
        events = list[Event]()
        with _failures():
            await store.acquire(session_id)
            try:
                await store.take_mail(session_id)
                folded = fold([stored.event for stored in await store.events(session_id)])
                if folded.open_turn is not None:
                    return 0
                turn = folded.turns
                for pending in folded.unclaimed:
                    turn += 1
                    events += [
                        TurnStarted(turn=turn, message_id=pending.message_id),
                        UserMessage(
                            message_id=pending.message_id,
                            content=pending.content,
                            source=pending.source,
                        ),
                        TurnEnded(
                            turn=turn,
                            stop_reason="error",
                            error=f"the cluster could not run this session: {error}"[:2000],
                        ),
                    ]
                if events:
                    await store.append(session_id, events)
            finally:
                await store.release(session_id)
        return len(events) // 3

    async def _driver_of(self, session_id: str) -> str:
        """The session whose drive runs ``session_id``'s messages: its root for a continuable
        child, else itself."""
        store = self.store
        header = await store.header(session_id)
        if (
            header.parent_session is None
            or await find_continuable_descriptor(store, header) is None
        ):
            return session_id
        seen = {header.id}
        while header.parent_session is not None and header.parent_session not in seen:
            seen.add(header.parent_session)
            header = await store.header(header.parent_session)
        return header.id

    async def _heartbeat(self) -> None:
        # The first beat is due a third of the timeout after the start, not at it: a drive
        # that ends sooner (most do) costs the server no heartbeat at all.
        while True:
            await asyncio.sleep(self.heartbeat_every)
            activity.heartbeat()


def refusal_of(exc: TetherError) -> dict[str, Any]:
    """What a client needs to raise ``exc`` again (:func:`tether_temporal._client.raised`):
    its class, code, message, key and remedy."""
    return {
        "class": type(exc).__name__,
        "code": str(exc.code),
        "message": exc.message,
        "key": exc.key,
        "remedy": exc.remedy,
    }


def cluster_caller(data: dict[str, Any] | None) -> Caller | None:
    """The caller a message (or a workflow's start) carries, vouched for by the cluster
    (``via`` ``cluster``: the worker did not see the submitter authenticate);
    ``CALLER_INVALID`` when it is not a caller (final: another attempt reads the same)."""
    if data is None:
        return None
    try:
        return Caller.model_validate({**data, "via": "cluster"})
    except ValidationError as exc:
        errors = exc.errors()
        problem = errors[0]["msg"] if errors else str(exc)
        raise CallerError(
            ErrorCode.CALLER_INVALID,
            f"the caller a cluster message carries cannot be read: {problem}",
            key="SessionMessage.caller",
            remedy="send a tether.Caller (an id without spaces, claims a JSON object)",
        ) from None


async def _drive(held: HeldSession) -> None:
    """Run what the held session waits with (its parked messages), then settle."""
    await held.agent.loop.run_parked()
    await held.settle()


class _failures:
    """Report a tether error to Temporal as an ``ApplicationError`` of its class, retryable
    only when another attempt can get past it."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, TetherError):
            raise ApplicationError(
                str(exc),
                refusal_of(exc),  # so a client can raise it again (a refused caller)
                type=type(exc).__name__,
                non_retryable=exc.code not in _RETRY,
            ) from exc
        return False
