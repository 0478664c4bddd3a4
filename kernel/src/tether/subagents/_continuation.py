"""Continuable children: durable child sessions that take follow-ups until they settle.

A continuable child keeps its session after it answers. While it lives in this process it has
one **activation**: the child agent, hosted by a task its direct parent owns, in one of three
states:

* ``running``: a turn runs, or an accepted message is not claimed yet (parked ones too);
* ``waiting``: quiet, but it owns live continuable children of its own;
* ``settled``: quiet and owns nothing. The activation then closes: it stops taking messages
  (the admission cutoff), the child is torn down (its own children first), the parent gets one
  notice, and only then is the parent's ownership released.

A message for a child with no activation cold-restores it from its own log: the first
``subagent`` descriptor after its seed says how it was set up; the provider is not called, so
this works after the provider is gone. Every message is durably accepted by the child's inbox
before the call returns, so a crash loses nothing that was acknowledged (see
:meth:`ContinuationManager.recover`).

Authority: follow-ups come only from the exact live agent of the child's durable
``parent_session``; interrupts from an exact live ancestor or from the human who owns the root
session; reports only from the exact agent of a live activation, to its direct parent.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..agents._repair import closing_events
from ..errors import CapabilityError, ErrorCode, StoreError, SubagentError, TetherError
from ..store import (
    DescriptorEvent,
    InboxAccepted,
    MessageSource,
    SessionHeader,
    SessionStore,
    ToolResult,
    UserMessage,
)
from ..store.replay import fold
from ._child import CONTINUABLE_DESCRIPTOR, compose_local_child, final_output, restore_local_child
from ._depth import child_depth
from ._types import ContinuableProvider, SubagentEvent, declared_capabilities
from .notices import settlement_notice

if TYPE_CHECKING:
    from ..agents import Agent
    from ._runtime import SubagentRuntime
    from ._types import SubagentStartRequest

__all__ = (
    "ActivationState",
    "AgentEntry",
    "ContinuableStart",
    "ContinuationManager",
    "InterruptOutcome",
)

log = logging.getLogger("tether.subagents")

ActivationState = Literal["running", "waiting", "settled"]
#: What :meth:`ContinuationManager.interrupt` did.
InterruptOutcome = Literal["interrupted", "not-running", "settling", "not-live", "not-continuable"]

#: How many events after a child's seed the continuable descriptor is looked for in (its setup
#: window: the delegation descriptor, the continuable descriptor, the note, the first prompt).
SETUP_WINDOW = 16
#: How many settled children's agents are kept in memory for quick follow-ups.
DORMANT_AGENTS = 256
#: How long a teardown waits for a child to record its end, in seconds.
TEARDOWN_TIMEOUT = 10.0


@dataclass(frozen=True)
class ContinuableStart:
    """What ``start_continuable`` returns once the first prompt is durably accepted."""

    child_id: str
    message_id: str


@dataclass(frozen=True)
class AgentEntry:
    """One continuable child in a listing."""

    id: str
    parent: str
    depth: int
    label: str | None
    status: Literal["running", "waiting", "ready"] | None
    """``running``/``waiting``: live in this process; ``ready``: stored, restorable."""
    diagnostic: str | None = None
    """Instead of a status: ``corrupt`` (its log cannot be read)."""


@dataclass(eq=False)
class _Activation:
    child_id: str
    parent_id: str
    provider: str
    label: str | None
    depth: int
    agent: Agent
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    epoch_start: int = 0
    closing: bool = False
    released: bool = False
    announced: bool = False
    ready: anyio.Event = field(default_factory=anyio.Event)
    closed: anyio.Event = field(default_factory=anyio.Event)
    poke: anyio.Event = field(default_factory=anyio.Event)
    armed: anyio.Event = field(default_factory=anyio.Event)
    """Set once the epoch's first message is accepted: only then can the child settle."""
    error: BaseException | None = None
    unsubscribe: Callable[[], None] | None = None
    turns_at_start: int = 0
    edge: bool = False
    notify: bool = True

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


class ContinuationManager:
    """The continuable children of one kernel's runtime (``runtime.subagents.continuation``)."""

    def __init__(self, runtime: SubagentRuntime) -> None:
        self._runtime = runtime
        self._activations: dict[str, _Activation] = {}
        self._owned: dict[str, set[str]] = {}  # parent session -> its live continuable children
        self._locks: dict[str, anyio.Lock] = {}
        self._descriptors: dict[str, DescriptorEvent | None] = {}
        self._dormant: OrderedDict[str, Agent] = OrderedDict()
        self._not_ours: dict[str, int] = {}
        """Sessions with mail this process found no open ancestor for (by how many agents
        were open then): looked at again only when that changes."""
        """Settled children's agents, kept so a follow-up skips re-reading their logs."""

    # ------------------------------------------------------------------ queries

    def state(self, child_id: str) -> ActivationState | None:
        """The child's state in this process, ``None`` when it has no activation."""
        activation = self._activations.get(child_id)
        if activation is None:
            return None
        return self._state(activation)

    def _state(self, activation: _Activation) -> ActivationState:
        agent = activation.agent
        if agent.fault is not None and agent.status == "idle":
            return "settled"  # its store refused a write: it takes no more turns
        if agent.status == "running" or agent.pending:
            return "running"
        if self._owned.get(activation.child_id):
            return "waiting"
        return "settled"

    def live(self, child_id: str) -> Agent | None:
        """The child's agent while it has an activation."""
        activation = self._activations.get(child_id)
        return activation.agent if activation is not None else None

    # ------------------------------------------------------------------ start

    async def start(self, name: str, request: SubagentStartRequest) -> ContinuableStart:
        """Check, compose, host, and hand the first prompt to a continuable child."""
        runtime = self._runtime
        provider = runtime.check(name, request)
        # The one declaration: its capabilities (continuable: its prepare_continuable).
        prepare = (
            provider.prepare_continuable
            if isinstance(provider, ContinuableProvider)
            and "continuable" in declared_capabilities(provider)
            else None
        )
        if prepare is None:
            raise CapabilityError(
                ErrorCode.UNSUPPORTED_CAPABILITY,
                f'subagent provider "{name}" does not support continuable children (no '
                "prepare_continuable capability)",
                remedy='use a provider that has it, or background = "one-shot"',
            )
        if request.output_schema is not None:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                "an output schema applies to one-shot runs; a continuable child answers in text",
                remedy="drop output_schema, or delegate one-shot",
            )
        parent = request.parent
        if not getattr(parent.store, "durable", False):
            raise SubagentError(
                ErrorCode.PERSISTENCE_UNAVAILABLE,
                "continuable children need a durable session store, and this agent's store "
                f"({type(parent.store).__name__}) keeps nothing after the process ends",
                remedy='set store = "sqlite:PATH" under [tether] in the profile',
            )
        self._authorize_live(parent, "start a continuable child")
        if parent.tearing_down:
            raise SubagentError(
                ErrorCode.ACTIVATION_CLOSING,
                f'agent "{parent.session_id}" is shutting down and takes no new children',
            )
        _check_cancel(request, "before it started")
        plan = await prepare(request)
        _check_cancel(request, "before it started")
        child = await compose_local_child(
            request,
            provider=name,
            seed=plan.seed,
            keep_tool_list=plan.keep_tool_list,
            continuable=True,
            model=plan.model,
            model_route=plan.model_route,
        )
        activation = _Activation(
            child_id=child.session_id,
            parent_id=parent.session_id,
            provider=name,
            label=request.label,
            depth=child_depth(parent, None),
            agent=child,
            epoch_start=len(child.messages),
            turns_at_start=child.turns,
        )
        try:
            await self._host(parent, activation)
            _check_cancel(request, "before its first prompt was accepted")
            message_id = await child.followup(
                request.prompt, source=MessageSource(kind="subagent", sender=parent.session_id)
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._roll_back(activation)
            raise
        activation.announced = True
        activation.armed.set()
        return ContinuableStart(child.session_id, message_id)

    async def _roll_back(self, activation: _Activation) -> None:
        """Undo a start nobody was told about: no notice, no session left behind."""
        activation.announced = False
        await self._close(activation)
        await activation.closed.wait()
        try:
            await activation.agent.store.delete(activation.child_id)
        except TetherError:
            log.exception("could not remove the rolled-back child %s", activation.child_id)
        self._descriptors.pop(activation.child_id, None)

    # ------------------------------------------------------------------ hosting

    async def _host(self, parent: Agent, activation: _Activation) -> None:
        """Start the activation's task in the parent's task group and wait until it is open."""
        if activation.child_id in self._activations:
            raise StoreError(
                ErrorCode.SESSION_CONFLICT,
                f'subagent "{activation.child_id}" already has a live activation',
            )
        self._activations[activation.child_id] = activation
        self._owned.setdefault(parent.session_id, set()).add(activation.child_id)
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
        self._runtime.emit(activation.lifecycle_event("start", None))

    def _release(self, activation: _Activation) -> None:
        """The owner is being torn down: end the child whatever its state."""
        activation.released = True
        activation.armed.set()
        activation.poke.set()

    async def _close(self, activation: _Activation) -> None:
        activation.closing = True
        self._release(activation)

    async def _run(self, activation: _Activation) -> None:
        """The activation's task: the child's ``async with``, the settlement watch, the end."""
        agent = activation.agent
        stop = "aborted"
        try:
            with anyio.CancelScope(shield=True):
                try:
                    async with agent:
                        activation.unsubscribe = agent.on_idle(lambda: activation.poke.set())
                        activation.ready.set()
                        await self._watch(activation)
                        activation.closing = True  # the admission cutoff
                    opened = agent.turns > activation.turns_at_start
                    stop = agent.last_stop_reason if opened else "aborted"
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
            if activation.edge:
                self._runtime.emit(activation.lifecycle_event("end", stop))
            activation.closed.set()

    async def _watch(self, activation: _Activation) -> None:
        """Return when the child settles or its owner releases it."""
        await activation.armed.wait()
        while True:
            poke = activation.poke = anyio.Event()
            if activation.released:
                return
            if self._state(activation) == "settled":
                return
            await poke.wait()

    def _forget(self, activation: _Activation) -> None:
        if self._activations.get(activation.child_id) is activation:
            del self._activations[activation.child_id]
            lock = self._locks.get(activation.child_id)
            if lock is not None and not lock.locked():
                del self._locks[activation.child_id]
        owned = self._owned.get(activation.parent_id)
        if owned is not None:
            owned.discard(activation.child_id)
            if not owned:
                del self._owned[activation.parent_id]

    def _poke(self, session_id: str) -> None:
        """Look at an activation's state again (its children changed)."""
        activation = self._activations.get(session_id)
        if activation is not None:
            activation.poke.set()

    async def _notify(self, activation: _Activation, stop: str) -> None:
        """Deliver the settlement notice to the parent, by the parent's state."""
        agent = activation.agent
        parent = agent.runtime.live_agents.get(activation.parent_id) if agent.runtime else None
        if parent is None:
            return  # the parent is gone: nobody to tell
        opened = agent.turns > activation.turns_at_start
        output = final_output(agent.messages[activation.epoch_start :]) if opened else ""
        text = settlement_notice(activation.child_id, stop, output)
        source = MessageSource(kind="notice", sender=activation.child_id)
        try:
            if parent.tearing_down:
                await parent.inject(text, source=source)
            elif parent.status == "running":
                await parent.steer(text, source=source)  # several notices share a step
            else:
                await parent.followup(text, source=source)
        except Exception:  # a notice never blocks a teardown
            log.exception("could not deliver the notice of %s", activation.child_id)

    # ------------------------------------------------------------------ follow-ups

    async def followup(
        self, parent: Agent, child_id: str, content: str, *, steer: bool = False
    ) -> str:
        """Send ``content`` to a continuable child from its exact live direct parent.

        A running child queues it as its next turn (or, with ``steer``, reaches the running
        turn at its next step); a waiting child is woken; a child with no activation is
        cold-restored from its log. Returns the message id once the child's inbox durably
        accepted it.
        """
        self._authorize_live(parent, "send to a subagent")
        header = await self._header(parent, child_id)
        if header.parent_session != parent.session_id:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'subagent "{child_id}" belongs to another parent session; only its direct '
                "parent may send it work",
                remedy="send through the agent that started it",
            )
        source = MessageSource(kind="followup", sender=parent.session_id)
        return await self._deliver(parent, header, content, source, steer)

    async def _deliver(
        self, host: Agent, header: SessionHeader, content: str, source: MessageSource, steer: bool
    ) -> str:
        lock = self._locks.setdefault(header.id, anyio.Lock())
        async with lock:
            activation = self._activations.get(header.id)
            if activation is not None and (activation.closing or activation.released):
                await activation.closed.wait()  # lost the race with disposal: restore it anew
                activation = None
            if activation is None:
                activation = await self._cold_restore(host, header)
            agent = activation.agent
            if steer and agent.status == "running":
                message_id = await agent.steer(content, source=source)
            else:
                message_id = await agent.followup(content, source=source)
            activation.announced = True
            activation.armed.set()
            return message_id

    async def _cold_restore(self, host: Agent, header: SessionHeader) -> _Activation:
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
        activation = _Activation(
            child_id=header.id,
            parent_id=header.parent_session or host.session_id,
            provider=str(descriptor.data.get("provider", "")),
            label=header.label,
            depth=header.delegation_depth,
            agent=agent,
            epoch_start=len(agent.messages),
            turns_at_start=agent.turns,
        )
        await self._host(host, activation)
        return activation

    async def _reuse(self, host: Agent, header: SessionHeader) -> Agent | None:
        """The settled agent of this child, if this process still has it and nobody wrote to
        its log since (another process): its history is current, so no re-read is needed."""
        agent = self._dormant.pop(header.id, None)
        if agent is None or agent.runtime is not host.runtime or agent.fault is not None:
            return None
        if await host.store.events(header.id, after=agent.log_length, limit=1):
            return None  # the log grew elsewhere: restore from it
        return agent

    def _keep_dormant(self, agent: Agent) -> None:
        self._dormant[agent.session_id] = agent
        self._dormant.move_to_end(agent.session_id)
        while len(self._dormant) > DORMANT_AGENTS:
            self._dormant.popitem(last=False)

    async def descriptor(self, agent: Agent, header: SessionHeader) -> DescriptorEvent | None:
        """The child's continuable descriptor: the first one after its seed (``None``: not a
        continuable child). Cached per child."""
        if header.id in self._descriptors:
            return self._descriptors[header.id]
        found: DescriptorEvent | None = None
        window = await agent.store.events(header.id, after=header.seed_length, limit=SETUP_WINDOW)
        for stored in window:
            event = stored.event
            if isinstance(event, DescriptorEvent) and event.kind == CONTINUABLE_DESCRIPTOR:
                if event.version == 1 and event.data.get("mode") == "continuable":
                    found = event
                break
            if isinstance(event, UserMessage | InboxAccepted):
                break  # the setup window is over: a descriptor after this is not one
        self._descriptors[header.id] = found
        return found

    async def _header(self, agent: Agent, child_id: str) -> SessionHeader:
        try:
            return await agent.store.header(child_id)
        except TetherError as exc:
            if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                raise
            raise SubagentError(
                ErrorCode.SUBAGENT_UNAVAILABLE,
                f'subagent "{child_id}" is unavailable: there is no such session',
                remedy="list your subagents with list_agents",
            ) from None

    # ------------------------------------------------------------------ human sends

    async def send_as_owner(
        self, host: Agent, child_id: str, content: str, *, notify: bool = True
    ) -> str:
        """The human continues a child directly: ``host`` is an open agent of the child's root
        session (which the human owns) or of any session on its chain; the child is restored
        under it if it has no activation."""
        header = await self._header(host, child_id)
        await self._authorize_owner(host, header)
        source = MessageSource(kind="user")
        message_id = await self._deliver(host, header, content, source, steer=False)
        if not notify:
            self._activations[header.id].notify = False
        return message_id

    async def wait_quiet(self, agent: Agent) -> None:
        """Wait until ``agent`` is idle and every continuable child it owns has settled (and
        it has taken their notices)."""
        while True:
            await agent.when_idle()
            owned = list(self._owned.get(agent.session_id, ()))
            if not owned:
                if agent.status == "idle":
                    return
                continue
            for child_id in owned:
                await self.wait_settled(child_id)

    async def wait_settled(self, child_id: str) -> None:
        """Wait until the child's activation (if any) has closed."""
        activation = self._activations.get(child_id)
        if activation is not None:
            await activation.closed.wait()

    async def _authorize_owner(self, host: Agent, header: SessionHeader) -> None:
        chain = await self._ancestors(host, header)
        try:
            root = await host.store.header(chain[-1]) if chain else header
        except TetherError:
            root = None  # an ancestor is missing: nobody can be shown to own the chain
        if root is None or root.origin != "user" or host.session_id not in chain:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'session "{header.id}" is not below a session the human owns here',
                remedy="open the child's root session (or one of its ancestors)",
            )

    async def _ancestors(self, agent: Agent, header: SessionHeader) -> list[str]:
        """The durable parent chain of ``header``, nearest first (cycles stop the walk)."""
        return await _ancestors_in(agent.store, header)

    # ------------------------------------------------------------------ interrupt, report

    async def interrupt(
        self, target_id: str, *, by: Agent | None = None, human_root: str | None = None
    ) -> InterruptOutcome:
        """Abort the target's running turn, keeping its queued messages parked until a later
        waking message; its descendants keep running. ``by`` is an exact live ancestor;
        ``human_root`` the root session the human owns. Returns what happened:

        * ``interrupted``: a running turn was aborted;
        * ``not-running``: the child is live here but no turn was running (it holds parked
          messages, or waits on children of its own); nothing was aborted;
        * ``settling``: it had settled and is closing; nothing was aborted;
        * ``not-live``: it is a continuable child with no activation in this process (it
          settled earlier; a follow-up restores it);
        * ``not-continuable``: it is below ``by`` but not a continuable child (a one-shot run,
          which its own tool call or job owns).

        An id with no session is ``SUBAGENT_UNAVAILABLE``; a session ``by`` is not above,
        ``UNAUTHORIZED``. With ``human_root``, a target without an activation here is
        ``not-live`` (there is no store to look it up in).
        """
        if (by is None) == (human_root is None):
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                "an interrupt names exactly one authority: by=AGENT or human_root=SESSION",
            )
        if by is not None:
            self._authorize_live(by, "interrupt a subagent")
            if by.session_id == target_id:
                raise SubagentError(
                    ErrorCode.UNAUTHORIZED,
                    "an agent cannot interrupt itself through the subagent runtime",
                    remedy="end your turn instead",
                )
        activation = self._activations.get(target_id)
        if activation is None:
            if by is None:
                return "not-live"
            header = await self._header(by, target_id)
            self._authorize_ancestor(by, target_id, await self._ancestors(by, header))
            if await self.descriptor(by, header) is None:
                return "not-continuable"
            return "not-live"
        agent = activation.agent
        chain = await self._ancestors(agent, agent.header)
        if by is not None:
            self._authorize_ancestor(by, target_id, chain)
        if human_root is not None:
            root = await agent.store.header(chain[-1]) if chain else None
            if root is None or root.id != human_root or root.origin != "user":
                raise SubagentError(
                    ErrorCode.UNAUTHORIZED,
                    f'"{target_id}" is not below "{human_root}", a root session a person started',
                )
        if activation.closing:
            return "settling"
        return "interrupted" if agent.interrupt() else "not-running"

    def _authorize_ancestor(self, by: Agent, target_id: str, chain: list[str]) -> None:
        if by.session_id not in chain:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'agent "{by.session_id}" is not an ancestor of "{target_id}"',
                remedy="only the agents above a subagent may interrupt it",
            )

    async def report(
        self, child: Agent, content: str, *, delivery: Literal["quiet", "wakeup"] = "quiet"
    ) -> str:
        """A live continuable child tells its direct parent something without ending its turn.
        ``quiet`` adds it to the parent's context; ``wakeup`` reaches the parent at its next
        step (an idle parent takes a turn on it)."""
        activation = self._activations.get(child.session_id)
        if activation is None or activation.agent is not child:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'agent "{child.session_id}" is not a live continuable subagent',
                remedy="report is for continuable subagents",
            )
        if activation.closing:
            raise SubagentError(
                ErrorCode.ACTIVATION_CLOSING,
                f'subagent "{child.session_id}" is closing; its report was not delivered',
            )
        runtime = child.runtime
        parent = runtime.live_agents.get(activation.parent_id) if runtime is not None else None
        if parent is None or parent.tearing_down:
            raise SubagentError(
                ErrorCode.PARENT_UNAVAILABLE,
                "the direct parent is not live; the report was not delivered",
            )
        text = f"Background subagent {child.session_id} reported:\n{content}"
        source = MessageSource(kind="notice", sender=child.session_id)
        if delivery == "quiet":
            return await parent.inject(text, source=source)
        return await parent.steer(text, source=source)

    # ------------------------------------------------------------------ listing

    async def list(
        self,
        agent: Agent,
        *,
        scope: Literal["children", "descendants"] = "children",
        offset: int = 0,
        limit: int | None = None,
    ) -> tuple[list[AgentEntry], int]:
        """The continuable children (or descendants) of ``agent``'s session from storage, with
        their status here; ``(page, total)``. Descendants are in pre-order."""
        entries: list[AgentEntry] = []
        await self._collect(agent, agent.session_id, scope == "descendants", entries, set())
        total = len(entries)
        end = None if limit is None else offset + limit
        return entries[offset:end], total

    async def _collect(
        self, agent: Agent, root: str, deep: bool, into: list[AgentEntry], seen: set[str]
    ) -> None:
        """Pre-order, oldest first per parent; an explicit stack, so a deep chain does not
        use up the call stack, and ``seen`` stops a corrupt parent cycle."""
        stack: list[SessionHeader | str] = [root]
        while stack:
            item = stack.pop()
            if isinstance(item, SessionHeader):
                entry = await self._entry(agent, item)
                if entry is not None:
                    into.append(entry)
                if not deep:
                    continue
                parent = item.id
            else:
                parent = item
            children = await agent.store.sessions(parent=parent)
            fresh = [h for h in children if h.id not in seen and h.id != root]
            seen.update(h.id for h in fresh)
            fresh.sort(key=_age, reverse=True)
            stack.extend(fresh)

    async def _entry(self, agent: Agent, header: SessionHeader) -> AgentEntry | None:
        parent = header.parent_session or ""
        if header.id in self._activations:
            state = self._state(self._activations[header.id])
            status: Any = "running" if state in ("running", "settled") else "waiting"
            return AgentEntry(header.id, parent, header.delegation_depth, header.label, status)
        try:
            descriptor = await self.descriptor(agent, header)
        except TetherError:
            return AgentEntry(
                header.id, parent, header.delegation_depth, header.label, None, "corrupt"
            )
        if descriptor is None:
            return None  # a one-shot child or an ordinary session
        return AgentEntry(header.id, parent, header.delegation_depth, header.label, "ready")

    # ------------------------------------------------------------------ recovery

    async def recover(self, parent: Agent, *, repair: bool = True) -> list[str]:
        """After a restart: restore the continuable children of ``parent`` (an open agent)
        whose logs hold accepted messages nobody claimed (or mail posted to them), and run
        them; deeper down too (a child is restored to host a descendant that has such
        messages). Every acknowledged follow-up then runs exactly once; the ids of the
        restored sessions, parents first.

        With ``repair``, first every session in the tree below ``parent`` that a dead process
        left mid-turn (one-shot children too) is repaired under its lease: its open calls are
        answered as interrupted, the turn ends ``aborted``, and a parent that was told of the
        child (a continuable child with nothing more to run, a background task) gets one
        notice, exactly once however often recovery runs."""
        self._authorize_live(parent, "recover subagents")
        if repair:
            await self._repair_orphans(parent)
        restored: list[str] = []
        for header in sorted(await parent.store.sessions(parent=parent.session_id), key=_age):
            if await self.descriptor(parent, header) is None:
                continue
            own = await _has_unclaimed(parent, header.id)
            below = await self._pending_below(parent, header.id)
            if not own and not below:
                continue
            lock = self._locks.setdefault(header.id, anyio.Lock())
            async with lock:
                activation = self._activations.get(header.id)
                if activation is None:
                    activation = await self._cold_restore(parent, header)
                    restored.append(header.id)
                if below:
                    restored += await self.recover(activation.agent, repair=False)
                activation.announced = True
                activation.agent.resume()
                activation.armed.set()
        return restored

    async def _repair_orphans(self, root: Agent) -> list[str]:
        """Close the turns dead processes left open below ``root``; the repaired ids."""
        store, live = root.store, root.runtime.live_agents if root.runtime else {}
        repaired: list[str] = []
        stack, seen = [root.session_id], {root.session_id}
        while stack:
            for header in await store.sessions(parent=stack.pop()):
                if header.id in seen:
                    continue
                seen.add(header.id)
                stack.append(header.id)
                if header.id in live or header.id in self._activations:
                    continue  # driven here: nothing was orphaned
                log = [stored.event for stored in await store.events(header.id)]
                if fold(log).open_turn is None:
                    continue
                try:
                    await store.acquire(header.id)
                except TetherError:
                    continue  # a live process drives it: not an orphan
                try:
                    if await self._repair_orphan(root, header):
                        repaired.append(header.id)
                finally:
                    await store.release(header.id)
        for session_id in {root.session_id, *live}:
            if session_id in live:
                await live[session_id].collect_mail()  # notices to parents open here
        return repaired

    async def _repair_orphan(self, root: Agent, header: SessionHeader) -> bool:
        """Repair one child under its lease (read again: the lease may have changed hands)."""
        store = root.store
        log = [stored.event for stored in await store.events(header.id)]
        open_turn = fold(log).open_turn
        if open_turn is None:
            return False
        notice = await self._orphan_notice(root, header, log)
        if notice is not None and header.parent_session is not None:
            notice_id = f"msg_orphan_{header.id}_{open_turn.turn}"
            if not await _holds_message(store, header.parent_session, notice_id):
                await store.post(
                    header.parent_session,
                    InboxAccepted(
                        message_id=notice_id,
                        content=notice,
                        source=MessageSource(kind="notice", sender=header.id),
                    ),
                )
        # The notice first, then the repair: a crash in between posts nothing twice (the
        # notice's id is fixed) and leaves the turn open for the next recovery.
        await store.append(header.id, closing_events(open_turn))
        log.clear()
        return True

    async def _orphan_notice(
        self, root: Agent, header: SessionHeader, log: list[Any]
    ) -> str | None:
        """What the parent of an orphaned child is told, or ``None`` when it is not told: a
        continuable child that has messages to run settles (and notifies) later; a one-shot
        child the parent was never told of (a foreground run) is answered by the parent's
        own repaired call."""
        if await self.descriptor(root, header) is not None:
            if fold(log).waiting:
                return None
            return settlement_notice(header.id, "aborted", "")
        if header.parent_session is None:
            return None
        announced = f"started background subagent task {header.id}"
        for stored in await root.store.events(header.parent_session):
            event = stored.event
            if isinstance(event, ToolResult) and event.content == announced:
                return (
                    f"Background subagent task {header.id} was stopped before it finished: "
                    "the process running it stopped.\nIt left no closing message."
                )
        return None

    async def deliver_mail(
        self, store: SessionStore, live: Mapping[str, Agent], session_id: str
    ) -> None:
        """Run what another process posted to ``session_id`` in ``store`` (``tether sessions
        send``, an orphan's notice): a session open here (``live``) takes it into its inbox; a
        stored child is restored under its nearest ancestor open here and runs it. Mail for a
        session this process does not drive is left for its owner."""
        activation = self._activations.get(session_id)
        if activation is not None:
            async with self._locks.setdefault(session_id, anyio.Lock()):
                if not (activation.closing or activation.released):
                    if await activation.agent.collect_mail():
                        activation.announced = True
                        activation.armed.set()
                    return
            await activation.closed.wait()  # it was closing: restore it anew below
        elif session_id in live:
            await live[session_id].collect_mail()
            return
        if self._not_ours.get(session_id) == len(live):
            return  # looked already, and nothing opened or closed here since
        try:
            header = await store.header(session_id)
        except TetherError:
            self._not_ours[session_id] = len(live)
            return
        for ancestor in await _ancestors_in(store, header):
            agent = live.get(ancestor)
            if agent is not None and not agent.tearing_down:
                self._not_ours.pop(session_id, None)
                await self.recover(agent, repair=False)
                if await store.mailbox(session_id):
                    self._not_ours[session_id] = len(live)  # not a continuable child here
                return
        self._not_ours[session_id] = len(live)

    async def _pending_below(self, agent: Agent, session_id: str) -> bool:
        """Whether a continuable session below ``session_id`` has unclaimed messages."""
        stack, seen = [session_id], {session_id}
        while stack:
            for header in await agent.store.sessions(parent=stack.pop()):
                if header.id in seen:
                    continue
                seen.add(header.id)
                stack.append(header.id)
                if header.id in self._activations:
                    continue
                if await self.descriptor(agent, header) is not None and await _has_unclaimed(
                    agent, header.id
                ):
                    return True
        return False

    # ------------------------------------------------------------------ authority

    def _authorize_live(self, agent: Agent, what: str) -> None:
        runtime = agent.runtime
        if runtime is None or runtime.live_agents.get(agent.session_id) is not agent:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'only the exact live agent of a session may {what}; agent "{agent.session_id}" '
                "is not open in this process",
                remedy="call from inside `async with agent:`",
            )


def _age(header: SessionHeader) -> tuple[float, str]:
    return header.created_at, header.id


async def _has_unclaimed(agent: Agent, session_id: str) -> bool:
    """Whether the session holds accepted messages nobody claimed, or posted mail."""
    if await agent.store.mailbox(session_id):
        return True
    return fold([stored.event for stored in await agent.store.events(session_id)]).waiting


async def _holds_message(store: Any, session_id: str, message_id: str) -> bool:
    """Whether ``message_id`` was posted to the session or accepted into its log."""
    if any(m.message_id == message_id for m in await store.mailbox(session_id)):
        return True
    return any(
        isinstance(stored.event, InboxAccepted) and stored.event.message_id == message_id
        for stored in await store.events(session_id)
    )


def _check_cancel(request: SubagentStartRequest, when: str) -> None:
    if request.cancel.cancelled:
        raise SubagentError(
            ErrorCode.SUBAGENT_CANCELLED,
            f"the delegation was cancelled {when} ({request.cancel.reason})",
        )


async def _ancestors_in(store: SessionStore, header: SessionHeader) -> list[str]:
    """The durable parent chain of ``header`` in ``store``, nearest first (cycles stop the
    walk)."""
    chain: list[str] = []
    current = header
    while current.parent_session is not None and current.parent_session not in chain:
        chain.append(current.parent_session)
        try:
            current = await store.header(current.parent_session)
        except TetherError:
            break
    return chain
