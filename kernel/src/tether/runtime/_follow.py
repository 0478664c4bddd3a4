"""Following a session whose turns another host runs (:meth:`Runtime.follow`).

:meth:`Runtime.hold` is how a process hosts a session it drives. When the profile's sessions run
elsewhere (a :class:`~tether.runtime.SessionHost`: a cluster's workers hold them), a client
cannot hold the session (the lease is the worker's); it hands each message to the host and
follows the session's log in the shared store until the message's turn has ended: a
:class:`FollowedSession`. ``tether run`` and ``tether sessions send`` on such a profile do this,
and so does ``tether acp`` fronting a cluster (one follow per prompt; its ``session/cancel``
drops a message not begun: ``interrupt(drop=True)``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from ..ground import takes_keyword
from ._hosts import SessionHost, follow_turn, relayed_deltas, turn_began

if TYPE_CHECKING:
    from anyio import CancelScope
    from anyio.streams.memory import MemoryObjectReceiveStream

    from ..contracts import Caller
    from ..models import ModelDelta
    from ..store import DeltaBatch, SessionStore, StoredEvent
    from ._runtime import Runtime

__all__ = ("INTERRUPT_GRACE", "FollowedSession", "follow_session")

#: How long a follower waits, after asking the host to interrupt a turn, for the turn's end to
#: reach the store, in seconds.
INTERRUPT_GRACE = 30.0


class FollowedSession:
    """A session whose turns a :class:`SessionHost` runs, followed from the runtime's store
    (:meth:`Runtime.follow`). :meth:`send` hands a message to the host, :meth:`turn` follows
    its turn; :meth:`run` does both for each prompt, and interrupts the turn when stopped."""

    def __init__(
        self,
        host: SessionHost,
        store: SessionStore,
        session_id: str,
        *,
        agent: str | None,
        new: bool,
        after: int,
        deltas: MemoryObjectReceiveStream[DeltaBatch] | None,
        hear: Callable[[StoredEvent], None] | None,
        hear_delta: Callable[[ModelDelta], None] | None,
        caller: Caller | None = None,
    ) -> None:
        self.host = host
        self.caller = caller
        """Who sends the messages (handed to a host whose ``send`` takes a ``caller``)."""
        self.store = store
        self.session_id = session_id
        """The session followed (a new one's id is chosen here, before it exists)."""
        self.running: str | None = None
        """The message whose turn is being followed."""
        self.parked = False
        """After an interrupt (:meth:`run` stopped): the running message had not begun; it
        waits in the session and runs before the next message sent to it."""
        self.dropped = False
        """After an interrupt with ``drop``: the running message had not begun, and the host
        dropped it (and whatever else waited in the session): it never runs."""
        self.unfinished = False
        """After an interrupt: the turn had not ended :data:`INTERRUPT_GRACE` seconds after
        the host was asked to interrupt it."""
        self._agent = agent
        self._new = new
        self._read = after  # the last seq handed to hear
        self._sent_at = after  # where the log was when the running message was sent
        self._deltas = deltas
        self._hear = hear
        self._hear_delta = hear_delta

    def _heard(self, stored: StoredEvent) -> None:
        """Each event of the log once, in order, but the message this follower sent."""
        from ..store import UserMessage

        if stored.seq <= self._read:  # a second pass over the same events hands nothing twice
            return
        self._read = stored.seq
        event = stored.event
        if isinstance(event, UserMessage) and event.message_id == self.running:
            return  # the sender knows what it sent
        if self._hear is not None:
            self._hear(stored)

    async def send(self, prompt: str, *, trace: Mapping[str, str] | None = None) -> str:
        """Hand ``prompt`` to the host as the session's next message (the session is created
        with the first); its message id, once the host stored it durably. ``trace``: the
        sender's trace context, which the turn continues wherever it runs."""
        self._sent_at = self._read
        host = self.host
        # A host written before callers were (SessionHost.send without ``caller``) is called
        # as before: its sessions then run as their initiator (docs/callers.md).
        send: Any = host.send
        if self.caller is not None and takes_keyword(type(host).send, "caller"):
            send = partial(send, caller=self.caller)
        message_id = await send(
            self.session_id, prompt, agent=self._agent, new=self._new, trace=trace
        )
        self._new = False
        self.running = message_id
        return message_id

    async def turn(self) -> str:
        """Follow the turn of the message sent last until it has ended (its events to
        ``hear``, the pieces of its answers to ``hear_delta`` as they arrive); its stop
        reason."""
        if self.running is None:
            raise RuntimeError("send a message before following its turn")
        reason, _ = await follow_turn(
            self.store,
            self.session_id,
            self.running,
            after=self._read,
            hear=self._heard,
            deltas=self._deltas,
            hear_delta=self._hear_delta,
        )
        self.running = None
        return reason

    async def interrupt(self, *, drop: bool = False) -> str | None:
        """Ask the host to abort the running turn (what waits stays parked, as a local
        interrupt leaves it) and follow it to its end, shielded: its stop reason, or ``None``
        when nothing ran, the message had not begun (:attr:`parked`, or :attr:`dropped`) or
        the turn had not ended within :data:`INTERRUPT_GRACE` (:attr:`unfinished`; it is
        still :attr:`running`, and :meth:`turn` follows it on).

        ``drop``: a message not begun is dropped, not parked (:meth:`SessionHost.cancel`: it
        never runs, nor does anything else waiting in the session): what ACP's
        ``session/cancel`` means, where a cancelled prompt has been answered."""
        running = self.running
        if running is None:
            return None
        with anyio.CancelScope(shield=True):
            await self.host.interrupt(self.session_id)
            if not await turn_began(self.store, self.session_id, running, after=self._sent_at):
                if drop:
                    await self.host.cancel(self.session_id)
                    self.dropped = True
                else:
                    self.parked = True
                self.running = None
                return None
            with anyio.move_on_after(INTERRUPT_GRACE):
                reason, _ = await follow_turn(
                    self.store, self.session_id, running, after=self._sent_at, hear=self._heard
                )
                self.running = None
                return reason
        self.unfinished = True
        return None

    async def run(
        self,
        prompts: Sequence[str],
        *,
        stop: CancelScope | None = None,
        sent: Callable[[str], None] | None = None,
    ) -> str:
        """Send ``prompts`` one after another, each once the turn of the one before has
        ended (``sent(prompt)`` once the host has it). ``stop`` (Ctrl-C's cancel scope) stops
        sending and interrupts the turn being followed (:meth:`interrupt`). The stop reason
        of the first turn that did not complete (``interrupted`` when stopped and no turn
        says otherwise), else ``completed``."""
        stops: list[str] = []
        with stop if stop is not None else nullcontext():
            for prompt in prompts:
                await self.send(prompt)
                if sent is not None:
                    sent(prompt)
                stops.append(await self.turn())
        if stop is not None and stop.cancel_called:
            reason = await self.interrupt()
            if reason is not None:
                stops.append(reason)
            stops.append("interrupted")
        return next((s for s in stops if s != "completed"), "completed")


@asynccontextmanager
async def follow_session(
    runtime: Runtime,
    host: SessionHost,
    session_id: str | None = None,
    agent: str | None = None,
    new: bool = False,
    hear: Callable[[StoredEvent], None] | None = None,
    hear_delta: Callable[[ModelDelta], None] | None = None,
    caller: Caller | None = None,
) -> AsyncGenerator[FollowedSession]:
    """:meth:`Runtime.follow`'s body; see there."""
    from ..agents import new_header, resolve_agent_name
    from ..errors import ErrorCode, StoreError

    store = runtime.store
    if store is None:
        raise StoreError(
            ErrorCode.STORE_UNAVAILABLE,
            "no session store to follow the session in",
            remedy="give the runtime the store the host's sessions are written to",
        )
    if session_id is None or new:
        session_id = session_id or new_header().id
        name = resolve_agent_name(runtime.kernel, agent)
        after, new = 0, True
    else:
        header = await store.header(session_id)  # SESSION_NOT_FOUND before anything is sent
        name = header.agent
        after, new = len(await store.events(session_id)), False
    # Listening for the answers' pieces before anything is sent: none is missed.
    async with relayed_deltas(store, session_id) as deltas:
        yield FollowedSession(
            host,
            store,
            session_id,
            agent=name,
            new=new,
            after=after,
            deltas=deltas,
            hear=hear,
            hear_delta=hear_delta,
            caller=caller,
        )
