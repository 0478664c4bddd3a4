"""Continuable children: durable child sessions that take follow-ups until they settle.

A continuable child keeps its session after it answers. :class:`ContinuationManager` is what a
runtime's subagent service offers for them (``runtime.subagents.continuation``); each of its
verbs checks who may do it, then acts through one room:

* :mod:`~tether.subagents._activation`: a child made live in this process, hosted until it
  settles, its parent notified (its states: ``running``, ``waiting``, ``settled``);
* :mod:`~tether.subagents._delivery`: messages to a child, mail other processes posted,
  reports to the parent;
* :mod:`~tether.subagents._authority`: who may start, continue, interrupt or report;
* :mod:`~tether.subagents._recovery`: orphans repaired and accepted messages run after a
  restart;
* :mod:`~tether.subagents._listing`: the children of a session and their state here.

A child is composed and cold-restored with the local-child kit (:mod:`tether.subagents._kit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio

from ..contracts import ContinuableProvider, declared_capabilities
from ..errors import CapabilityError, ErrorCode, SubagentError
from ..store import DescriptorEvent, MessageSource, SessionHeader, SessionStore
from ._activation import Activation, Activations, ActivationState
from ._authority import (
    ancestors_in,
    authorize_ancestor,
    authorize_human_root,
    authorize_live,
    authorize_owner,
    authorize_parent,
    child_header,
)
from ._child import answers_of
from ._delivery import Delivery
from ._kit import compose_local_child
from ._listing import AgentEntry, list_continuable
from ._recovery import recover

if TYPE_CHECKING:
    from ..agents import Agent
    from ..contracts import SubagentStartRequest
    from ._runtime import SubagentRuntime

__all__ = ("ContinuableStart", "ContinuationManager", "InterruptOutcome")

#: What :meth:`ContinuationManager.interrupt` did.
InterruptOutcome = Literal["interrupted", "not-running", "settling", "not-live", "not-continuable"]


@dataclass(frozen=True)
class ContinuableStart:
    """What ``start_continuable`` returns once the first prompt is durably accepted."""

    child_id: str
    message_id: str


class ContinuationManager:
    """The continuable children of one runtime (``runtime.subagents.continuation``)."""

    def __init__(self, runtime: SubagentRuntime) -> None:
        self._runtime = runtime
        self._activations = Activations(runtime)
        self._delivery = Delivery(self._activations)

    # ------------------------------------------------------------------ queries

    @property
    def activations(self) -> Activations:
        """The activations of this process (what is live, who owns it)."""
        return self._activations

    def state(self, child_id: str) -> ActivationState | None:
        """The child's state in this process, ``None`` when it has no activation."""
        activation = self._activations.get(child_id)
        if activation is None:
            return None
        return self._activations.state(activation)

    def live(self, child_id: str) -> Agent | None:
        """The child's agent while it has an activation."""
        activation = self._activations.get(child_id)
        return activation.agent if activation is not None else None

    async def descriptor(self, agent: Agent, header: SessionHeader) -> DescriptorEvent | None:
        """The child's continuable descriptor: the first one after its seed (``None``: not a
        continuable child). Cached per child."""
        return await self._activations.descriptor(agent, header)

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
        return await list_continuable(
            self._activations, agent, scope=scope, offset=offset, limit=limit
        )

    async def wait_quiet(self, agent: Agent) -> None:
        """Wait until ``agent`` is idle and every continuable child it owns has settled (and
        it has taken their notices)."""
        await self._activations.wait_quiet(agent)

    async def wait_settled(self, child_id: str) -> None:
        """Wait until the child's activation (if any) has closed."""
        await self._activations.wait_settled(child_id)

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
        if not parent.store.durable:
            raise SubagentError(
                ErrorCode.PERSISTENCE_UNAVAILABLE,
                "continuable children need a durable session store, and this agent's store "
                f"({type(parent.store).__name__}) keeps nothing after the process ends",
                remedy='set store = "sqlite:PATH" under [tether] in the profile',
            )
        authorize_live(parent, "start a continuable child")
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
        activation = Activation(
            child_id=child.session_id,
            parent_id=parent.session_id,
            provider=name,
            label=request.label,
            depth=child.header.delegation_depth,  # what the kit recorded
            agent=child,
            epoch_start=answers_of(child),
            turns_at_start=child.turns,
            tool=request.tool,
        )
        try:
            await self._activations.host(parent, activation)
            _check_cancel(request, "before its first prompt was accepted")
            message_id = await child.followup(
                request.prompt,
                source=MessageSource(
                    kind="subagent", sender=parent.session_id, caller=parent.caller
                ),
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._activations.roll_back(activation)
            raise
        activation.arm()
        return ContinuableStart(child.session_id, message_id)

    # ------------------------------------------------------------------ messages

    async def followup(
        self, parent: Agent, child_id: str, content: str, *, steer: bool = False
    ) -> str:
        """Send ``content`` to a continuable child from its exact live direct parent.

        A running child queues it as its next turn (or, with ``steer``, reaches the running
        turn at its next step); a waiting child is woken; a child with no activation is
        cold-restored from its log. Returns the message id once the child's inbox durably
        accepted it.
        """
        authorize_live(parent, "send to a subagent")
        header = await child_header(parent, child_id)
        authorize_parent(parent, header)
        # A task message runs for whom the parent works for now (docs/callers.md).
        source = MessageSource(kind="followup", sender=parent.session_id, caller=parent.caller)
        return await self._delivery.to_child(parent, header, content, source, steer)

    async def send_as_owner(
        self, host: Agent, child_id: str, content: str, *, notify: bool = True
    ) -> str:
        """The human continues a child directly: ``host`` is an open agent of the child's root
        session (which the human owns) or of any session on its chain; the child is restored
        under it if it has no activation."""
        header = await child_header(host, child_id)
        await authorize_owner(host, header)
        source = MessageSource(kind="user")
        message_id = await self._delivery.to_child(host, header, content, source, steer=False)
        if not notify:
            activation = self._activations.get(header.id)
            assert activation is not None  # just accepted a message, under its lock
            activation.notify = False
        return message_id

    def keep_for_owner(self, child_id: str) -> None:
        """Leave the child's mail to :meth:`run_for_owner` from now on: this process's keeper
        hands it only to a live activation and never restores the child for it. Call it
        before entering the agent that will host the child (its keeper starts with it)."""
        self._delivery.keep_for_owner(child_id)

    async def run_for_owner(self, host: Agent, child_id: str) -> None:
        """The person who owns the child's tree runs what other processes posted to it
        (``tether sessions send``, after posting its own message to the child's mailbox).

        ``host`` is an open agent on the child's chain whose root a person started (as for
        :meth:`send_as_owner`). The child is restored under it, takes its mail and runs every
        message it holds, in order, without a settlement notice; mail that arrives meanwhile
        runs too, and again after each settlement. Returns once the child has settled with
        nothing left to run. From the call on, this process's keeper no longer restores the
        child for its mail (it only hands mail to a live activation): leaving ``host`` once
        this returns never cuts a turn short, and mail that comes after waits in the store for
        the next process that drives the child."""
        self._delivery.keep_for_owner(child_id)  # before the first await: the keeper runs
        header = await child_header(host, child_id)
        await authorize_owner(host, header)
        while await self._delivery.run_for_owner(host, header):
            await self._activations.wait_settled(child_id)

    async def report(
        self, child: Agent, content: str, *, delivery: Literal["quiet", "wakeup"] = "quiet"
    ) -> str:
        """A live continuable child tells its direct parent something without ending its turn.
        ``quiet`` adds it to the parent's context; ``wakeup`` reaches the parent at its next
        step (an idle parent takes a turn on it)."""
        return await self._delivery.report(child, content, delivery)

    async def deliver_mail(
        self, store: SessionStore, live: Mapping[str, Agent], session_id: str
    ) -> None:
        """Run what another process posted to ``session_id`` in ``store`` (``tether sessions
        send``, an orphan's notice): a session open here (``live``) takes it into its inbox; a
        stored child is restored under its nearest ancestor open here and runs it. Mail for a
        session this process does not drive is left for its owner."""
        await self._delivery.posted(store, live, session_id)

    # ------------------------------------------------------------------ interrupt

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
            authorize_live(by, "interrupt a subagent")
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
            header = await child_header(by, target_id)
            authorize_ancestor(by, target_id, await ancestors_in(by.store, header))
            if await self._activations.descriptor(by, header) is None:
                return "not-continuable"
            return "not-live"
        agent = activation.agent
        chain = await ancestors_in(agent.store, agent.header)
        if by is not None:
            authorize_ancestor(by, target_id, chain)
        if human_root is not None:
            await authorize_human_root(agent.store, target_id, chain, human_root)
        if activation.closing:
            return "settling"
        return "interrupted" if agent.interrupt() else "not-running"

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
        return await recover(self._activations, parent, repair=repair)


def _check_cancel(request: SubagentStartRequest, when: str) -> None:
    if request.cancel.cancelled:
        raise SubagentError(
            ErrorCode.SUBAGENT_CANCELLED,
            f"the delegation was cancelled {when} ({request.cancel.reason})",
        )
