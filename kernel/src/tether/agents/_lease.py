"""An agent's hold on its session: the lease, the log it writes, the mail it collects
(``agent.lease``).

While an agent drives a session it holds the session's lease (``SESSION_BUSY`` for a second
driver). Every event reaches the store before anyone hears of it, with two exceptions kept
here: what opens a turn or a step is *deferred* (heard now, stored with the step's answer in
one commit), and what a busy store refused is *held* and stored first by the next append. A
lost lease (``SESSION_BUSY``, ``SESSION_CONFLICT``) is final: the agent writes nothing more.
Mail other processes post to the session is moved into its log and inbox here.
"""

from __future__ import annotations

import contextlib
import logging
import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from ..errors import ErrorCode, SubagentError, TetherError
from ..store import DescriptorEvent, Event
from ._keeper import keep_sessions

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("MODEL_DESCRIPTOR", "TEARDOWN_TIMEOUT", "SessionLease")

log = logging.getLogger("tether.agents")

#: Store errors after which the agent must not write again: another process owns the session.
_FENCED: frozenset[str] = frozenset({"SESSION_BUSY", "SESSION_CONFLICT"})
#: The descriptor kind that logs a change of a session's model: ``{"old": ..., "new": ...}``.
MODEL_DESCRIPTOR = "model"
#: How long teardown waits for the final log writes of a cancelled turn.
TEARDOWN_TIMEOUT = 5.0


class SessionLease:
    """One agent's lease on its session, the writer of its log, and its mail."""

    __slots__ = (
        "_free",
        "_listeners",
        "_owner",
        "_writing",
        "fault",
        "leased",
        "log_length",
        "told",
        "unsaved",
    )

    def __init__(self, agent: Agent) -> None:
        self._owner = weakref.ref(agent)
        self.leased = False
        """Whether the agent holds the session's lease."""
        self.fault: TetherError | None = None
        """A store failure that stopped the agent (its last turn could not be recorded)."""
        self.log_length = 0
        """How many events the session's log holds as far as this agent knows (what it read
        on restore plus what it appended): a later read finds more only if someone else
        wrote."""
        self.unsaved: tuple[Event, ...] = ()
        """Events deferred or held: the next append stores them first."""
        self.told = 0  # how many of the unsaved events listeners have heard of
        self._listeners: tuple[Callable[[Event], None], ...] = ()
        # One append at a time: a store that awaits its writes (PostgreSQL) would otherwise
        # let two appends both carry the held events (stored twice). Free is a flag: a store
        # that never awaits (SQLite) sees no new scheduling point, and no lock is made.
        self._writing = False
        self._free: anyio.Event | None = None

    @property
    def _agent(self) -> Agent:
        """The agent it works for, held weakly: the agent holds this, and a cycle would leave
        every finished agent (its history, its turn) to the cyclic collector."""
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    @property
    def fenced(self) -> bool:
        """Whether another process owns the session now (the agent writes nothing more)."""
        return self.fault is not None and self.fault.code in _FENCED

    # ---------------------------------------------------------------- the lease

    async def read(self, *, repair: bool) -> list[Event]:
        """The session's log; with ``repair``, first take its lease, move its mail into it
        and record the agent's model (the lease goes back if that fails)."""
        agent = self._agent
        store, session_id = agent.store, agent.session_id
        if not repair:
            return [stored.event for stored in await store.events(session_id)]
        await self.take()
        try:
            await store.take_mail(session_id)  # into the log, read with it
            await self._record_model()
            return [stored.event for stored in await store.events(session_id)]
        except BaseException:
            # Failed or cancelled before anything was rebuilt: nothing ran, so the session
            # goes back to whoever drives it next (a kept lease would refuse every later
            # attempt of this process).
            await self.give_back()
            raise

    async def take(self) -> None:
        """Become the session's one driver (``SESSION_BUSY`` if a live process is)."""
        await self._agent.store.acquire(self._agent.session_id)
        self.leased = True

    async def give_back(self) -> None:
        """Release the lease, shielded and bounded (its caller may be cancelled), when
        entering the session failed before it was driven."""
        self.leased = False
        with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
            await self._release()

    async def leave(self) -> None:
        """Release the lease as the agent is left (shielded and bounded when the leaving task
        is cancelled, or entering failed)."""
        if not self.leased:
            return
        self.leased = False
        store, session_id = self._agent.spec.store, self._agent.header.id
        try:
            if anyio.current_effective_deadline() == -math.inf:
                deadline = anyio.current_time() + TEARDOWN_TIMEOUT
                with anyio.CancelScope(shield=True, deadline=deadline):
                    await store.release(session_id)
            else:
                await store.release(session_id)
        except TetherError:
            pass  # the lease expires, or its owner is seen to be gone

    async def _release(self) -> None:
        # If this fails, the lease expires, or its owner is seen to be gone.
        with contextlib.suppress(TetherError):
            await self._agent.store.release(self._agent.session_id)

    async def _record_model(self) -> None:
        """Make the model the agent was made with the session's recorded one, logging the
        change (a ``model`` descriptor with the old and new spec) when it replaces another.
        Runs with the lease held, before the log is read."""
        agent = self._agent
        spec, header = agent.spec.model_spec, agent.header
        if spec is None or spec == header.model:
            return
        change = DescriptorEvent(kind=MODEL_DESCRIPTOR, data={"old": header.model, "new": spec})
        agent.header = await agent.store.set_model(agent.session_id, spec, [change])
        log.info("session %s: model %s -> %s", agent.session_id, change.data["old"], spec)

    # ---------------------------------------------------------------- the log

    def listen(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for each event of the log, in order (see
        :meth:`tether.agents.Agent.listen`); returns an unsubscribe function."""
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            listeners = list(self._listeners)
            listeners.remove(listener)
            self._listeners = tuple(listeners)

        return unsubscribe

    def tell(self, events: Sequence[Event]) -> None:
        """Tell the listeners of ``events``."""
        listeners = self._listeners
        if listeners:
            for event in events:
                for listener in listeners:
                    listener(event)

    async def record(self, *events: Event) -> None:
        """Append events that are not part of the conversation (descriptors, such as what a
        remote child's connection did) to the log, telling listeners."""
        if any(not isinstance(e, DescriptorEvent) for e in events):
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                "record() takes descriptor events only; messages go through the inbox",
            )
        await self.append(*events)

    async def append(self, *events: Event, hold: bool = False) -> None:
        """Store ``events`` (after any held ones), then tell the listeners.

        With ``hold``, events the store refused for a passing reason (``STORE_BUSY``) are kept
        and written first by the next append: what a turn produced (the model's answer, a tool
        result) is never lost once received. A lost lease is final (see the module docstring).
        """
        while self._writing:
            if self._free is None:
                self._free = anyio.Event()
            await self._free.wait()
        self._writing = True
        try:
            if self.fenced:
                raise self.fault  # type: ignore[misc]
            held = len(self.unsaved)
            batch = (*self.unsaved, *events) if held else events
            try:
                agent = self._agent
                await agent.spec.store.append(agent.header.id, batch)
            except TetherError as exc:
                if exc.code in _FENCED:
                    self._fence(exc)
                elif hold:
                    # Deferred while it was written: those follow what it held.
                    self.unsaved = (*batch, *self.unsaved[held:])
                    self.told = min(self.told, held)
                raise
            told = min(self.told, held)
            if held:
                # Only what this batch held is stored: what was deferred meanwhile stays held.
                self.unsaved, self.told = self.unsaved[held:], max(0, self.told - held)
                if self.fault is not None and not self.fenced:
                    self.fault = None  # what it held is stored: the agent may take turns again
            self.log_length += len(batch)
            self.tell(batch[told:])
        finally:
            self._writing = False
            free, self._free = self._free, None
            if free is not None:
                free.set()

    def _fence(self, exc: TetherError) -> None:
        self.unsaved, self.told = (), 0
        self.fault = exc
        self._agent.loop.parked = True

    async def append_alone(self, event: Event) -> None:
        """Store ``event`` alone, before what is deferred or held (a compaction, which those
        follow), and tell the listeners."""
        if self.fenced:
            raise self.fault  # type: ignore[misc]
        try:
            await self._agent.store.append(self._agent.session_id, (event,))
        except TetherError as exc:
            if exc.code in _FENCED:
                self._fence(exc)
            raise
        self.log_length += 1
        self.tell((event,))

    def defer(self, *events: Event) -> None:
        """Store ``events`` with the next append (what opens a turn or a step waits for the
        model's answer, so that both are one commit); listeners hear of them now."""
        tell = self.told == len(self.unsaved)  # in order: nothing untold before them
        self.unsaved = (*self.unsaved, *events)
        if tell:
            self.told = len(self.unsaved)
            self.tell(events)

    async def flush_held(self) -> None:
        """Try once more to store what a turn produced and the store refused."""
        if self.unsaved:
            try:
                await self.append()
            except TetherError as exc:
                if self.fault is None:
                    self.fault = exc

    # ---------------------------------------------------------------- mail

    def keeps_sessions(self) -> bool:
        """Whether this agent keeps the process's sessions: renews their leases and delivers
        mail other processes post to them. Only a durable store is shared with other
        processes, and one keeper per tree is enough: the agent whose parent is not open
        here."""
        agent = self._agent
        spec = agent.spec
        if not spec.store.durable:
            return False
        runtime = spec.runtime
        if runtime is None:
            return True
        if runtime.keeps(spec.store):
            return False  # the runtime keeps the process's sessions (inside Runtime.open)
        parent = agent.header.parent_session
        return parent is None or parent not in runtime.live_agents

    def keep(self) -> None:
        """Start keeping the process's sessions, in a job of the agent's."""
        self._agent.start_job(keep_sessions, self._agent.store, self._route_mail)

    async def _route_mail(self, session_id: str) -> None:
        """Hand the mail of ``session_id`` to its agent here (through the runtime, which
        restores a stored child under its open ancestor); mail for sessions this process does
        not drive is left for their owner."""
        agent = self._agent
        if agent.runtime is not None:
            await agent.runtime.deliver_mail(agent.store, session_id)
        elif session_id == agent.session_id:
            await self.collect_mail()

    async def collect_mail(self) -> int:
        """Move the messages other processes posted to this session into its log and inbox
        (``store.take_mail``); they run as if sent here. How many there were."""
        agent = self._agent
        loop = agent.loop
        if not loop.open or not self.leased or self.fenced:
            return 0  # left in the store for whoever drives the session next
        posted = await agent.spec.store.take_mail(agent.header.id)
        if not posted:
            return 0
        self.log_length += len(posted)
        self.tell(posted)
        if agent.inbox.deliver(posted, in_turn=agent.loop.in_turn):
            if not loop.open:
                # Left while the store answered: the messages are in the log, accepted and
                # unclaimed, and in the inbox, parked; whoever enters the session next runs
                # them (a restore from the log, or this agent entered again and resumed).
                loop.parked = True
            else:
                loop.wake()
        return len(posted)
