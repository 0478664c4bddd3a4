"""Branching a session at a turn and rewinding one to a turn (docs/sessions.md).

A **branch** is a new root session whose log starts with the original's events up to the end
of a turn, copied as they are stored: the history it folds to is the original's at that
point, so the first request it sends is byte for byte the one the original sent next, and a
provider's prompt cache still hits. The copy is the branch's seed (``seed_length``), as a
fork's is; a ``branch`` descriptor after it records where it came from. Created in one store
call (``SessionStore.create``): after a crash there is a whole branch or none.

A **rewind** appends one ``rewind`` event (:class:`~tether.store.RewindEvent`) to a session
nobody drives: the fold (:func:`tether.store.replay.fold`) then reads the log as if the turns
after the cut were not there. Nothing is deleted; one append, so a crash leaves the event or
not.

Workspace files are neither copied nor rewound (no workspace backend offers checkpoints): a
branch works in its original's workspace, and a rewound session finds its files as the undone
turns left them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import ErrorCode, StoreError, SubagentError
from ..store._sqlite_copies import OUTLINED, Mark, SQLiteCopies
from ..store.replay import rewound_by

if TYPE_CHECKING:
    from ..contracts import Event, SessionHeader, SessionStore
    from ..store import RewindEvent
    from ._runtime import Runtime

__all__ = (
    "BRANCH_DESCRIPTOR",
    "branch_origin",
    "branch_session",
    "completed_turns",
    "rewind_session",
)

#: The kind of the descriptor that opens a branch's own log: ``{"from", "at_turn", "keep"}``.
BRANCH_DESCRIPTOR = "branch"


def completed_turns(log: Sequence[Event]) -> dict[int, int]:
    """The turns the history of ``log`` holds, ended: turn number -> how many events of the
    log lead up to its ``turn/end`` (included). Turn ``0`` is the start: the events before the
    first message (its setup). Turns a ``rewind`` undid are not in it."""
    return _Outline(*_marks(log)).turns


def _marks(log: Sequence[Event]) -> tuple[list[Mark], int]:
    """The outline of a parsed log (what ``SQLiteCopies.outline`` reads in SQL)."""
    marks: list[Mark] = []
    for index, event in enumerate(log):
        if event.type in OUTLINED:
            data = event.model_dump(include={"turn", "message_id", "keep"})
            marks.append(
                (index, event.type, data.get("turn"), data.get("message_id"), data.get("keep"))
            )
    return marks, len(log)


class _Outline:
    """Where a log's turns end, which turn is open and what its prefixes leave unclaimed, from
    its marks: the fold's reading (:func:`tether.store.replay.fold`) of these few fields."""

    def __init__(self, marks: Sequence[Mark], length: int) -> None:
        self.marks = marks
        self.gone = rewound_by(
            (at, keep if kind == "rewind" else None) for at, kind, *_, keep in marks
        )
        ends: dict[int, int] = {}
        start: int | None = None
        self.open_turn: int | None = None
        for index, kind, turn, _, _ in marks:
            if index in self.gone:
                continue
            if start is None and kind in _MESSAGE_START:
                start = index
            if kind == "turn/start":
                self.open_turn = turn
            elif kind == "turn/end" and turn is not None:
                ends[turn], self.open_turn = index + 1, None
        self.turns = {0: length if start is None else start, **ends}

    def unclaimed(self, keep: int) -> list[str]:
        """The messages the first ``keep`` events accept and none of them claims (a claim
        counts wherever it is; a rewind drops what was waiting)."""
        accepted: dict[str, None] = {}
        claimed: set[str] = set()
        for index, kind, _, message_id, _ in self.marks:
            if index >= keep:
                break
            if kind == "inbox/accepted" and message_id is not None:
                accepted[message_id] = None
            elif kind in ("user/message", "inbox/discarded") and message_id is not None:
                claimed.add(message_id)
            elif kind == "rewind" and index not in self.gone:
                claimed.update(accepted)
        return [mid for mid in accepted if mid not in claimed]


#: The events that end a log's setup window (the first message).
_MESSAGE_START = ("inbox/accepted", "user/message", "turn/start")


async def _outline(store: SessionStore, session_id: str) -> _Outline:
    copies = getattr(store, "copies", None)
    if isinstance(copies, SQLiteCopies):
        return _Outline(*await copies.outline(session_id))
    return _Outline(*_marks([stored.event for stored in await store.events(session_id)]))


async def branch_session(
    runtime: Runtime,
    session_id: str,
    at_turn: int | None = None,
    *,
    store: SessionStore | None = None,
) -> SessionHeader:
    """A new session whose log is ``session_id``'s up to the end of turn ``at_turn`` (default:
    its last ended turn; a turn still open is not copied), and its header.

    Only a root session (one a person started) is branched (``UNAUTHORIZED``);
    ``TURN_NOT_FOUND`` when the history holds no ended turn ``at_turn``. The branch is a root
    session of the same agent, model and caller, not yet driven by anyone; the children the
    original started stay the original's (their notices go to it), and the branch's log
    says where it came from (a ``branch`` descriptor: ``from``, ``at_turn``, ``keep``).
    Messages the copied events accepted and no copied turn ran are discarded in the branch
    (``inbox/discarded`` after the copy): they were sent to the original."""
    from ..agents._agent import new_header
    from ..store import DescriptorEvent, InboxDiscarded

    store = _store(runtime, store)
    header = await store.header(session_id)
    _check_root(header, "branched")
    outline = await _outline(store, session_id)
    turns = outline.turns
    if at_turn is None:
        at_turn = max(turns)
    keep = _cut(session_id, turns, at_turn)
    branch = new_header(
        agent=header.agent,
        label=header.label,
        seed_length=keep,
        model=header.model,
        caller=header.caller,
    )
    lineage = DescriptorEvent(
        kind=BRANCH_DESCRIPTOR, data={"from": session_id, "at_turn": at_turn, "keep": keep}
    )
    events: list[Event] = [lineage]
    workspace = await _shared_workspace(store, session_id)
    if workspace is not None:
        events.append(workspace)
    # Messages the prefix accepted for later turns are the original's to run, not the
    # branch's: dropped here, after the copy, so the copied bytes stay as they were.
    events.extend(InboxDiscarded(message_id=mid) for mid in outline.unclaimed(keep))
    # The header, the copied prefix and the lineage: one transaction, never half a branch.
    copies = getattr(store, "copies", None)
    if isinstance(copies, SQLiteCopies):
        created = await copies.copy(branch, session_id, keep, events)  # the bytes, in SQL
    else:
        prefix = [stored.event for stored in await store.events(session_id, limit=keep)]
        created = await store.create(branch, [*prefix, *events])
    await store.release(created.id)  # nobody drives it yet: whoever opens it next takes it
    return created


async def rewind_session(
    runtime: Runtime,
    session_id: str,
    to_turn: int,
    *,
    store: SessionStore | None = None,
) -> RewindEvent | None:
    """Undo the turns of ``session_id`` after ``to_turn`` (``0``: all of them): append a
    ``rewind`` event, so its next request starts from the history that followed turn
    ``to_turn``. Returns the event, or ``None`` when no turn follows ``to_turn`` (nothing
    written).

    The session must be a root session (``UNAUTHORIZED``), open (``SESSION_CLOSED``), driven
    by nobody, in this process or another (``SESSION_BUSY``), with no turn open
    (``SESSION_BUSY``: a turn a crash left open is repaired when the session is next driven);
    ``TURN_NOT_FOUND`` when its history holds no ended turn ``to_turn``. Messages the log
    accepted and no turn ran are dropped with the undone turns; children started in them
    stay as they are (the history no longer mentions them)."""
    from ..store import RewindEvent

    store = _store(runtime, store)
    header = await store.header(session_id)
    _check_root(header, "rewound")
    if header.closed_at is not None:
        raise StoreError(
            ErrorCode.SESSION_CLOSED,
            f'session "{session_id}" is closed: a closed session is not rewound',
            remedy=f"branch it instead: tether sessions branch {session_id} --at TURN",
        )
    if session_id in runtime.live_agents:
        raise StoreError(
            ErrorCode.SESSION_BUSY,
            f'session "{session_id}" is open in this process',
            remedy="leave the agent (its `async with`) first, then rewind, then open it again",
        )
    ours = await store.holder(session_id) == store.owner
    await store.acquire(session_id)  # SESSION_BUSY while another live process drives it
    try:
        outline = await _outline(store, session_id)
        if outline.open_turn is not None:
            raise StoreError(
                ErrorCode.SESSION_BUSY,
                f'session "{session_id}" has turn {outline.open_turn} open: its driver '
                "stopped in the middle of it",
                remedy=f'drive it once (tether run --session {session_id} "...") so the cut '
                "turn is closed, then rewind",
            )
        turns = outline.turns
        keep = _cut(session_id, turns, to_turn)
        if to_turn == max(turns):
            return None  # no turn follows it
        event = RewindEvent(to_turn=to_turn, keep=keep)
        await store.append(session_id, [event])  # one append: rewound, or not at all
        return event
    finally:
        if not ours:
            await store.release(session_id)


def _store(runtime: Runtime, store: SessionStore | None) -> SessionStore:
    chosen = store if store is not None else runtime.store
    if chosen is None:
        raise StoreError(
            ErrorCode.SESSION_NOT_FOUND,
            "this runtime has no session store: there are no sessions to branch or rewind",
            remedy="open the runtime with a store (Runtime(kernel, store))",
        )
    return chosen


def _check_root(header: SessionHeader, done: str) -> None:
    if header.origin != "user" or header.parent_session is not None:
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'session "{header.id}" is a subagent of "{header.parent_session}": only a session '
            f"a person started is {done}",
            remedy="branch or rewind the root session it belongs to",
        )


def _cut(session_id: str, turns: dict[int, int], turn: int) -> int:
    keep = turns.get(turn)
    if keep is None:
        ended = sorted(turns)
        raise StoreError(
            ErrorCode.TURN_NOT_FOUND,
            f'session "{session_id}" has no ended turn {turn} in its history (its turns: '
            f"{_ranges(ended)})",
            remedy="pick one of its turns (tether sessions show lists them; 0 is the start)",
        )
    return keep


def _ranges(numbers: list[int]) -> str:
    parts: list[str] = []
    for number in numbers:
        if parts and parts[-1].split("-")[-1] == str(number - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{number}"
        else:
            parts.append(str(number))
    return ", ".join(parts)


async def _shared_workspace(store: SessionStore, session_id: str) -> Event | None:
    """The ``workspace`` record that has a branch work in its original's workspace (shared
    from it, so deleting the branch leaves the folder), or ``None`` when the original has
    none (a session written before workspaces were recorded)."""
    from ..workspaces._place import WorkspacePlan
    from ..workspaces._removal import recorded_plan

    plan = await recorded_plan(store, session_id)
    if plan is None:
        return None
    if plan.kind == "session" and plan.shared_from is None:
        plan = WorkspacePlan(plan.kind, plan.backend, plan.owner, session_id, plan.root)
    return plan.descriptor()


async def branch_origin(store: SessionStore, header: SessionHeader) -> tuple[str, int] | None:
    """Where the session ``header`` was branched from: ``(original session id, turn)``, read
    from the ``branch`` descriptor right after its copied prefix (one event read); ``None``
    for a session that is not a branch."""
    from ..store import DescriptorEvent

    if header.parent_session is not None or not header.seed_length:
        return None
    first = await store.events(header.id, after=header.seed_length, limit=1)
    event = first[0].event if first else None
    if not isinstance(event, DescriptorEvent) or event.kind != BRANCH_DESCRIPTOR:
        return None  # a fork's seed, or a log written otherwise
    origin, turn = event.data.get("from"), event.data.get("at_turn")
    if not isinstance(origin, str) or not isinstance(turn, int):
        return None
    return origin, turn
