"""Activations: a continuable child made live in this process, hosted until it settles.

While a continuable child lives in this process it has one **activation**: the child agent,
hosted by a task its direct parent owns, in one of three states:

* ``running``: a turn runs, or an accepted message is not claimed yet (parked ones too);
* ``waiting``: quiet, but it owns live continuable children of its own;
* ``settled``: quiet and owns nothing. The activation then closes: it stops taking messages
  (the admission cutoff), the child is torn down (its own children first), the parent gets one
  notice, and only then is the parent's ownership released.

A child with no activation is made live again from its own log (:meth:`Activations.restore`):
the first ``subagent`` descriptor after its seed says how it was set up
(:mod:`tether.subagents._kit`); the provider is not called, so this works after the provider
is gone. A settled child's agent is kept for a while, so a quick follow-up skips re-reading its
log.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio

from ..contracts import SubagentEvent
from ..errors import ErrorCode, StoreError, SubagentError, TetherError
from ..store import DescriptorEvent, MessageSource, SessionHeader
from ._child import answers_of, output_since
from ._kit import find_continuable_descriptor, restore_local_child
from .notices import settlement_notice

if TYPE_CHECKING:
    from ..agents import Agent
    from ._runtime import SubagentRuntime

__all__ = (
    "DORMANT_AGENTS",
    "TEARDOWN_TIMEOUT",
    "Activation",
    "ActivationState",
    "Activations",
)

log = logging.getLogger("tether.subagents")

ActivationState = Literal["running", "waiting", "settled"]
#: How many settled children's agents are kept in memory for quick follow-ups.
DORMANT_AGENTS = 256
#: How long a teardown waits for a child to record its end, in seconds.
TEARDOWN_TIMEOUT = 10.0


@dataclass(eq=False)
class Activation:
    """One continuable child live in this process, from hosting until it closes."""

    child_id: str
    parent_id: str
    """The session that owns it (its durable ``parent_session``)."""
    provider: str
    label: str | None
    depth: int
    agent: Agent
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    epoch_start: int = 0
    """How many answers its session held when this activation began (its closing message is
    the last one after them; ``_child.answers_of``)."""
    closing: bool = False
    """The admission cutoff: it takes no more messages."""
    released: bool = False
    """Its owner let go of it (the owner is torn down, or it is closed)."""
    announced: bool = False
    """Someone was told of it (its first message was accepted): its end is notified."""
    ready: anyio.Event = field(default_factory=anyio.Event)
    closed: anyio.Event = field(default_factory=anyio.Event)
    poke: anyio.Event = field(default_factory=anyio.Event)
    armed: anyio.Event = field(default_factory=anyio.Event)
    """Set once the epoch's first message is accepted: only then can the child settle."""
    error: BaseException | None = None
    unsubscribe: Callable[[], None] | None = None
    turns_at_start: int = 0
    edge: bool = False
    """Its ``start`` edge was emitted, so its ``end`` edge is too."""
    notify: bool = True
    """Whether its parent gets a notice when it settles."""
    tool: str | None = None
    """The tool that started it as a task: its end reaches the parent as a ``<task_result>``
    (else as a settlement notice)."""

    def arm(self) -> None:
        """A message for it was accepted: it is announced, and may settle once quiet."""
        self.announced = True
        self.armed.set()

    def lifecycle_event(self, kind: Literal["start", "end"], stop: str | None) -> SubagentEvent:
        """The ``start`` or ``end`` edge of this activation, as the runtime's listeners get it."""
        return SubagentEvent(
            kind,
            self.provider,
            self.run_id,
            self.child_id,
            True,
            stop,
            self.parent_id,
            self.label,
            self.depth,
        )


class Activations:
    """The live continuable children of one subagent service: their activations, which
    parent owns which, one lock per child, the continuable descriptors read so far and the
    settled children's agents kept for quick follow-ups."""

    def __init__(self, service: SubagentRuntime) -> None:
        self._service = service
        self._live: dict[str, Activation] = {}
        self._owned: dict[str, set[str]] = {}  # parent session -> its live continuable children
        self._locks: dict[str, anyio.Lock] = {}
        self._descriptors: dict[str, DescriptorEvent | None] = {}
        self._dormant: OrderedDict[str, Agent] = OrderedDict()
        """Settled children's agents, kept so a follow-up skips re-reading their logs."""

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        """How many children have an activation here."""
        return len(self._live)

    def get(self, child_id: str) -> Activation | None:
        """The child's activation, ``None`` when it has none here."""
        return self._live.get(child_id)

    def lock(self, child_id: str) -> anyio.Lock:
        """The lock that orders messages to one child and its restore."""
        return self._locks.setdefault(child_id, anyio.Lock())

    def owned(self, parent_id: str) -> list[str]:
        """The live continuable children the session ``parent_id`` owns."""
        return list(self._owned.get(parent_id, ()))

    def state(self, activation: Activation) -> ActivationState:
        """The activation's state (see the module docstring)."""
        agent = activation.agent
        if agent.fault is not None and agent.status == "idle":
            return "settled"  # its store refused a write: it takes no more turns
        if agent.status == "running" or agent.inbox.pending:
            return "running"
        if self._owned.get(activation.child_id):
            return "waiting"
        return "settled"

    async def descriptor(self, agent: Agent, header: SessionHeader) -> DescriptorEvent | None:
        """The child's continuable descriptor: the first one after its seed (``None``: not a
        continuable child). Cached per child."""
        if header.id in self._descriptors:
            return self._descriptors[header.id]
        found = await find_continuable_descriptor(agent.store, header)
        self._descriptors[header.id] = found
        return found

    # ------------------------------------------------------------------ waiting

    async def wait_settled(self, child_id: str) -> None:
        """Wait until the child's activation (if any) has closed."""
        activation = self._live.get(child_id)
        if activation is not None:
            await activation.closed.wait()

    async def wait_quiet(self, agent: Agent) -> None:
        """Wait until ``agent`` is idle and every continuable child it owns has settled (and
        it has taken their notices)."""
        while True:
            await agent.when_idle()
            owned = self.owned(agent.session_id)
            if not owned:
                if agent.status == "idle":
                    return
                continue
            for child_id in owned:
                await self.wait_settled(child_id)

    # ------------------------------------------------------------------ making a child live

    async def restore(self, host: Agent, header: SessionHeader) -> Activation:
        """Make the stored child ``header`` live under ``host`` (an open agent on its parent
        chain), from its own log (or its settled agent, when this process still has it)."""
        descriptor = await self.descriptor(host, header)
        if descriptor is None:
            raise SubagentError(
                ErrorCode.NOT_RESUMABLE,
                f'subagent "{header.id}" cannot be resumed: its log has no continuable '
                "descriptor; do not retry send_message with this id",
            )
        agent = await self._reuse(host, header)
        if agent is None:
            agent = await restore_local_child(host, header, descriptor)
        activation = Activation(
            child_id=header.id,
            parent_id=header.parent_session or host.session_id,
            provider=str(descriptor.data.get("provider", "")),
            label=header.label,
            depth=header.delegation_depth,
            agent=agent,
            epoch_start=answers_of(agent),
            turns_at_start=agent.turns,
            tool=_tool_of(descriptor),
        )
        await self.host(host, activation)
        return activation

    async def _reuse(self, host: Agent, header: SessionHeader) -> Agent | None:
        """The settled agent of this child, if this process still has it and nobody wrote to
        its log since (another process): its history is current, so no re-read is needed."""
        agent = self._dormant.pop(header.id, None)
        if agent is None or agent.runtime is not host.runtime or agent.fault is not None:
            return None
        if await host.store.events(header.id, after=agent.lease.log_length, limit=1):
            return None  # the log grew elsewhere: restore from it
        return agent

    def _keep_dormant(self, agent: Agent) -> None:
        self._dormant[agent.session_id] = agent
        self._dormant.move_to_end(agent.session_id)
        while len(self._dormant) > DORMANT_AGENTS:
            self._dormant.popitem(last=False)

    # ------------------------------------------------------------------ hosting

    async def host(self, parent: Agent, activation: Activation) -> None:
        """Start the activation's task in the parent's task group and wait until it is open."""
        if activation.child_id in self._live:
            raise StoreError(
                ErrorCode.SESSION_CONFLICT,
                f'subagent "{activation.child_id}" already has a live activation',
            )
        self._live[activation.child_id] = activation
        self._owned.setdefault(parent.session_id, set()).add(activation.child_id)
        self._service.tasks.registered(parent.session_id)  # working now: its slot stops counting
        try:
            parent.start_job(self._run, activation)
        except RuntimeError:
            self._forget(activation)
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                f'agent "{parent.session_id}" is not running, so it cannot host a child',
                remedy="delegate from inside `async with agent:`",
            ) from None
        parent.on_teardown(activation, lambda: self._release(activation))
        await activation.ready.wait()
        if activation.error is not None:
            raise activation.error
        activation.edge = True
        self._service.emit(activation.lifecycle_event("start", None))

    async def roll_back(self, activation: Activation) -> None:
        """Undo a start nobody was told about: no notice, no session left behind."""
        activation.announced = False
        self._close(activation)
        await activation.closed.wait()
        try:
            await activation.agent.store.delete(activation.child_id)
        except TetherError:
            log.exception("could not remove the rolled-back child %s", activation.child_id)
        self._descriptors.pop(activation.child_id, None)

    def _release(self, activation: Activation) -> None:
        """The owner is being torn down: end the child whatever its state."""
        activation.released = True
        activation.armed.set()
        activation.poke.set()

    def _close(self, activation: Activation) -> None:
        activation.closing = True
        self._release(activation)

    async def _run(self, activation: Activation) -> None:
        """The activation's task: the child's ``async with``, the settlement watch, the end."""
        agent = activation.agent
        stop = "aborted"
        try:
            with anyio.CancelScope(shield=True):
                try:
                    async with agent:
                        activation.unsubscribe = agent.loop.on_idle(lambda: activation.poke.set())
                        activation.ready.set()
                        await self._watch(activation)
                        activation.closing = True  # the admission cutoff
                    opened = agent.turns > activation.turns_at_start
                    stop = agent.loop.last_stop_reason if opened else "aborted"
                finally:
                    if activation.unsubscribe is not None:
                        activation.unsubscribe()
                # Notify before releasing ownership: the parent cannot settle in between.
                if activation.announced and activation.notify:
                    with anyio.move_on_after(TEARDOWN_TIMEOUT):
                        await self._notify(activation, stop)
            if activation.announced and agent.fault is None:
                self._keep_dormant(agent)
        except Exception as exc:  # reported to whoever waits; never crashes the parent
            activation.error = exc
            log.exception("continuable child %s failed to run", activation.child_id)
        finally:
            activation.closing = True
            activation.ready.set()
            self._forget(activation)
            parent = agent.runtime.live_agents.get(activation.parent_id) if agent.runtime else None
            if parent is not None:
                parent.on_teardown(activation, None)
            self._poke(activation.parent_id)
            if activation.tool is not None:
                self._service.tasks.changed(activation.parent_id)
            if activation.edge:
                self._service.emit(activation.lifecycle_event("end", stop))
            activation.closed.set()

    async def _watch(self, activation: Activation) -> None:
        """Return when the child settles or its owner releases it."""
        await activation.armed.wait()
        while True:
            poke = activation.poke = anyio.Event()
            if activation.released:
                return
            if self.state(activation) == "settled":
                return
            await poke.wait()

    def _forget(self, activation: Activation) -> None:
        if self._live.get(activation.child_id) is activation:
            del self._live[activation.child_id]
            lock = self._locks.get(activation.child_id)
            if lock is not None and not lock.locked():
                del self._locks[activation.child_id]
        owned = self._owned.get(activation.parent_id)
        if owned is not None:
            owned.discard(activation.child_id)
            if not owned:
                del self._owned[activation.parent_id]

    def poke(self, session_id: str) -> None:
        """Look at the state of ``session_id``'s activation again (its inbox changed)."""
        self._poke(session_id)

    def _poke(self, session_id: str) -> None:
        """Look at an activation's state again (its children changed)."""
        activation = self._live.get(session_id)
        if activation is not None:
            activation.poke.set()

    async def _notify(self, activation: Activation, stop: str) -> None:
        """Deliver the settlement notice to the parent, by the parent's state."""
        agent = activation.agent
        parent = agent.runtime.live_agents.get(activation.parent_id) if agent.runtime else None
        if parent is None:
            return  # the parent is gone: nobody to tell
        opened = agent.turns > activation.turns_at_start
        output = output_since(agent, activation.epoch_start) if opened else ""
        if activation.tool is not None:
            tasks = self._service.tasks
            text = tasks.result_text(parent, activation.child_id, activation.tool, stop, output)
        else:
            text = settlement_notice(activation.child_id, stop, output)
        source = MessageSource(kind="notice", sender=activation.child_id)
        try:
            if parent.tearing_down:
                await parent.inject(text, source=source)
            elif parent.status == "running":
                await parent.steer(text, source=source)  # several notices share a step
            else:
                await parent.followup(text, source=source)
        except StoreError as exc:
            if exc.code is not ErrorCode.SESSION_CLOSED:
                log.exception("could not deliver the notice of %s", activation.child_id)
            # The parent's session was closed: nobody reads notices there any more.
        except Exception:  # a notice never blocks a teardown
            log.exception("could not deliver the notice of %s", activation.child_id)


def _tool_of(descriptor: DescriptorEvent) -> str | None:
    """The tool a stored child was started by as a task (``None``: not a task)."""
    tool = descriptor.data.get("tool")
    return tool if isinstance(tool, str) else None
