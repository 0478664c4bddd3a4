"""``tether sessions send``: a person's message to a stored session, queued through its mailbox.

Every sender posts its message to the session's mailbox first (durable, in arrival order),
then waits for it: while a live process drives the session's tree, that process takes the
message into the log and runs it; when none does, the sender drives the tree itself (it hosts
the child under its root and runs everything queued, its own message and the others', in
order). Two senders that both find nobody driving race for the root's lease: one wins and
drives, the other sees it as the live driver and waits. So a concurrent send is never refused
for being second, and a sender killed while it waits leaves its message queued.
docs/continuable-children.md#continuing-a-child-yourself says what each sender prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import click

if TYPE_CHECKING:
    from ..agents import Agent
    from ..loading import Kernel
    from ..models import ModelDelta
    from ..store import Event, InboxAccepted, LeaseOwner, SessionHeader, SessionStore
    from ._group import Interruption

__all__ = ("SEND_POLL", "send")

#: How often a sender reads the store while it waits (its message taken, its turn's events),
#: in seconds.
SEND_POLL = 0.05
#: How many times in a row a sender may find the root taken although no live process shows
#: as its driver (each time a driver that was just leaving) before it stops trying.
DRIVE_ATTEMPTS = 20


class _Turn:
    """The turn that runs one message: its events are printed (``show``) from its
    ``turn/start`` to its ``turn/end``, nothing else, as the agent running it here emits them
    (:meth:`hear`) or as they are stored by whichever process runs it (:meth:`read`)."""

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
        from ..store import InboxAccepted, TurnEnded, TurnStarted

        if self.stop is not None:
            return
        if isinstance(event, InboxAccepted) and event.message_id == self.message_id:
            self.taken = True
        elif isinstance(event, TurnStarted) and event.message_id == self.message_id:
            self.taken = True
            self.turn = event.turn
        elif self.turn is not None:
            if self._skip:
                self._skip -= 1
            else:
                self._shown += 1
                self.show(event)
            if isinstance(event, TurnEnded) and event.turn == self.turn:
                self.stop = event.stop_reason

    def from_store(self) -> None:
        """Go on from the log after hearing the agent: what was shown is not shown again (the
        log is read again from where it was before, and holds those events in that order)."""
        self._skip, self._shown = self._shown, 0
        self.turn = None

    async def read(self, store: SessionStore) -> str | None:
        """Print what the log has of the turn since the last read; its stop reason once it
        has ended."""
        for stored in await store.events(self.session_id, after=self.after):
            self.after = stored.seq
            self.hear(stored.event)
        return self.stop


async def send(
    interruption: Interruption,
    kernel: Kernel,
    model_spec: str | None,
    session_id: str,
    message: str,
    wait: bool,
) -> str:
    """Deliver ``message`` to ``session_id`` as the person who owns it; the stop reason of the
    turn that ran it (``completed`` when it was handed to another process and not waited for)."""
    from ..runtime import profile_session_host
    from ..store import profile_store
    from ._run import debugging, run_on_host

    host = profile_session_host(kernel)
    if host is not None:
        # A session of the cluster: its host runs the message (a continuable child under its
        # root, on a worker: docs/scale-out.md). Checked here, before anything is sent.
        store = profile_store(kernel)
        try:
            header = await store.header(session_id)
            if header.parent_session is not None:
                await check_sendable(store, header)
        except BaseException:
            await host.aclose()
            raise
        finally:
            await store.aclose()
        return await run_on_host(
            host, kernel, None, session_id, [message], debugging(), interruption.stoppable()
        )
    store = profile_store(kernel)
    try:
        header = await store.header(session_id)
        if header.parent_session is not None:
            await check_sendable(store, header)
        elif await live_owner(store, session_id) is None:
            raise _root_nobody_drives(session_id)
        last = (await store.events(session_id))[-1:]
        posted = _message(message)
        turn = _Turn(session_id, posted.message_id, last[0].seq if last else 0, _printer())
        await store.post(session_id, posted)  # accepted: from here on nothing loses it
        stop: str | None = None
        with interruption.stoppable():
            stop = await _deliver(interruption, kernel, store, model_spec, header, turn, wait)
        if stop is None:  # Ctrl-C while it waited: the message stays queued
            stop = await turn.read(store) or "interrupted"
            if turn.stop is None:
                click.echo(
                    f"note: stopped waiting; the message stays queued for {session_id} and runs "
                    f"once, in order (`tether sessions show {session_id}` shows its turn)",
                    err=True,
                )
        click.echo(f"session {session_id}")
        return stop
    finally:
        await store.aclose()


async def _deliver(
    interruption: Interruption,
    kernel: Kernel,
    store: SessionStore,
    model_spec: str | None,
    header: SessionHeader,
    turn: _Turn,
    wait: bool,
) -> str | None:
    """Wait for the posted message: follow it while a live process drives the tree, drive the
    tree here when none does. Its turn's stop reason, ``completed`` once another process took
    it (unless ``wait``), ``None`` when cancelled first."""
    from ..errors import ErrorCode, StoreError

    session_id = header.id
    taken_over = 0  # drive attempts in a row that found the root taken
    while True:
        if await turn.read(store) is not None:
            return turn.stop
        owner = await live_owner(store, session_id)
        if owner is not None:
            taken_over = 0
            if turn.taken and not wait:
                _handed_to(session_id, owner)
                return "completed"
            await anyio.sleep(SEND_POLL)
            continue
        if header.parent_session is None:
            # A root session: its driver left before running the message, which waits in the
            # session (mailbox or log) for the next `tether run --session`.
            click.echo(
                f"message accepted for {session_id}: the process that drove it stopped first; "
                f"it runs when the session is continued (`tether run --session {session_id}`)"
            )
            return "completed"
        stop = await _drive(interruption, kernel, store, model_spec, header, turn)
        if stop is not None:
            return stop
        taken_over += 1
        if taken_over >= DRIVE_ATTEMPTS:
            root = await root_of(store, session_id)
            raise StoreError(
                ErrorCode.SESSION_BUSY,
                f'the session tree of "{session_id}" (root "{root}") was taken by another '
                f"store {taken_over} times in a row, and no live process shows as its driver",
                remedy=f'the message stays queued in "{session_id}"\'s mailbox and runs, in '
                f"order, when the tree is next driven (`tether run --session {root}`); check "
                "that no program other than tether writes the store's leases",
            )
        await anyio.sleep(SEND_POLL)


async def _drive(
    interruption: Interruption,
    kernel: Kernel,
    store: SessionStore,
    model_spec: str | None,
    header: SessionHeader,
    turn: _Turn,
) -> str | None:
    """Host the child under its root here and run everything it holds (this sender's message
    among them), printing this sender's turn; leave once the child has settled with nothing
    left to run. ``None`` when another process took the tree first (the caller waits for it)."""
    from ..errors import ErrorCode, TetherError
    from ..runtime import Runtime
    from ._run import close_model

    child_id = header.id
    root = await root_of(store, child_id)
    # The root only hosts the child here: a --model is for this command, not recorded.
    runtime = Runtime(kernel, store)
    try:
        host = await runtime.compose(model=model_spec, session_id=root, record_model=False)
    except TetherError as exc:
        if exc.code is ErrorCode.SESSION_BUSY:
            return None
        raise
    continuation = runtime.subagents.continuation
    continuation.keep_for_owner(child_id)  # its mail is run below, never by a restore elsewhere
    agents: list[Agent] = []

    def note() -> None:
        """Hear the child from the moment its agent exists (before its turn)."""
        child = continuation.live(child_id)
        if child is not None and child not in agents:
            agents.append(child)
            child.listen(turn.hear)
            child.listen_deltas(_retry_notes)  # a failing endpoint says so, on standard error

    def interrupt_child() -> None:
        """Ctrl-C: abort the child's running turn (leaving the host then ends the child; what
        it had not begun stays unclaimed for the next driver)."""
        child = continuation.live(child_id)
        if child is not None:
            child.interrupt()

    unsubscribe = runtime.subagents.on_event(
        lambda event: note() if event.kind == "start" and event.child_id == child_id else None
    )
    interruption.on_interrupt(interrupt_child)
    refused: TetherError | None = None
    try:
        try:
            async with host:
                # Caught in here: what leaves `async with agent:` leaves in an exception group.
                try:
                    await continuation.run_for_owner(host, child_id)
                except TetherError as exc:
                    refused = exc
        except TetherError as exc:  # entering the root: its lease was taken meanwhile
            if exc.code is ErrorCode.SESSION_BUSY:
                return None
            raise
    finally:
        unsubscribe()
        await close_model(host.model)
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


async def check_sendable(store: SessionStore, header: SessionHeader) -> None:
    """A person may send to the child ``header``: its root session is in the store and was
    started by a person (``UNAUTHORIZED``), and it is a continuable child (``NOT_RESUMABLE``
    for a one-shot child). Checked before anything is posted."""
    from ..errors import ErrorCode, SubagentError
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
    from ..errors import ErrorCode, SubagentError, TetherError

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
    from ..errors import TetherError

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
    from ..errors import ErrorCode, SubagentError

    return SubagentError(
        ErrorCode.NOT_RESUMABLE,
        f'session "{session_id}" is a root session, not a subagent, and no process drives it',
        remedy=f"continue it with `tether run --session {session_id}`",
    )


def _handed_to(session_id: str, owner: LeaseOwner) -> None:
    click.echo(
        f"message accepted for {session_id}: the process that drives it "
        f"(pid {owner.pid} on {owner.host}) runs it"
    )


def _message(content: str) -> InboxAccepted:
    from ..store import InboxAccepted, MessageSource
    from ..subagents._child import new_message_id

    return InboxAccepted(
        message_id=new_message_id(), content=content, source=MessageSource(kind="user")
    )


def _retry_notes(delta: ModelDelta) -> None:
    """Show a ``retry`` delta of the child's as ``tether run`` does, on standard error."""
    from ._run import retry_line

    if delta.kind == "retry" and (delta.attempt or delta.text):
        click.echo(retry_line(delta), err=True)


def _printer() -> Callable[[Event], None]:
    from ._run import debugging, printer

    show: Any = printer(None, debug=debugging())
    return show
