"""The worker's side of the delta relay: the pieces of every answer its agents stream go out
through the store's :class:`tether.store.DeltaRelay` (PostgreSQL's ``NOTIFY``), gathered for a
moment (``DELTA_FLUSH``) so that a fast stream costs a few notifications a second, not one a
piece. A client following the session (``tether run``, ``tether acp``) shows them as they come;
the log still holds every answer whole."""

from __future__ import annotations

import logging

import anyio

from tether.agents import Agent
from tether.models import ModelDelta
from tether.store import DeltaBatch, DeltaRelay

__all__ = ("DELTA_FLUSH", "DeltaPublisher")

log = logging.getLogger("tether.temporal")

#: Seconds the pieces of answers gather before they are sent.
DELTA_FLUSH = 0.05


class DeltaPublisher:
    """Gathers the deltas :meth:`hear` is given (a runtime delta listener) and sends them
    (:meth:`run`, a task of the worker's)."""

    def __init__(self, relay: DeltaRelay, every: float = DELTA_FLUSH) -> None:
        self.relay = relay
        self.every = every
        self._pending: dict[tuple[str, str, int], list[ModelDelta]] = {}
        self._wake = anyio.Event()

    def hear(self, agent: Agent, delta: ModelDelta) -> None:
        step = agent.loop.current_step
        if step is None or delta.kind == "tool_call":  # a call is shown once logged, whole
            return
        key = (agent.session_id, *step)
        pieces = self._pending.get(key)
        if pieces is None:
            self._pending[key] = [delta]
            self._wake.set()
        else:
            pieces.append(delta)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(self.every)
            pending, self._pending = self._pending, {}
            batches = [
                DeltaBatch(session_id, message_id, step, tuple(deltas))
                for (session_id, message_id, step), deltas in pending.items()
            ]
            try:
                await self.relay.publish_deltas(batches)
            except Exception as exc:  # the answers are in the log: only the live view misses them
                log.warning("could not relay the pieces of %d answer(s): %s", len(batches), exc)
