"""An in-memory store: the same contract, nothing survives the process. For tests and demos."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ErrorCode, StoreError
from ._events import Event, SessionHeader, StoredEvent
from ._rules import check_depth, missing

__all__ = ("MemoryStore",)


class MemoryStore:
    """Sessions in dictionaries; events are kept as the validated objects themselves."""

    durable = False

    def __init__(self) -> None:
        self._headers: dict[str, SessionHeader] = {}
        self._logs: dict[str, list[Event]] = {}

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        if header.id in self._headers:
            raise StoreError(
                ErrorCode.SESSION_EXISTS,
                f'session "{header.id}" already exists',
                remedy="use a new session id",
            )
        self._headers[header.id] = header
        self._logs[header.id] = list(events)
        return header

    async def header(self, session_id: str) -> SessionHeader:
        try:
            return self._headers[session_id]
        except KeyError:
            raise missing(session_id) from None

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        header = await self.header(session_id)
        if check_depth(header, depth):
            header = header.model_copy(update={"delegation_depth": depth})
            self._headers[session_id] = header
        return header

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        log = self._logs.get(session_id)
        if log is None:
            raise missing(session_id)
        log.extend(events)
        return len(log)

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        log = self._logs.get(session_id)
        if log is None:
            raise missing(session_id)
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

    async def aclose(self) -> None:
        return None
