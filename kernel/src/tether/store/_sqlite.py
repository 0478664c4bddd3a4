"""The durable default: one SQLite file in WAL mode, a versioned schema with migrations.

Calls run synchronously on the event loop's thread: an append is one short transaction (tens of
microseconds in WAL mode), cheaper than a hop to a worker thread, and one connection serialises
every session of the process without locks. ``synchronous=NORMAL`` (the default) makes a
committed append survive a crash of the process; pass ``synchronous="FULL"`` to also survive a
power loss, at the cost of an fsync per append. One process writes a file at a time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ..errors import ErrorCode, StoreError
from ._events import Event, SessionHeader, StoredEvent, parse_event
from ._rules import check_depth, missing

__all__ = ("SCHEMA_VERSION", "SQLiteStore")

#: Each entry migrates the schema from version ``index`` to ``index + 1``.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        label TEXT,
        agent TEXT,
        parent_session TEXT,
        origin TEXT NOT NULL,
        delegation_depth INTEGER NOT NULL,
        seed_length INTEGER NOT NULL
    );
    CREATE INDEX sessions_by_parent ON sessions (parent_session);
    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

_HEADER_COLUMNS = (
    "id, created_at, label, agent, parent_session, origin, delegation_depth, seed_length"
)


class SQLiteStore:
    """Sessions in one SQLite file (``sqlite:PATH`` in a profile)."""

    durable = True

    def __init__(
        self, path: Path | str, *, synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._check_version()  # before anything changes a file this tether may not understand
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._migrate()
        self._next_seq: dict[str, int] = {}

    def _check_version(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            self._db.close()
            raise StoreError(
                ErrorCode.STORE_SCHEMA_UNSUPPORTED,
                f"session store schema version {version} is newer than this tether "
                f"understands ({SCHEMA_VERSION})",
                file=self.path,
                remedy="upgrade tether, or point the profile's store at another file",
            )

    def _migrate(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        for target in range(version, SCHEMA_VERSION):
            # One transaction per step: a crash mid-migration leaves the previous version.
            with self._transaction():
                for statement in MIGRATIONS[target].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={target + 1}")

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        rows = [
            (header.id, seq, event.type, event.model_dump_json())
            for seq, event in enumerate(events, start=1)
        ]
        try:
            with self._transaction():  # the header and its first events, or nothing
                self._db.execute(
                    f"INSERT INTO sessions ({_HEADER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        header.id,
                        header.created_at,
                        header.label,
                        header.agent,
                        header.parent_session,
                        header.origin,
                        header.delegation_depth,
                        header.seed_length,
                    ),
                )
                if rows:
                    self._db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError:
            raise StoreError(
                ErrorCode.SESSION_EXISTS,
                f'session "{header.id}" already exists',
                file=self.path,
                remedy="use a new session id",
            ) from None
        self._next_seq[header.id] = len(rows) + 1
        return header

    async def header(self, session_id: str) -> SessionHeader:
        row = self._db.execute(
            f"SELECT {_HEADER_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise missing(session_id)
        return _header(row)

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        header = await self.header(session_id)
        if check_depth(header, depth):
            # The WHERE clause keeps the rule even against a concurrent writer.
            self._db.execute(
                "UPDATE sessions SET delegation_depth = ? WHERE id = ? AND delegation_depth < ?",
                (depth, session_id, depth),
            )
            header = header.model_copy(update={"delegation_depth": depth})
        return header

    def _seq(self, session_id: str) -> int:
        seq = self._next_seq.get(session_id)
        if seq is None:
            exists = self._db.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if exists is None:
                raise missing(session_id)
            (last,) = self._db.execute(
                "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            seq = self._next_seq[session_id] = last + 1
        return seq

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        first = self._seq(session_id)
        rows = [
            (session_id, first + offset, event.type, event.model_dump_json())
            for offset, event in enumerate(events)
        ]
        if not rows:
            return first - 1
        try:
            if len(rows) == 1:
                self._db.execute("INSERT INTO events VALUES (?, ?, ?, ?)", rows[0])
            else:
                with self._transaction():
                    self._db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError:
            self._next_seq.pop(session_id, None)
            raise StoreError(
                ErrorCode.SESSION_CONFLICT,
                f'session "{session_id}" already has an event {first}: another writer appended '
                "to it",
                file=self.path,
                remedy="let one process at a time run a session; nothing was written",
            ) from None
        last = first + len(rows) - 1
        self._next_seq[session_id] = last + 1
        return last

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        await self.header(session_id)
        stored: list[StoredEvent] = []
        rows = self._db.execute(
            "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after, -1 if limit is None else limit),
        )
        expected = after + 1
        for seq, data in rows:
            if seq != expected:
                raise _corrupt(self.path, session_id, expected, f"event {expected} is missing")
            try:
                event = parse_event(data)
            except ValidationError as exc:
                detail = exc.errors()[0]
                reason = f"{detail['msg']} at {'.'.join(str(p) for p in detail['loc']) or 'top'}"
                raise _corrupt(self.path, session_id, seq, reason) from exc
            stored.append(StoredEvent(seq, event))
            expected += 1
        return stored

    async def sessions(
        self, *, parent: str | None = None, limit: int | None = None
    ) -> list[SessionHeader]:
        query = f"SELECT {_HEADER_COLUMNS} FROM sessions"
        params: list[object] = []
        if parent is not None:
            query += " WHERE parent_session = ?"
            params.append(parent)
        query += " ORDER BY created_at DESC, id"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        return [_header(row) for row in self._db.execute(query, params)]

    async def delete(self, session_id: str) -> None:
        await self.header(session_id)
        with self._transaction():
            self._db.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        self._next_seq.pop(session_id, None)

    async def aclose(self) -> None:
        self._db.close()


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        self._db.execute("ROLLBACK" if kind is not None else "COMMIT")


def _header(row: tuple[object, ...]) -> SessionHeader:
    keys = [key.strip() for key in _HEADER_COLUMNS.split(",")]
    return SessionHeader.model_validate(dict(zip(keys, row, strict=True)))


def _corrupt(path: Path, session_id: str, seq: int, reason: str) -> StoreError:
    return StoreError(
        ErrorCode.SESSION_CORRUPT,
        f'event {seq} of session "{session_id}" cannot be read: {reason}',
        file=path,
        remedy="the log was written by another program or a newer tether; restore it from a "
        "backup or start a new session (nothing was skipped)",
    )
