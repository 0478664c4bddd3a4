"""An in-memory store: the same contract, nothing survives the process. For tests and demos."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast, get_args

from pydantic import BaseModel

from ..contracts import SessionRemoval
from ..errors import ErrorCode, StoreError
from ._events import Event, InboxAccepted, SessionHeader, StoredEvent
from ._lease import LeaseOwner
from ._lifecycle import accepts, check_open
from ._rules import check_depth, check_mail, session_not_found

__all__ = ("MemoryStore",)

_KINDS = cast("tuple[type[BaseModel], ...]", get_args(get_args(Event)[0]))
#: How many fields each event class has whose first field is its ``type`` tag (every event
#: class of the log's union): such an event is kept as the tuple of its values.
_WIDTHS: dict[type[BaseModel], int] = {
    kind: len(kind.model_fields) for kind in _KINDS if next(iter(kind.model_fields)) == "type"
}
#: By ``type`` tag: the class and its field names, in order (what a packed event is read by).
_LAYOUTS: dict[str, tuple[type[BaseModel], tuple[str, ...]]] = {
    str(kind.model_fields["type"].default): (kind, tuple(kind.model_fields)) for kind in _WIDTHS
}

#: One entry of a log: an event packed as the tuple of its values, else the event itself.
_Entry = tuple[Any, ...] | Event


def _pack(log: list[_Entry], events: Iterable[Event]) -> list[_Entry]:
    """Append ``events`` to ``log`` as entries; returns ``log``. An event is kept as the tuple
    of its field values (its ``type`` tag first, which says how to read it), not as the model:
    a tuple of plain values is one object, which the garbage collector stops tracking, where
    the model is three (itself, its ``__dict__``, its set of given fields) and several times
    the bytes. A log keeps every event of every session for as long as the store lives, and
    most are never read again."""
    append = log.append
    for event in events:
        fields = event.__dict__
        # The values in the order of the fields (a frozen model's ``__dict__`` has no other
        # key, and keeps its order); anything else (a subclass, say) is kept as it is.
        if _WIDTHS.get(type(event)) == len(fields):
            append(tuple(fields.values()))
        else:
            append(event)
    return log


def _unpacked(entry: _Entry) -> Event:
    """The event ``entry`` holds: a packed one is made again, unvalidated (its values were)."""
    if type(entry) is not tuple:
        return cast("Event", entry)
    kind, names = _LAYOUTS[entry[0]]
    return cast("Event", kind.model_construct(**dict(zip(names, entry, strict=True))))


class MemoryStore:
    """Sessions in dictionaries; events are kept as their validated values (packed: see
    ``_pack``), and read back as equal events.

    Nothing else can open its storage, so this store is its sessions' only possible owner:
    a lease is either free or its own, and ``acquire`` never takes one over.
    """

    durable = False

    def __init__(self) -> None:
        self.owner = LeaseOwner.current()
        self._headers: dict[str, SessionHeader] = {}
        self._logs: dict[str, list[_Entry]] = {}
        self._leased: set[str] = set()
        self._mail: dict[str, list[InboxAccepted]] = {}  # only sessions with untaken mail

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        if header.id in self._headers:
            raise StoreError(
                ErrorCode.SESSION_EXISTS,
                f'session "{header.id}" already exists',
                remedy="use a new session id",
            )
        self._headers[header.id] = header
        self._logs[header.id] = _pack([], events)
        self._leased.add(header.id)
        return header

    async def header(self, session_id: str) -> SessionHeader:
        try:
            return self._headers[session_id]
        except KeyError:
            raise session_not_found(session_id) from None

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        header = await self.header(session_id)
        if check_depth(header, depth):
            header = header.model_copy(update={"delegation_depth": depth})
            self._headers[session_id] = header
        return header

    async def set_model(
        self, session_id: str, model: str, events: Sequence[Event] = ()
    ) -> SessionHeader:
        header = await self.header(session_id)
        header = header.model_copy(update={"model": model})
        self._headers[session_id] = header
        self._leased.add(session_id)
        _pack(self._logs[session_id], events)
        return header

    def _log(self, session_id: str) -> list[_Entry]:
        log = self._logs.get(session_id)
        if log is None:
            raise session_not_found(session_id)
        return log

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        log = self._log(session_id)
        if accepts(event.type for event in events):
            check_open(self._headers[session_id])
        self._leased.add(session_id)  # a free lease is taken by the first write
        _pack(log, events)
        return len(log)

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        log = self._log(session_id)
        return [
            StoredEvent(seq, _unpacked(entry))
            for seq, entry in enumerate(
                log[after : None if limit is None else after + limit], start=after + 1
            )
        ]

    async def sessions(
        self, *, parent: str | None = None, limit: int | None = None
    ) -> list[SessionHeader]:
        headers = [
            h for h in self._headers.values() if parent is None or h.parent_session == parent
        ]
        headers.sort(key=lambda h: h.created_at, reverse=True)
        return headers[:limit] if limit is not None else headers

    async def delete(self, session_id: str) -> None:
        await self.header(session_id)
        del self._headers[session_id], self._logs[session_id]
        self._leased.discard(session_id)
        self._mail.pop(session_id, None)

    def _tree(self, session_id: str, *, detached: bool) -> list[str]:
        """``session_id`` and the sessions below it (only through attached children unless
        ``detached``), the session first, each once."""
        ids = [session_id]
        seen = {session_id}
        index = 0
        while index < len(ids):
            parent = ids[index]
            for header in self._headers.values():
                if (
                    header.parent_session == parent
                    and header.id not in seen
                    and (detached or not header.detached)
                ):
                    seen.add(header.id)
                    ids.append(header.id)
            index += 1
        return ids

    def _close_open(self, ids: Iterable[str], at: float) -> tuple[str, ...]:
        closed: list[str] = []
        for sid in ids:
            header = self._headers[sid]
            if header.closed_at is None:
                self._headers[sid] = header.model_copy(update={"closed_at": at})
                self._mail.pop(sid, None)
                closed.append(sid)
        return tuple(closed)

    async def close_session(self, session_id: str, *, at: float) -> tuple[str, ...]:
        await self.header(session_id)
        return self._close_open(self._tree(session_id, detached=False), at)

    async def delete_session(
        self, session_id: str, *, at: float, tree: bool = False
    ) -> SessionRemoval:
        # One process owns every lease of this store: nothing to refuse as busy.
        await self.header(session_id)
        doomed = self._tree(session_id, detached=True) if tree else [session_id]
        gone = set(doomed)
        lifetime = [s for s in self._tree(session_id, detached=False) if s not in gone]
        closed = self._close_open(lifetime, at)
        for sid in doomed:
            await self.delete(sid)
        return SessionRemoval(deleted=tuple(doomed), closed=closed)

    async def acquire(self, session_id: str) -> bool:
        self._log(session_id)
        self._leased.add(session_id)
        return False

    async def release(self, session_id: str) -> None:
        self._leased.discard(session_id)

    async def renew(self) -> None:
        return None  # nobody else can see these leases, so they never expire

    async def holder(self, session_id: str) -> LeaseOwner | None:
        self._log(session_id)
        return self.owner if session_id in self._leased else None

    async def post(self, session_id: str, message: InboxAccepted) -> None:
        check_mail(message)
        check_open(await self.header(session_id))
        self._mail.setdefault(session_id, []).append(message)

    async def mail(self) -> list[str]:
        return list(self._mail)

    async def mailbox(self, session_id: str) -> list[InboxAccepted]:
        self._log(session_id)
        return list(self._mail.get(session_id, ()))

    async def take_mail(self, session_id: str) -> list[InboxAccepted]:
        log = self._log(session_id)
        self._leased.add(session_id)
        messages = self._mail.pop(session_id, [])
        _pack(log, messages)
        return messages

    async def aclose(self) -> None:
        self._leased.clear()
