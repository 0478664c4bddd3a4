"""Branches of a SQLite store's sessions (``tether sessions branch``, docs/sessions.md): a new
session whose first events are another's, copied in SQL as they are stored (the same bytes,
nothing parsed or written again), with the header, its lease and its own first events, in one
transaction; and the outline of a log a branch or a rewind finds its cut in, read in SQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..errors import ErrorCode, StoreError
from ._events import Event, SessionHeader, dump_event
from ._headers import HEADER_COLUMNS, header_row
from ._rules import session_not_found
from ._sqlite_leases import SQLiteLeases
from ._sqlite_locks import Transaction, retry

__all__ = ("OUTLINED", "Mark", "SQLiteCopies")

#: What the outline says of one event: its position (0-based), its type, and its ``turn``,
#: ``message_id`` and ``keep`` fields when it has them (``None`` otherwise).
Mark = tuple[int, str, int | None, str | None, int | None]
#: The events an outline holds: those that open, end, claim or rewind (turns and messages).
OUTLINED = (
    "turn/start",
    "turn/end",
    "inbox/accepted",
    "user/message",
    "inbox/discarded",
    "rewind",
)

_OUTLINE = (
    "SELECT seq - 1, type, json_extract(data, '$.turn'), json_extract(data, '$.message_id'), "
    "json_extract(data, '$.keep') FROM events WHERE session_id = ? AND type IN "
    f"({', '.join(repr(kind) for kind in OUTLINED)}) ORDER BY seq"
)
_LENGTH = "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?"
_COPY = (
    "INSERT INTO events (session_id, seq, type, data) "
    "SELECT ?, seq, type, data FROM events WHERE session_id = ? AND seq <= ?"
)


class SQLiteCopies:
    """The branch operations of one :class:`~tether.store.SQLiteStore` (its ``copies``)."""

    def __init__(
        self,
        db: sqlite3.Connection,
        leases: SQLiteLeases,
        next_seq: dict[str, int],
        path: Path,
        busy_timeout: float,
    ) -> None:
        self._db = db
        self._leases = leases
        self._next_seq = next_seq
        self._path = path
        self._busy_timeout = busy_timeout

    async def outline(self, session_id: str) -> tuple[list[Mark], int]:
        """A :data:`Mark` for each event of the session's log of the :data:`OUTLINED` types,
        in order, and how many events the log holds (``SESSION_NOT_FOUND``)."""

        def read() -> tuple[list[Mark], int]:
            rows: list[Mark] = self._db.execute(_OUTLINE, (session_id,)).fetchall()
            length: int = self._db.execute(_LENGTH, (session_id,)).fetchone()[0]
            if not length and not self._exists(session_id):
                raise session_not_found(session_id)
            return rows, length

        return await retry(read, path=self._path, budget=self._busy_timeout)

    async def copy(
        self, header: SessionHeader, source_id: str, keep: int, events: Sequence[Event] = ()
    ) -> SessionHeader:
        """Create the session ``header`` with the first ``keep`` events of ``source_id``'s log,
        as stored, then ``events``, its lease held by this store, all in one transaction
        (``SESSION_EXISTS``; ``SESSION_NOT_FOUND`` when the source has fewer events: it was
        deleted)."""
        datas = [(event.type, dump_event(event)) for event in events]

        def write() -> None:
            try:
                with Transaction(self._db):
                    marks = ", ".join("?" * len(HEADER_COLUMNS.split(",")))
                    self._db.execute(
                        f"INSERT INTO sessions ({HEADER_COLUMNS}) VALUES ({marks})",
                        header_row(header),
                    )
                    self._leases.insert(header.id)
                    copied = self._db.execute(_COPY, (header.id, source_id, keep)).rowcount
                    if copied != keep:  # logs only grow: the source was deleted meanwhile
                        raise session_not_found(source_id)
                    self._db.executemany(
                        "INSERT INTO events VALUES (?, ?, ?, ?)",
                        [
                            (header.id, keep + n, kind, data)
                            for n, (kind, data) in enumerate(datas, 1)
                        ],
                    )
            except sqlite3.IntegrityError:
                raise StoreError(
                    ErrorCode.SESSION_EXISTS,
                    f'session "{header.id}" already exists',
                    file=self._path,
                    remedy="use a new session id",
                ) from None

        await retry(write, path=self._path, budget=self._busy_timeout)
        self._next_seq[header.id] = keep + len(datas) + 1
        return header

    def _exists(self, session_id: str) -> bool:
        row = self._db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None
