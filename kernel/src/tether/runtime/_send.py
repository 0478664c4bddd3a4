"""A person's message to a stored session, queued through its mailbox (:meth:`Runtime.send`).

Every sender posts its message to the session's mailbox first (durable, in arrival order),
then waits for it: while a live process drives the session's tree, that process takes the
message into the log and runs it; when none does, the sender drives the tree itself (it holds
the root, :meth:`Runtime.hold`, which hosts the child and runs everything queued, its own
message and the others', in order). Two senders that both find nobody driving race for the
root's lease: one wins and drives, the other sees it as the live driver and waits. So a
concurrent send is never refused for being second, and a sender killed while it waits leaves
its message queued. ``tether sessions send`` is this, printed
(docs/continuable-children.md#continuing-a-child-yourself).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING

import anyio

from ..agents._callers import admit
from ..agents._compose import resolve_agent_name
from ..contracts import Admission
from ..errors import ErrorCode, StoreError, SubagentError, TetherError
from ..store._lifecycle import check_open

if TYPE_CHECKING:
    from anyio import CancelScope

    from ..agents import Agent
    from ..contracts import AdmissionKind, Caller
    from ..models import ModelDelta
    from ..store import Event, InboxAccepted, LeaseOwner, SessionHeader, SessionStore
    from ._runtime import Runtime

__all__ = (
    "DRIVE_ATTEMPTS",
    "SEND_POLL",
    "SentMessage",
    "check_sendable",
    "follow_message",
    "root_of",
)

#: How often a sender reads the store while it waits (its message taken, its turn's events),
#: in seconds.
SEND_POLL = 0.05
#: How many times in a row a sender may find the root taken although no live process shows
#: as its driver (each time a driver that was just leaving) before it stops trying.
DRIVE_ATTEMPTS = 20


#: :attr:`_Turn.turn` of a steer taken at a step of a turn another message started (whose
#: number the sender may not have read).
_RUNNING = -1


class _Turn:
    """The turn that runs one message: its events are handed to ``show`` from its
    ``turn/start`` to its ``turn/end``, nothing else, as the agent running it here emits them
    (:meth:`hear`) or as they are stored by whichever process runs it (:meth:`read`). For a
    steer taken by a running turn at a step, that turn from the steer's ``user/message``
    on."""

    def __init__(
        self, session_id: str, message_id: str, after: int, show: Callable[[Event], None]
    ) -> None:
        self.session_id = session_id
        self.message_id = message_id
        self.after = after
        """The last ``seq`` read from the log."""
        self.show = show
        self.taken = False
        """The message is in the log (out of the mailbox): a driver accepted it."""
        self.turn: int | None = None
        self.stop: str | None = None
        self._shown = 0  # events of the turn handed to show
        self._skip = 0  # events of the turn to pass over (shown live already)

    def hear(self, event: Event) -> None:
        """One event of the session, as its agent here emits it."""
        from ..store import InboxAccepted, TurnEnded, TurnStarted, UserMessage

        if self.stop is not None:
            return
        if isinstance(event, InboxAccepted) and event.message_id == self.message_id:
            self.taken = True
        elif isinstance(event, TurnStarted) and event.message_id == self.message_id:
            self.taken = True
            self.turn = event.turn
        else:
            if (
                self.turn is None
                and isinstance(event, UserMessage)
                and event.message_id == self.message_id
            ):
                self.taken = True  # a steer the running turn took at a step: its turn from here
                self.turn = _RUNNING
            if self.turn is None:
                return
            if self._skip:
                self._skip -= 1
            else:
                self._shown += 1
                self.show(event)
            if isinstance(event, TurnEnded) and self.turn in (event.turn, _RUNNING):
                self.turn, self.stop = event.turn, event.stop_reason

    def from_store(self) -> None:
        """Go on from the log after hearing the agent: what was shown is not shown again (the
        log is read again from where it was before, and holds those events in that order)."""
        self._skip, self._shown = self._shown, 0
        self.turn = None

    async def read(self, store: SessionStore) -> str | None:
        """Hand on what the log has of the turn since the last read; its stop reason once it
        has ended."""
        for stored in await store.events(self.session_id, after=self.after):
            self.after = stored.seq
            self.hear(stored.event)
        return self.stop


class SentMessage:
    """A person's message to the stored session ``session_id`` (:meth:`Runtime.send`); see the
    module docstring. :meth:`check` says whether a person may send to it, :meth:`deliver`
    posts the message and sees it through; the attributes say how it went."""

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        content: str,
        *,
        model: str | None = None,
        wait: bool = False,
        hear: Callable[[Event], None] | None = None,
        hear_delta: Callable[[ModelDelta], None] | None = None,
        caller: Caller | None = None,
        steer: bool = False,
    ) -> None:
        if runtime.store is None:
            raise StoreError(
                ErrorCode.STORE_UNAVAILABLE,
                f'no session store to send to "{session_id}" in',
                remedy="give the runtime the store the session is in",
            )
        self.runtime = runtime
        self.store: SessionStore = runtime.store
        self.session_id = session_id
        self.content = content
        self.caller = caller
        """Who sends it (docs/callers.md): kept with the message, which runs as this caller;
        the session's gates admit it before anything is posted (``CALLER_REFUSED``)."""
        self.steer = steer
        """Steer the session's running turn (``tether sessions steer``): the turn's next step
        takes the message (``source.kind`` ``steer``); with no turn running, or one past its
        last step, it is the session's next turn."""
        self.model = model
        """A model spec for the turns run here when this sender drives the tree (the root's
        model replaced for them, not recorded)."""
        self.wait = wait
        """Wait for the message's turn when another process runs it (default: return once
        that process has taken it)."""
        self._hear = hear
        self._hear_delta = hear_delta
        self.handed_to: LeaseOwner | None = None
        """The live process that took the message and runs it (not waited for)."""
        self.left_queued = False
        """The process that drove the root stopped before running the message: it waits in
        the session for the session's next run."""
        self.stopped_waiting = False
        """``deliver``'s ``stop`` came before the message's turn ended: it stays queued (or
        its turn goes on elsewhere) and runs once, in order."""
        self._header: SessionHeader | None = None
        self._driving: Callable[[], Agent | None] | None = None  # the child driven here

    async def check(self) -> SessionHeader:
        """Read the session; a child must be one a person may send to
        (:func:`check_sendable`), and the sender a caller its agent's gates admit
        (``CALLER_REFUSED``); a closed session takes nothing (``SESSION_CLOSED``, said before
        anything else). Nothing is posted."""
        header = await self.store.header(self.session_id)
        check_open(header)
        if header.parent_session is not None:
            await check_sendable(self.store, header)
        gates = self.runtime.preset(
            resolve_agent_name(self.runtime.kernel, header.agent)
        ).caller_gates
        if gates:
            kind: AdmissionKind = "steer" if self.steer else "followup"
            admit(gates, Admission(header.id, header.agent, self.caller, kind))
        self._header = header
        return header

    def interrupt(self) -> None:
        """Ctrl-C: abort the child's turn when this sender drives it (leaving the root then
        ends the child; what it had not begun stays unclaimed for the next driver)."""
        child = self._driving() if self._driving is not None else None
        if child is not None:
            child.interrupt()

    async def deliver(self, stop: CancelScope | None = None) -> str:
        """Post the message (checked first: :meth:`check`; a root session nobody drives is
        ``NOT_RESUMABLE``, as ``tether run --session`` continues it) and see it through: the
        stop reason of its turn, ``completed`` when another process took it
        (:attr:`handed_to`) or the root's driver left first (:attr:`left_queued`). ``stop``
        cuts the waiting (and the driving) short: then whatever the log has of the turn is
        read, and its stop reason is ``interrupted`` when it has not ended
        (:attr:`stopped_waiting`)."""
        header = self._header or await self.check()
        store = self.store
        if header.parent_session is None and await live_owner(store, header.id) is None:
            raise _root_nobody_drives(header.id)
        last = (await store.events(header.id))[-1:]
        posted = _message(self.content, self.caller, self.steer)
        turn = _Turn(header.id, posted.message_id, last[0].seq if last else 0, self._show)
        await store.post(header.id, posted)  # accepted: from here on nothing loses it
        reason: str | None = None
        with stop if stop is not None else nullcontext():
            reason = await self._deliver(header, turn)
        if reason is None:  # stopped while it waited: the message stays queued
            reason = await turn.read(store) or "interrupted"
            self.stopped_waiting = turn.stop is None
        return reason

    def _show(self, event: Event) -> None:
        if self._hear is not None:
            self._hear(event)

    async def _deliver(self, header: SessionHeader, turn: _Turn) -> str | None:
        """Wait for the posted message: follow it while a live process drives the tree, drive
        the tree here when none does. Its turn's stop reason, ``completed`` once another
        process took it (unless ``wait``), ``None`` when cancelled first."""
        store = self.store
        session_id = header.id
        taken_over = 0  # drive attempts in a row that found the root taken
        while True:
            if await turn.read(store) is not None:
                return turn.stop
            owner = await live_owner(store, session_id)
            if owner is not None:
                taken_over = 0
                if turn.taken and not self.wait:
                    self.handed_to = owner
                    return "completed"
                await anyio.sleep(SEND_POLL)
                continue
            if header.parent_session is None:
                # A root session: its driver left before running the message, which waits
                # in the session (mailbox or log) for the next `tether run --session`.
                self.left_queued = True
                return "completed"
            reason = await self._drive(header, turn)
            if reason is not None:
                return reason
            taken_over += 1
            if taken_over >= DRIVE_ATTEMPTS:
                root = await root_of(store, session_id)
                raise StoreError(
                    ErrorCode.SESSION_BUSY,
                    f'the session tree of "{session_id}" (root "{root}") was taken by another '
                    f"store {taken_over} times in a row, and no live process shows as its "
                    "driver",
                    remedy=f'the message stays queued in "{session_id}"\'s mailbox and runs, '
                    f"in order, when the tree is next driven (`tether run --session {root}`); "
                    "check that no program other than tether writes the store's leases",
                )
            await anyio.sleep(SEND_POLL)

    async def _drive(self, header: SessionHeader, turn: _Turn) -> str | None:
        """Hold the child's root here (:meth:`Runtime.hold`), which hosts the child, and run
        everything the child holds (this sender's message among them), handing on this
        sender's turn; leave once the child has settled with nothing left to run. ``None``
        when another process took the tree first (the caller waits for it)."""
        store = self.store
        child_id = header.id
        root_id = await root_of(store, child_id)
        # The root only hosts the child here: a --model is for this command, not recorded.
        # A runtime of its own for each attempt (its subagent service keeps the child's
        # state): of the caller's class, on the same kernel and store.
        runtime = type(self.runtime)(self.runtime.kernel, store)
        try:
            root = await runtime.compose(model=self.model, session_id=root_id, record_model=False)
        except TetherError as exc:
            if exc.code is ErrorCode.SESSION_BUSY:
                return None
            raise
        continuation = runtime.subagents.continuation
        continuation.keep_for_owner(child_id)  # its mail runs below, never by a restore elsewhere
        agents: list[Agent] = []

        def note() -> None:
            """Hear the child from the moment its agent exists (before its turn)."""
            child = continuation.live(child_id)
            if child is not None and child not in agents:
                agents.append(child)
                child.listen(turn.hear)
                if self._hear_delta is not None:
                    child.listen_deltas(self._hear_delta)

        self._driving = lambda: continuation.live(child_id)
        unsubscribe = runtime.subagents.on_event(
            lambda event: note() if event.kind == "start" and event.child_id == child_id else None
        )
        refused: TetherError | None = None
        try:
            try:
                async with runtime.hold(root):
                    # Caught in here: the child's lease may be another process's by now.
                    try:
                        await continuation.run_for_owner(root, child_id)
                    except TetherError as exc:
                        refused = exc
            except TetherError as exc:  # entering the root: its lease was taken meanwhile
                if exc.code is ErrorCode.SESSION_BUSY:
                    return None
                raise
        finally:
            unsubscribe()
            self._driving = None
            if turn.stop is None:
                turn.from_store()  # the turn did not end here: its log says the rest
        if refused is not None:
            if refused.code is ErrorCode.SESSION_BUSY:
                return None  # the child's lease: another process drives it now
            raise refused
        for child in agents:
            if child.fault is not None:
                raise child.fault
        return await turn.read(store)


async def follow_message(
    store: SessionStore,
    session_id: str,
    message_id: str,
    after: int,
    show: Callable[[Event], None],
) -> str:
    """Read the log of ``session_id`` from after ``after`` until the turn that takes the
    message ``message_id`` ends (a turn of its own, or, for a steer, the running turn from
    the step that takes it), handing that turn's events to ``show``; its stop reason
    (a message run elsewhere, by a session host's worker, say)."""
    turn = _Turn(session_id, message_id, after, show)
    while (stop := await turn.read(store)) is None:
        await anyio.sleep(SEND_POLL)
    return stop


async def check_sendable(store: SessionStore, header: SessionHeader) -> None:
    """A person may send to the child ``header``: its root session is in the store and was
    started by a person (``UNAUTHORIZED``), and it is a continuable child (``NOT_RESUMABLE``
    for a one-shot child). Checked before anything is posted."""
    from ..subagents.local import find_continuable_descriptor

    root = await store.header(await root_of(store, header.id))
    if root.origin != "user":
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'session "{header.id}" is not below a session the human owns here: its root '
            f'"{root.id}" was started by {root.origin}, not by a person',
            remedy="send to a subagent below a session you started",
        )
    if await find_continuable_descriptor(store, header) is None:
        raise SubagentError(
            ErrorCode.NOT_RESUMABLE,
            f'subagent "{header.id}" cannot be resumed: its log has no continuable '
            "descriptor (a one-shot child answers once)",
            remedy="delegate a new task, or send to its parent",
        )


async def root_of(store: SessionStore, child_id: str) -> str:
    """The root session above ``child_id``, by its durable parent chain."""
    header = await store.header(child_id)
    if header.parent_session is None:
        raise SubagentError(
            ErrorCode.NOT_RESUMABLE,
            f'session "{child_id}" is a root session, not a subagent',
            remedy=f"continue it with `tether run --session {child_id}`",
        )
    seen = {header.id}
    while header.parent_session is not None:
        parent = header.parent_session
        if parent in seen:
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'subagent "{child_id}" has no root session: its parent chain loops at "{parent}"',
                remedy="the store is damaged; only a session below a root a person started "
                "can be continued",
            )
        seen.add(parent)
        try:
            header = await store.header(parent)
        except TetherError as exc:
            if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                raise
            raise SubagentError(
                ErrorCode.UNAUTHORIZED,
                f'subagent "{child_id}" has no root session here: its ancestor "{parent}" '
                "is not in the store",
                remedy="check that the profile names the store the sessions were written to",
            ) from None
    return header.id


async def live_owner(store: SessionStore, session_id: str) -> LeaseOwner | None:
    """The live holder of the lease of ``session_id`` or of a session above it, other than
    ``store`` itself."""
    current: str | None = session_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        try:
            holder = await store.holder(current)
            if holder is not None and holder.token != store.owner.token:
                return holder
            current = (await store.header(current)).parent_session
        except TetherError:
            return None  # a missing ancestor: the usual path says what is wrong
    return None


def _root_nobody_drives(session_id: str) -> Exception:
    return SubagentError(
        ErrorCode.NOT_RESUMABLE,
        f'session "{session_id}" is a root session, not a subagent, and no process drives it',
        remedy=f"continue it with `tether run --session {session_id}`",
    )


def _message(content: str, caller: Caller | None, steer: bool) -> InboxAccepted:
    from ..store import InboxAccepted, MessageSource
    from ..subagents._child import new_message_id

    return InboxAccepted(
        message_id=new_message_id(),
        content=content,
        source=MessageSource(kind="steer" if steer else "user", caller=caller),
        delivery="step" if steer else "turn",
    )
