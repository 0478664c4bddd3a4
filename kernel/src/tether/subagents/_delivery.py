"""Delivery: messages to a continuable child, mail other processes posted, reports upward.

Every message is durably accepted by the child's inbox before the call returns, so a crash
loses nothing that was acknowledged (recovery runs it: :mod:`tether.subagents._recovery`). A
child with no activation here is made live first, under the agent that sends (or, for posted
mail, under its nearest ancestor open here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from ..errors import ErrorCode, SubagentError, TetherError
from ..store import MessageSource, SessionHeader, SessionStore
from ..store.replay import fold
from ._authority import ancestors_in
from ._recovery import recover

if TYPE_CHECKING:
    from ..agents import Agent
    from ._activation import Activations

__all__ = ("Delivery", "holds_unrun")


class Delivery:
    """Where messages for the continuable children of one subagent service go."""

    def __init__(self, activations: Activations) -> None:
        self._activations = activations
        self._not_ours: dict[str, int] = {}
        """Sessions with mail this process found no open ancestor for (by how many agents
        were open then): looked at again only when that changes."""
        self._kept_for_owner: set[str] = set()
        """Children whose mail :meth:`run_for_owner` runs (``tether sessions send``): the
        process's keeper hands their mail only to a live activation, never restores them."""

    async def to_child(
        self, host: Agent, header: SessionHeader, content: str, source: MessageSource, steer: bool
    ) -> str:
        """Give ``content`` to the child ``header`` (restored under ``host`` if it has no
        activation); the message id once its inbox durably accepted it. A running child
        queues it as its next turn (with ``steer``, its running turn sees it at its next
        step); a waiting child is woken."""
        activations = self._activations
        async with activations.lock(header.id):
            activation = activations.get(header.id)
            if activation is not None and (activation.closing or activation.released):
                await activation.closed.wait()  # lost the race with disposal: restore it anew
                activation = None
            if activation is None:
                activation = await activations.restore(host, header)
            agent = activation.agent
            if steer and agent.status == "running":
                message_id = await agent.steer(content, source=source)
            else:
                message_id = await agent.followup(content, source=source)
            activation.arm()
            return message_id

    async def posted(self, store: SessionStore, live: Mapping[str, Agent], session_id: str) -> None:
        """Run what another process posted to ``session_id`` in ``store`` (``tether sessions
        send``, an orphan's notice): a session open here (``live``) takes it into its inbox; a
        stored child is restored under its nearest ancestor open here and runs it. Mail for a
        session this process does not drive is left for its owner."""
        activations = self._activations
        activation = activations.get(session_id)
        if activation is not None:
            async with activations.lock(session_id):
                if not (activation.closing or activation.released):
                    if await activation.agent.lease.collect_mail():
                        activation.arm()
                    return
            if session_id in self._kept_for_owner:
                return  # run_for_owner restores it, and leaves its host only when it is done
            await activation.closed.wait()  # it was closing: restore it anew below
        elif session_id in self._kept_for_owner:
            return
        elif session_id in live:
            await live[session_id].lease.collect_mail()
            return
        if self._not_ours.get(session_id) == len(live):
            return  # looked already, and nothing opened or closed here since
        try:
            header = await store.header(session_id)
        except TetherError:
            self._not_ours[session_id] = len(live)
            return
        for ancestor in await ancestors_in(store, header):
            agent = live.get(ancestor)
            if agent is not None and not agent.tearing_down:
                self._not_ours.pop(session_id, None)
                await recover(activations, agent, repair=False)
                if await store.mailbox(session_id):
                    self._not_ours[session_id] = len(live)  # not a continuable child here
                return
        self._not_ours[session_id] = len(live)

    def keep_for_owner(self, child_id: str) -> None:
        """From now on, the mail of ``child_id`` that finds it without a live activation is
        left for :meth:`run_for_owner`, which restores it (never the keeper)."""
        self._kept_for_owner.add(child_id)

    async def run_for_owner(self, host: Agent, header: SessionHeader) -> bool:
        """Make the child run what it holds, as the person who owns it (no settlement notice):
        restore it under ``host`` when it has no activation and holds messages nobody ran
        (posted mail, or accepted and unclaimed in its log), take its mail, run it in order.
        ``False`` when it has no activation and nothing to run."""
        activations = self._activations
        async with activations.lock(header.id):
            activation = activations.get(header.id)
            if activation is not None and (activation.closing or activation.released):
                await activation.closed.wait()  # it settled: restore it anew if mail came
                activation = None
            if activation is None:
                if not await holds_unrun(host.store, header.id):
                    return False
                activation = await activations.restore(host, header)
                activation.notify = False
            agent = activation.agent
            await agent.lease.collect_mail()
            if activation.closing or activation.released:
                return True  # it settled meanwhile: what it took waits in its log, run next
            agent.loop.resume()  # what a restore parked (an earlier driver's leftovers) runs too
            activation.arm()
            return True

    async def report(self, child: Agent, content: str, delivery: Literal["quiet", "wakeup"]) -> str:
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


async def holds_unrun(store: SessionStore, session_id: str) -> bool:
    """Whether the session holds messages nobody ran: posted mail, or accepted messages nobody
    claimed. The log is read after the mailbox, so a message ``take_mail`` moved from one to
    the other in between (all or nothing) is seen in the log."""
    if await store.mailbox(session_id):
        return True
    return fold([stored.event for stored in await store.events(session_id)]).waiting
