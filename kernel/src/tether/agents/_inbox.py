"""An agent's inbox: messages accepted and not yet claimed (``agent.inbox``).

A message is accepted durably (``inbox/accepted``) before it is acknowledged, then waits here
until the turn loop claims it: as a turn of its own (``queued``, first in first out), at the
running turn's next step (``steering``), or as context for the next step or turn
(``injected``). The lists of the last two are made when first used: most agents never steer.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Collection, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from ..contracts import Admission, AdmissionKind, Caller, CallerGate
from ..models import Message
from ..store import Event, InboxAccepted, InboxDiscarded, MessageSource, UserMessage
from ..store._events import replace_surrogates
from ..store._lifecycle import check_open
from ..store.replay import SessionFold
from ._callers import ADMITTED_KINDS, admit, with_caller
from ._tracing import carry_trace

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("USER_SOURCE", "Delivery", "Inbox", "InboxItem", "acceptance", "new_id")

Delivery = Literal["turn", "step", "context"]
#: The source of a message a person sent (the default of ``followup`` and ``run``).
USER_SOURCE = MessageSource(kind="user")
_NO_TRACE: Mapping[str, str] = MappingProxyType({})


def new_id(prefix: str) -> str:
    """A fresh id: ``prefix``, an underscore and 16 hex digits."""
    return f"{prefix}_{os.urandom(8).hex()}"


class InboxItem:
    """A message accepted and not yet claimed."""

    __slots__ = ("content", "message_id", "source", "trace")

    def __init__(
        self,
        message_id: str,
        content: str,
        source: MessageSource,
        trace: Mapping[str, str] = _NO_TRACE,
    ) -> None:
        self.message_id = message_id
        self.content = content
        self.source = source
        self.trace = trace
        """The trace context the sender's tracer carried (:meth:`Tracer.carry`)."""

    def claim(self, current: Caller | None = None) -> UserMessage:
        """The event that claims it (its ``user/message``). Taken while ``current`` is the
        agent's current caller: when it was sent by that same caller (the same object), the
        claim names nobody, which means the same (docs/callers.md): its acceptance named the
        caller, and a turn's claim is stored without it a second time."""
        source = self.source
        if current is not None and source.caller is current and source.sender is None:
            source = _bare(source)
        return UserMessage(message_id=self.message_id, content=self.content, source=source)


#: Per kind, a source that names no sender and no caller (a claim's, :meth:`InboxItem.claim`).
_BARE: dict[str, MessageSource] = {}


def _bare(source: MessageSource) -> MessageSource:
    bare = _BARE.get(source.kind)
    if bare is None:
        bare = _BARE[source.kind] = MessageSource(kind=source.kind)
    return bare


def acceptance(
    content: str, source: MessageSource, delivery: Delivery, trace: dict[str, str] | None = None
) -> tuple[InboxItem, InboxAccepted]:
    """A message for the inbox and the event that records its acceptance (with the trace
    context its sender carried, :func:`carry_trace`)."""
    content = replace_surrogates(content)
    item = InboxItem(new_id("msg"), content, source, trace or _NO_TRACE)
    accepted = InboxAccepted(
        message_id=item.message_id, content=content, source=source, delivery=delivery, trace=trace
    )
    return item, accepted


class Inbox:
    """The accepted messages of one agent that no turn has claimed yet."""

    __slots__ = ("_gates", "_last", "_owner", "injected", "queued", "sender", "steering")

    def __init__(self, agent: Agent, sender: Caller | None = None) -> None:
        self._owner = weakref.ref(agent)
        self.sender = sender
        """Who sends a message sent through this agent without naming a caller (the caller
        it was composed for, docs/callers.md); ``None``: such a message names nobody and runs
        as the agent's current caller."""
        self._gates: tuple[CallerGate, ...] | None = None
        # The last source given a caller, and the result: a run sends as one caller.
        self._last: tuple[MessageSource, Caller, MessageSource] | None = None
        self.queued: list[InboxItem] = []
        """Messages waiting for a turn of their own, oldest first."""
        # Each a list once it holds one (appended to: thousands of children's notices may
        # steer one turn), the shared empty tuple until then (most agents never steer).
        self.steering: list[InboxItem] | tuple[()] = ()
        """Steers for the running turn's next step."""
        self.injected: list[InboxItem] | tuple[()] = ()
        """Context for the next step (or turn)."""

    @property
    def _agent(self) -> Agent:
        """The agent it works for, held weakly: the agent holds this, and a cycle would leave
        every finished agent (its history, its turn) to the cyclic collector."""
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    @property
    def gates(self) -> tuple[CallerGate, ...]:
        """The gates the session's messages pass (its preset's, read on first use)."""
        gates = self._gates
        if gates is None:
            agent = self._agent
            runtime = agent.runtime
            gates = () if runtime is None else runtime.preset(agent.name).caller_gates
            self._gates = gates
        return gates

    def source(
        self, source: MessageSource, caller: Caller | None, kind: AdmissionKind
    ) -> MessageSource:
        """The source of a message sent as ``kind``: ``source`` sent by ``caller`` (default:
        the source's own, else :attr:`sender`), once the session's gates admit that caller
        (``CALLER_REFUSED``). A message another session sent (a parent's task message, a
        child's notice: ``source.sender``) is not asked about: it carries its sender's
        authority."""
        caller = caller or source.caller or self.sender
        if caller is not None and source.caller is not caller:
            last = self._last
            if last is not None and last[0] is source and last[1] is caller:
                source = last[2]
            else:
                made = with_caller(source, caller)
                self._last, source = (source, caller, made), made
        gates = self._gates if self._gates is not None else self.gates
        if gates and source.sender is None and source.kind in ADMITTED_KINDS:
            agent = self._agent
            asking = source.caller or agent.caller
            admit(gates, Admission(agent.session_id, agent.name, asking, kind))
        return source

    def took(self, source: MessageSource) -> None:
        """The agent took (claimed) a message of ``source``: its caller, when it names one,
        is the agent's current caller from now on."""
        if source.caller is not None:
            self._agent.caller = source.caller

    @property
    def pending(self) -> int:
        """Accepted messages not yet claimed (queued turns and steers, parked ones too)."""
        return len(self.queued) + len(self.steering)

    async def accept(
        self,
        content: str,
        source: MessageSource,
        delivery: Delivery,
        trace: Mapping[str, str] | None = None,
    ) -> InboxItem:
        """Record a message durably before it is acknowledged; its claim comes later.
        ``trace``: the sender's trace context; default: the caller's (the agent's tracer)."""
        carried = dict(trace) if trace else carry_trace(self._agent)
        item, accepted = acceptance(content, source, delivery, carried)
        await self._agent.lease.append(accepted)
        return item

    async def inject(self, content: str, source: MessageSource) -> str:
        """Context the next step (or turn) sees, without waking the agent (``Agent.inject``):
        taken at once when no turn is open, else when the running turn's next step starts."""
        agent = self._agent
        if agent.loop.in_turn:
            item = await self.accept(content, source, "context")
            self.put(item, "context")
            return item.message_id
        check_open(agent.header)  # closed: no message (the store checks the other paths)
        item = InboxItem(new_id("msg"), replace_surrogates(content), source)
        await agent.lease.append(item.claim(agent.caller))
        agent.budget.history.append(Message(role="user", content=item.content))
        self.took(source)
        return item.message_id

    def put(self, item: InboxItem, delivery: Delivery) -> None:
        """Add an accepted ``item`` where its ``delivery`` waits."""
        if delivery == "context":
            if isinstance(self.injected, list):
                self.injected.append(item)
            else:
                self.injected = [item]
        elif delivery == "step":
            if isinstance(self.steering, list):
                self.steering.append(item)
            else:
                self.steering = [item]
        else:
            self.queued.append(item)

    def steered(self, item: InboxItem) -> None:
        """A steer just stored: the running turn's next step takes it; when that turn ended
        while the steer was being stored, it is the next turn (never left among the steers
        of a turn that is over)."""
        loop = self._agent.loop
        if loop.in_turn:
            self.put(item, "step")
        else:
            self.queued.append(item)
            loop.wake()

    def restored(self, folded: SessionFold) -> None:
        """The messages a restore found accepted and unclaimed, and the caller of the last
        message the log shows taken (the agent's current caller). A steer outlives the turn it
        was meant for only as a turn of its own; injected context waits for the next step or
        turn, as it would have."""
        if folded.caller is not None:
            self._agent.caller = folded.caller
        for pending in folded.unclaimed:
            item = InboxItem(pending.message_id, pending.content, pending.source)
            if pending.trace:
                item.trace = pending.trace
            self.put(item, "context" if pending.delivery == "context" else "turn")

    def deliver(self, posted: Iterable[InboxAccepted], *, in_turn: bool) -> bool:
        """Mail moved into the log: each message where its delivery waits (a steer becomes a
        turn when no turn runs). Whether one waits for a turn of its own."""
        wake = False
        for message in posted:
            item = InboxItem(message.message_id, message.content, message.source)
            if message.trace:
                item.trace = message.trace
            delivery = message.delivery
            if delivery == "step" and not in_turn:
                delivery = "turn"
            self.put(item, delivery)
            wake = wake or delivery == "turn"
        return wake

    def next_turn(self) -> InboxItem:
        """Take the oldest queued message. Notices queued behind a notice join its turn's
        first step: an idle agent told of many children's ends at once takes one turn, not
        one each."""
        queued = self.queued
        item = queued.pop(0)
        if item.source.kind == "notice":
            end = 0
            while end < len(queued) and queued[end].source.kind == "notice":
                end += 1
            if end:
                self.steering = [*self.steering, *queued[:end]]
                del queued[:end]
        return item

    def requeue_steering(self) -> None:
        """Steers that arrived after the last step of a turn become the next turns, first."""
        if self.steering:
            self.queued[:0] = self.steering
            self.steering = ()

    def take_step_messages(self, history: list[Message]) -> list[Event]:
        """Steering and injected messages, claimed for the step about to run (appended to
        ``history``)."""
        events: list[Event] = []
        for item in (*self.steering, *self.injected):
            events.append(item.claim(self._agent.caller))
            history.append(Message(role="user", content=item.content))
            if item.source.caller is not None:
                self._agent.caller = item.source.caller
        self.steering = self.injected = ()
        return events

    def withdraw(self, message_ids: Collection[str]) -> list[InboxDiscarded]:
        """Drop the named messages that no turn has claimed yet (their sender took them back:
        a cancelled ACP prompt); the events that record it. The other messages stay where
        they wait, and a message already claimed is not touched."""
        dropped = [
            item for item in (*self.queued, *self.steering) if item.message_id in message_ids
        ]
        if dropped:
            self.queued[:] = [item for item in self.queued if item not in dropped]
            self.steering = [item for item in self.steering if item not in dropped] or ()
        return [InboxDiscarded(message_id=item.message_id) for item in dropped]

    def discard(self) -> list[InboxDiscarded]:
        """Drop the queued turns and steers; the events that record it."""
        dropped = [*self.queued, *self.steering]
        self.queued.clear()
        self.steering = ()
        return [InboxDiscarded(message_id=item.message_id) for item in dropped]
