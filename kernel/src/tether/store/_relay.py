"""``DeltaRelay``: what a store shared by processes may offer so that the pieces of an answer
reach a process other than the one running the turn (a cluster's client), as they arrive.

Deltas are never stored: a relay is a live channel beside the log, best effort. What it carries
is only for showing: a client that misses pieces (it subscribed late, a notification was
dropped) still reads the whole answer from the log, where the turn is. A store offers it by
having the two methods; :class:`tether_postgres.PostgresStore` does, on ``LISTEN``/``NOTIFY``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..models import ModelDelta

__all__ = ("DeltaBatch", "DeltaRelay")


@dataclass(frozen=True)
class DeltaBatch:
    """Pieces of one model step's answer, in order: the step ``step`` (1 for the first) of the
    turn that runs the message ``message_id`` in the session ``session_id``."""

    session_id: str
    message_id: str
    step: int
    deltas: tuple[ModelDelta, ...]


@runtime_checkable
class DeltaRelay(Protocol):
    """Carries the pieces of answers from the process that runs a turn to processes that
    follow its session."""

    async def publish_deltas(self, batches: Sequence[DeltaBatch]) -> None:
        """Send each batch to the processes following its session now (none: it is dropped),
        in order. Never waits for them; a failure to send is the caller's to log, never the
        turn's."""
        ...

    def follow_deltas(
        self, session_id: str
    ) -> AbstractAsyncContextManager[AsyncIterator[DeltaBatch]]:
        """Inside the block, the batches published for ``session_id`` from its start on, in
        the order they were published."""
        ...


def split_deltas(deltas: Sequence[ModelDelta], limit: int) -> list[list[ModelDelta]]:
    """``deltas`` in runs whose texts add up to at most ``limit`` characters (a longer piece
    is cut in pieces of ``limit``), for a channel that takes messages of a bounded size."""
    pieces: list[ModelDelta] = []
    for delta in deltas:
        text = delta.text
        if len(text) <= limit:
            pieces.append(delta)
        else:
            pieces.extend(
                ModelDelta(delta.kind, text[at : at + limit], delta.index, delta.name)
                for at in range(0, len(text), limit)
            )
    runs: list[list[ModelDelta]] = []
    size = 0
    for piece in pieces:
        if not runs or size + len(piece.text) > limit:
            runs.append([])
            size = 0
        runs[-1].append(piece)
        size += len(piece.text)
    return runs
