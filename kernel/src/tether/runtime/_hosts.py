"""Session hosts: where a profile's sessions run when it is not this process (a cluster).

A plugin of the profile's global layer offers a :class:`SessionHost` through
``tether_session_hosts``; ``tether run`` and ``tether sessions send`` then hand each message to
the host, which stores it durably and has the session run elsewhere, and follow the session's
log in the shared store (:func:`follow_turn`) to print its turn. Without a host they run the
session here, as always.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from ..contracts import SessionHost
from ..store import (
    AssistantMessage,
    DeltaBatch,
    DeltaRelay,
    SessionStore,
    StoredEvent,
    TurnEnded,
    TurnStarted,
)

if TYPE_CHECKING:
    from ..loading import Kernel
    from ..models import ModelDelta

__all__ = (
    "FOLLOW_POLL",
    "SessionHost",
    "follow_turn",
    "profile_session_host",
    "relayed_deltas",
    "turn_began",
)

#: How often :func:`follow_turn` reads the log for what the host appended, in seconds.
FOLLOW_POLL = 0.05
_HOOK = "tether_session_hosts"


def profile_session_host(kernel: Kernel) -> SessionHost | None:
    """The first session host the plugins of the kernel's global layer offer (profile order),
    or ``None``: run sessions in this process. Nothing connects here."""
    for plugin in kernel.global_scope.plugins:
        for host in plugin.collect(_HOOK, SessionHost):
            return host
    return None


async def follow_turn(
    store: SessionStore,
    session_id: str,
    message_id: str,
    *,
    after: int = 0,
    hear: Callable[[StoredEvent], None] | None = None,
    deltas: MemoryObjectReceiveStream[DeltaBatch] | None = None,
    hear_delta: Callable[[ModelDelta], None] | None = None,
) -> tuple[str, int]:
    """Read the session's log from ``after`` until the turn of ``message_id`` has ended,
    handing every event to ``hear``; the turn's stop reason and the last ``seq`` read.

    With ``deltas`` (:func:`relayed_deltas`), the pieces of the turn's answers are handed to
    ``hear_delta`` as they arrive, each before its answer's event: a batch is shown only while
    its step's answer is not in the log yet (one that comes after it, or for another turn, is
    dropped; one for a step the log has not reached is kept until it has)."""
    turn: int | None = None
    answers = 0  # the turn's answers read from the log
    early: list[DeltaBatch] = []
    while True:
        for stored in await store.events(session_id, after=after):
            after = stored.seq
            if hear is not None:
                hear(stored)
            event = stored.event
            if isinstance(event, TurnStarted) and event.message_id == message_id:
                turn = event.turn
            elif isinstance(event, AssistantMessage) and turn is not None:
                answers += 1
            elif isinstance(event, TurnEnded) and turn is not None and event.turn == turn:
                return event.stop_reason, after
        if deltas is None:
            await anyio.sleep(FOLLOW_POLL)
            continue
        with anyio.move_on_after(FOLLOW_POLL):
            try:
                early.append(await deltas.receive())
            except anyio.EndOfStream:
                deltas = None
        kept: list[DeltaBatch] = []
        for batch in early:
            if batch.message_id != message_id or batch.step <= answers:
                continue
            if batch.step > answers + 1:
                kept.append(batch)  # the log is behind: its earlier answers come first
            elif hear_delta is not None:
                for delta in batch.deltas:
                    hear_delta(delta)
        early = kept


async def turn_began(
    store: SessionStore, session_id: str, message_id: str, *, after: int = 0
) -> bool:
    """Whether a turn of ``message_id`` began in the session's log after ``after`` (after an
    interrupt: ``False`` means the message was never begun, and waits)."""
    return any(
        isinstance(stored.event, TurnStarted) and stored.event.message_id == message_id
        for stored in await store.events(session_id, after=after)
    )


@asynccontextmanager
async def relayed_deltas(
    store: SessionStore, session_id: str
) -> AsyncGenerator[MemoryObjectReceiveStream[DeltaBatch] | None]:
    """The delta batches the store relays for ``session_id`` (:class:`tether.store.DeltaRelay`)
    from now on, for :func:`follow_turn`; ``None`` when the store relays none."""
    if not isinstance(store, DeltaRelay):
        yield None
        return
    send, receive = anyio.create_memory_object_stream[DeltaBatch](math.inf)

    async def pump(task_status: anyio.abc.TaskStatus[None]) -> None:
        async with store.follow_deltas(session_id) as batches, send:
            task_status.started()
            async for batch in batches:
                send.send_nowait(batch)

    # The receiving end closes only once the pump has stopped: a batch the pump had in hand
    # when the caller left must not meet a closed stream.
    with receive:
        async with anyio.create_task_group() as group:
            await group.start(pump)  # listening before the caller sends anything
            try:
                yield receive
            finally:
                group.cancel_scope.cancel()
