"""An in-memory store: the same contract, nothing survives the process. For tests and demos."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ErrorCode, StoreError
from ._events import Event, InboxAccepted, SessionHeader, StoredEvent
from ._lease import LeaseOwner
from ._rules import check_depth, check_mail, session_not_found

__all__ = ("MemoryStore",)


class MemoryStore:
    """Sessions in dictionaries; events are kept as the validated objects themselves.

    Nothing else can open its storage, so this store is its sessions' only possible owner:
    a lease is either free or its own, and ``acquire`` never takes one over.
    """

    durable = False

    def __init__(self) -> None:
        self.owner = LeaseOwner.current()
        self._headers: dict[str, SessionHeader] = {}
        self._logs: dict[str, list[Event]] = {}
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
        self._logs[header.id] = list(events)
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
        self._logs[session_id].extend(events)
        return header

    def _log(self, session_id: str) -> list[Event]:
        log = self._logs.get(session_id)
        if log is None:
            raise session_not_found(session_id)
        return log

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        log = self._log(session_id)
        self._leased.add(session_id)  # a free lease is taken by the first write
        log.extend(events)
        return len(log)

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        log = self._log(session_id)
        return [
            StoredEvent(seq, event)
            for seq, event in enumerate(
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
        self._log(session_id)
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
        log.extend(messages)
        return messages

    async def aclose(self) -> None:
        self._leased.clear()
