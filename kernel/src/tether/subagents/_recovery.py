"""Recovery: after a restart, repair the children a dead process left and run what they had
accepted.

Every acknowledged message to a continuable child was durably accepted by its inbox (or posted
to its mailbox), so recovery only has to find the children whose logs hold messages nobody
claimed and make them live again; a turn a dead process left open is closed first, and the
parent that was told of that child gets one notice, exactly once however often recovery runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..agents._repair import closing_events
from ..errors import TetherError
from ..store import (
    Event,
    InboxAccepted,
    InboxDiscarded,
    MessageSource,
    SessionHeader,
    SessionStore,
    ToolResult,
)
from ..store.replay import SessionFold, fold
from ._authority import authorize_live
from ._listing import creation_order
from ._tasks import receipt, render_task_result, result_body
from .notices import settlement_notice

if TYPE_CHECKING:
    from ..agents import Agent
    from ._activation import Activations

__all__ = ("recover",)


async def recover(activations: Activations, parent: Agent, *, repair: bool = True) -> list[str]:
    """After a restart: restore the continuable children of ``parent`` (an open agent) whose
    logs hold accepted messages nobody claimed (or mail posted to them), and run them; deeper
    down too (a child is restored to host a descendant that has such messages). Every
    acknowledged follow-up then runs exactly once; the ids of the restored sessions, parents
    first.

    With ``repair``, first every session in the tree below ``parent`` that a dead process left
    mid-turn (one-shot children too) is repaired under its lease: its open calls are answered
    as interrupted, the turn ends ``aborted``, and a parent that was told of the child (a
    continuable child with nothing more to run, a background task) gets one notice, exactly
    once however often recovery runs."""
    authorize_live(parent, "recover subagents")
    if repair:
        await _repair_orphans(activations, parent)
    restored: list[str] = []
    for header in sorted(await parent.store.sessions(parent=parent.session_id), key=creation_order):
        if await activations.descriptor(parent, header) is None:
            continue
        own = await _has_unclaimed(parent, header.id)
        below = await _pending_below(activations, parent, header.id)
        if not own and not below:
            continue
        async with activations.lock(header.id):
            activation = activations.get(header.id)
            if activation is None:
                activation = await activations.restore(parent, header)
                restored.append(header.id)
            if below:
                restored += await recover(activations, activation.agent, repair=False)
            activation.announced = True
            activation.agent.loop.resume()
            activation.armed.set()
    return restored


async def _repair_orphans(activations: Activations, root: Agent) -> list[str]:
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
            if header.id in live or activations.get(header.id) is not None:
                continue  # driven here: nothing was orphaned
            log = [stored.event for stored in await store.events(header.id)]
            if not await _orphaned(activations, root, header, fold(log)):
                continue
            try:
                await store.acquire(header.id)
            except TetherError:
                continue  # a live process drives it: not an orphan
            try:
                if await _repair_orphan(activations, root, header):
                    repaired.append(header.id)
            finally:
                await store.release(header.id)
    for session_id in {root.session_id, *live}:
        if session_id in live:
            await live[session_id].lease.collect_mail()  # notices to parents open here
    return repaired


async def _repair_orphan(activations: Activations, root: Agent, header: SessionHeader) -> bool:
    """Repair one child under its lease (read again: the lease may have changed hands)."""
    store = root.store
    log = [stored.event for stored in await store.events(header.id)]
    folded = fold(log)
    if not await _orphaned(activations, root, header, folded):
        return False
    open_turn = folded.open_turn
    notice = await _orphan_notice(activations, root, header, log)
    if notice is not None and header.parent_session is not None:
        turn = open_turn.turn if open_turn is not None else folded.turns + 1
        notice_id = f"msg_orphan_{header.id}_{turn}"
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
    if open_turn is not None:
        await store.append(header.id, closing_events(open_turn))
    else:  # a one-shot child that never began its task never will: its prompt is dropped
        await store.append(
            header.id, [InboxDiscarded(message_id=m.message_id) for m in folded.unclaimed]
        )
    log.clear()
    return True


async def _orphaned(
    activations: Activations, root: Agent, header: SessionHeader, folded: SessionFold
) -> bool:
    """Whether a dead process left the child ``header`` (not driven here) needing repair: a
    turn it opened, or a one-shot child killed before its first turn was written (its prompt
    accepted, its model never answered; a continuable child with such a message runs it)."""
    if folded.open_turn is not None:
        return True
    return folded.waiting and await activations.descriptor(root, header) is None


async def _orphan_notice(
    activations: Activations, root: Agent, header: SessionHeader, log: list[Event]
) -> str | None:
    """What the parent of an orphaned child is told, or ``None`` when it is not told: a
    continuable child that has messages to run settles (and notifies) later; a one-shot
    child the parent was never told of (a foreground run) is answered by the parent's
    own repaired call."""
    descriptor = await activations.descriptor(root, header)
    if descriptor is not None:
        if fold(log).waiting:
            return None
        tool = descriptor.data.get("tool")
        if isinstance(tool, str):  # a task: its end is a <task_result>, as when it settles
            return render_task_result(header.id, tool, *result_body("aborted", ""))
        return settlement_notice(header.id, "aborted", "")
    if header.parent_session is None:
        return None
    announced = f"started background subagent task {header.id}"  # logs before tasks
    for stored in await root.store.events(header.parent_session):
        event = stored.event
        if not isinstance(event, ToolResult):
            continue
        if event.content == receipt(header.id, event.name, continuable=False):
            status, body = result_body("aborted", "")
            body += " The process running it stopped."
            return render_task_result(header.id, event.name, status, body)
        if event.content == announced:
            return (
                f"Background subagent task {header.id} was stopped before it finished: "
                "the process running it stopped.\nIt left no closing message."
            )
    return None


async def _pending_below(activations: Activations, agent: Agent, session_id: str) -> bool:
    """Whether a continuable session below ``session_id`` has unclaimed messages."""
    stack, seen = [session_id], {session_id}
    while stack:
        for header in await agent.store.sessions(parent=stack.pop()):
            if header.id in seen:
                continue
            seen.add(header.id)
            stack.append(header.id)
            if activations.get(header.id) is not None:
                continue
            if await activations.descriptor(agent, header) is not None and await _has_unclaimed(
                agent, header.id
            ):
                return True
    return False


async def _has_unclaimed(agent: Agent, session_id: str) -> bool:
    """Whether the session holds accepted messages nobody claimed, or posted mail."""
    if await agent.store.mailbox(session_id):
        return True
    return fold([stored.event for stored in await agent.store.events(session_id)]).waiting


async def _holds_message(store: SessionStore, session_id: str, message_id: str) -> bool:
    """Whether ``message_id`` was posted to the session or accepted into its log."""
    if any(m.message_id == message_id for m in await store.mailbox(session_id)):
        return True
    return any(
        isinstance(stored.event, InboxAccepted) and stored.event.message_id == message_id
        for stored in await store.events(session_id)
    )
