"""The durable default: one SQLite file in WAL mode, a versioned schema with migrations.

Calls run synchronously on the event loop's thread: an append is one short transaction (tens of
microseconds in WAL mode), cheaper than a hop to a worker thread, and one connection serialises
every session of the process without locks. ``synchronous=NORMAL`` (the default) makes a
committed append survive a crash of the process; pass ``synchronous="FULL"`` to also survive a
power loss, at the cost of an fsync per append.

Several processes share one file safely: a session is written only by the holder of its lease
(``leases`` table; every write checks the lease in the same statement or transaction), and other
processes reach a session's driver through its mailbox (``mailbox`` table).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

import anyio
from pydantic import ValidationError

from ..errors import ErrorCode, StoreError
from ._events import (
    Event,
    InboxAccepted,
    SessionHeader,
    StoredEvent,
    dump_event,
    parse_event,
    replace_surrogates,
)
from ._lease import DEFAULT_LEASE_TTL, LeaseOwner, busy
from ._rules import check_depth, check_mail, missing
from ._sqlite_locks import DEFAULT_BUSY_TIMEOUT, Transaction, locked, retry
from ._sqlite_schema import SCHEMA_VERSION, open_database

__all__ = ("DEFAULT_BUSY_TIMEOUT", "SCHEMA_VERSION", "SQLiteStore")

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds ``aclose`` waits for a locked file to drop this store's leases before giving up
#: (the leases then stay until this process exits, when other processes see them as dead).
CLOSE_TIMEOUT = 5.0

_HEADER_COLUMNS = (
    "id, created_at, label, agent, parent_session, origin, delegation_depth, seed_length"
)
_LEASE_COLUMNS = "host, pid, started, token, expires_at"
# One statement: the lease check and the insert cannot be split by another writer (fencing).
_FENCED_INSERT = (
    "INSERT INTO events SELECT ?, ?, ?, ? "
    "WHERE EXISTS (SELECT 1 FROM leases WHERE session_id = ? AND token = ?)"
)


class SQLiteStore:
    """Sessions in one SQLite file (``sqlite:PATH`` in a profile).

    ``busy_timeout``: seconds to wait for a file another program keeps locked before
    ``STORE_BUSY``. ``lease_ttl``: seconds a lease lasts past its last ``renew()``, for stores on
    other hosts (on this host a lease lasts as long as its process).
    """

    durable = True

    def __init__(
        self,
        path: Path | str,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.lease_ttl = lease_ttl
        self.owner = LeaseOwner.current()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_database(self.path, synchronous=synchronous, busy_timeout=busy_timeout)
        # The next seq of the sessions this store wrote to; true while it holds their lease.
        self._next_seq: dict[str, int] = {}
        self._closed = False
        # Whether this store ever took a lease: if not, renew and aclose need no write lock.
        self._leasing = False

    async def _run(self, work: Callable[[], T]) -> T:
        return await retry(work, path=self.path, budget=self.busy_timeout)

    def _transaction(self) -> Transaction:
        return Transaction(self._db)

    # -- sessions and their logs ------------------------------------------------------------

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        datas = [(event.type, dump_event(event)) for event in events]
        await self._run(lambda: self._create(header, datas))
        self._next_seq[header.id] = len(datas) + 1
        return header

    def _create(self, header: SessionHeader, datas: list[tuple[str, str]]) -> None:
        try:
            with self._transaction():  # the header, its lease and its first events, or nothing
                self._db.execute(
                    f"INSERT INTO sessions ({_HEADER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    _header_row(header),
                )
                self._insert_lease(header.id)
                self._db.executemany(
                    "INSERT INTO events VALUES (?, ?, ?, ?)",
                    [(header.id, seq, kind, data) for seq, (kind, data) in enumerate(datas, 1)],
                )
        except sqlite3.IntegrityError:
            raise StoreError(
                ErrorCode.SESSION_EXISTS,
                f'session "{header.id}" already exists',
                file=self.path,
                remedy="use a new session id",
            ) from None

    async def header(self, session_id: str) -> SessionHeader:
        row = await self._run(
            lambda: self._db.execute(
                f"SELECT {_HEADER_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        )
        if row is None:
            raise missing(session_id)
        return _header(row)

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        header = await self.header(session_id)
        if check_depth(header, depth):
            # The WHERE clause keeps the rule even against a concurrent writer.
            await self._run(
                lambda: self._db.execute(
                    "UPDATE sessions SET delegation_depth = ? "
                    "WHERE id = ? AND delegation_depth < ?",
                    (depth, session_id, depth),
                )
            )
            header = header.model_copy(update={"delegation_depth": depth})
        return header

    def _exists(self, session_id: str) -> bool:
        row = self._db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    def _seq(self, session_id: str) -> int:
        seq = self._next_seq.get(session_id)
        if seq is None:
            if not self._exists(session_id):
                raise missing(session_id)
            (last,) = self._db.execute(
                "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            seq = self._next_seq[session_id] = last + 1
        return seq

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        datas = [(event.type, dump_event(event)) for event in events]
        try:  # the first attempt inline: the hot path pays for no retry machinery
            return self._append(session_id, datas)
        except sqlite3.OperationalError as exc:
            if not locked(exc):
                raise
        return await retry(
            lambda: self._append(session_id, datas),
            path=self.path,
            budget=self.busy_timeout,
            tried=True,
        )

    def _append(self, session_id: str, datas: list[tuple[str, str]]) -> int:
        first = self._seq(session_id)
        try:
            if len(datas) == 1:  # the common case: one statement, the lease checked inside it
                kind, data = datas[0]
                params = (session_id, first, kind, data, session_id, self.owner.token)
                if self._db.execute(_FENCED_INSERT, params).rowcount == 1:
                    self._next_seq[session_id] = first + 1
                    return first
            elif not datas:
                return first - 1
            with self._transaction():
                if not self._holds(session_id):
                    self._claim(session_id)  # takes a free lease, refuses another owner's
                    first = self._seq(session_id)
                self._db.executemany(
                    "INSERT INTO events VALUES (?, ?, ?, ?)",
                    [(session_id, first + n, kind, data) for n, (kind, data) in enumerate(datas)],
                )
        except sqlite3.IntegrityError:
            raise self._conflict(session_id, first) from None
        last = first + len(datas) - 1
        self._next_seq[session_id] = last + 1
        return last

    def _conflict(self, session_id: str, seq: int) -> StoreError:
        # Only a writer that ignores leases (another program, an old tether) gets here.
        self._next_seq.pop(session_id, None)  # read where the log is before the next append
        return StoreError(
            ErrorCode.SESSION_CONFLICT,
            f'session "{session_id}" already has an event {seq}: another writer appended to it',
            file=self.path,
            remedy="let one process at a time run a session; nothing was written",
        )

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        rows = await self._run(lambda: self._event_rows(session_id, after, limit))
        stored: list[StoredEvent] = []
        expected = after + 1
        for seq, data in rows:
            if seq != expected:
                raise _corrupt(self.path, session_id, expected, f"event {expected} is missing")
            try:
                event = parse_event(data)
            except ValidationError as exc:
                raise _corrupt(self.path, session_id, seq, _reason(exc)) from exc
            stored.append(StoredEvent(seq, event))
            expected += 1
        return stored

    def _event_rows(self, session_id: str, after: int, limit: int | None) -> list[tuple[int, str]]:
        if not self._exists(session_id):
            raise missing(session_id)
        return self._db.execute(
            "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after, -1 if limit is None else limit),
        ).fetchall()

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
        rows = await self._run(lambda: self._db.execute(query, params).fetchall())
        return [_header(row) for row in rows]

    async def delete(self, session_id: str) -> None:
        await self._run(lambda: self._delete(session_id))
        self._next_seq.pop(session_id, None)

    def _delete(self, session_id: str) -> None:
        with self._transaction():
            if not self._exists(session_id):
                raise missing(session_id)
            lease = self._lease(session_id)
            if lease is not None and lease[0].token != self.owner.token:
                holder, expires_at = lease
                if holder.alive(expires_at):  # a dead owner's session may be rolled back
                    raise busy(session_id, holder, alive=True, file=self.path)
            for table, column in _SESSION_ROWS:
                self._db.execute(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))

    # -- leases -----------------------------------------------------------------------------

    def _lease(self, session_id: str) -> tuple[LeaseOwner, float] | None:
        row = self._db.execute(
            f"SELECT {_LEASE_COLUMNS} FROM leases WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        host, pid, started, token, expires_at = row
        return LeaseOwner(host=host, pid=pid, started=started, token=token), expires_at

    def _holds(self, session_id: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM leases WHERE session_id = ? AND token = ?",
            (session_id, self.owner.token),
        ).fetchone()
        return row is not None

    def _insert_lease(self, session_id: str) -> None:
        self._leasing = True
        owner = self.owner
        self._db.execute(
            f"INSERT INTO leases (session_id, {_LEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, owner.host, owner.pid, owner.started, owner.token, self._expiry()),
        )

    def _expiry(self) -> float:
        return time.time() + self.lease_ttl

    def _claim(self, session_id: str) -> None:
        """Inside a transaction: make sure this store holds the lease before it writes. A free
        lease is taken; another owner's (even a dead one's) is ``SESSION_BUSY``."""
        lease = self._lease(session_id)
        if lease is None:
            if not self._exists(session_id):
                raise missing(session_id)
            self._insert_lease(session_id)
            self._next_seq.pop(session_id, None)  # others may have written while it was free
            return
        holder, expires_at = lease
        if holder.token != self.owner.token:
            raise busy(session_id, holder, alive=holder.alive(expires_at), file=self.path)

    async def acquire(self, session_id: str) -> bool:
        return await self._run(lambda: self._acquire(session_id))

    def _acquire(self, session_id: str) -> bool:
        if self._holds(session_id):
            return False  # already ours: nothing to write
        with self._transaction():
            lease = self._lease(session_id)
            if lease is None or lease[0].token == self.owner.token:
                self._claim(session_id)  # a free lease is taken with a fresh expiry
                return False
            holder, expires_at = lease
            if holder.alive(expires_at):
                raise busy(session_id, holder, alive=True, file=self.path)
            # Conditional on the dead owner's token: of several takers, exactly one wins.
            me = self.owner
            self._leasing = True
            taken = self._db.execute(
                "UPDATE leases SET host = ?, pid = ?, started = ?, token = ?, expires_at = ? "
                "WHERE session_id = ? AND token = ?",
                (me.host, me.pid, me.started, me.token, self._expiry(), session_id, holder.token),
            ).rowcount
        if taken != 1:  # not reachable under the write lock; kept for stores without one
            raise busy(session_id, holder, alive=True, file=self.path)
        self._next_seq.pop(session_id, None)  # the dead owner may have written last
        return True

    async def release(self, session_id: str) -> None:
        await self._run(
            lambda: self._db.execute(
                "DELETE FROM leases WHERE session_id = ? AND token = ?",
                (session_id, self.owner.token),
            )
        )
        self._next_seq.pop(session_id, None)  # once released, others may write

    async def renew(self) -> None:
        if not self._leasing:
            return
        await self._run(
            lambda: self._db.execute(
                "UPDATE leases SET expires_at = ? WHERE token = ?",
                (self._expiry(), self.owner.token),
            )
        )

    async def holder(self, session_id: str) -> LeaseOwner | None:
        lease = await self._run(lambda: self._lease_or_missing(session_id))
        if lease is None:
            return None
        owner, expires_at = lease
        return owner if owner.token == self.owner.token or owner.alive(expires_at) else None

    def _lease_or_missing(self, session_id: str) -> tuple[LeaseOwner, float] | None:
        lease = self._lease(session_id)
        if lease is None and not self._exists(session_id):
            raise missing(session_id)
        return lease

    # -- the mailbox ------------------------------------------------------------------------

    async def post(self, session_id: str, message: InboxAccepted) -> None:
        check_mail(message)
        row = (session_id, message.message_id, dump_event(message), session_id)
        posted = await self._run(
            lambda: (
                self._db.execute(
                    "INSERT INTO mailbox (session_id, message_id, data) SELECT ?, ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)",
                    row,
                ).rowcount
            )
        )
        if posted != 1:
            raise missing(session_id)

    async def mail(self) -> list[str]:
        rows = await self._run(
            lambda: self._db.execute(
                "SELECT session_id FROM mailbox GROUP BY session_id ORDER BY min(id)"
            ).fetchall()
        )
        return [session_id for (session_id,) in rows]

    async def mailbox(self, session_id: str) -> list[InboxAccepted]:
        rows = await self._run(lambda: self._mail_rows(session_id))
        return [self._parse_mail(session_id, data) for _, data in rows]

    def _mail_rows(self, session_id: str) -> list[tuple[int, str]]:
        rows = self._db.execute(
            "SELECT id, data FROM mailbox WHERE session_id = ? ORDER BY id", (session_id,)
        ).fetchall()
        if not rows and not self._exists(session_id):
            raise missing(session_id)
        return rows

    def _has_mail(self, session_id: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM mailbox WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        return row is not None

    def _parse_mail(self, session_id: str, data: str) -> InboxAccepted:
        try:
            return InboxAccepted.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(
                ErrorCode.SESSION_CORRUPT,
                f'a message posted to session "{session_id}" cannot be read: {_reason(exc)}',
                file=self.path,
                remedy="the mailbox was written by another program or a newer tether; delete "
                "the row from the mailbox table or restore the file from a backup (nothing "
                "was taken)",
            ) from exc

    async def take_mail(self, session_id: str) -> list[InboxAccepted]:
        return await self._run(lambda: self._take_mail(session_id))

    def _take_mail(self, session_id: str) -> list[InboxAccepted]:
        if self._holds(session_id) and not self._has_mail(session_id):
            return []  # the usual answer, without taking the write lock
        first = 0
        try:
            with self._transaction():  # into the log and out of the mailbox, or neither
                self._claim(session_id)
                rows = self._mail_rows(session_id)
                messages = [self._parse_mail(session_id, data) for _, data in rows]
                if not rows:
                    return []
                first = self._seq(session_id)
                self._db.executemany(
                    "INSERT INTO events VALUES (?, ?, 'inbox/accepted', ?)",
                    [(session_id, first + n, data) for n, (_, data) in enumerate(rows)],
                )
                self._db.execute(
                    "DELETE FROM mailbox WHERE session_id = ? AND id <= ?",
                    (session_id, rows[-1][0]),
                )
        except sqlite3.IntegrityError:
            raise self._conflict(session_id, first) from None
        self._next_seq[session_id] = first + len(rows)
        return messages

    # -- closing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            # Shielded but bounded: a cancelled close still gives its sessions back.
            with anyio.CancelScope(shield=True):
                budget = min(self.busy_timeout, CLOSE_TIMEOUT)
                await retry(self._drop_leases, path=self.path, budget=budget)
        except (StoreError, sqlite3.Error) as exc:
            log.warning("could not release the leases of %s: %s", self.path, exc)
        finally:
            self._db.close()

    def _drop_leases(self) -> None:
        if self._leasing:
            self._db.execute("DELETE FROM leases WHERE token = ?", (self.owner.token,))


#: What ``delete`` removes, children before the session row they refer to.
_SESSION_ROWS = (
    ("events", "session_id"),
    ("mailbox", "session_id"),
    ("leases", "session_id"),
    ("sessions", "id"),
)


def _header_row(header: SessionHeader) -> tuple[object, ...]:
    def text(value: str | None) -> str | None:
        return None if value is None else replace_surrogates(value)

    return (
        header.id,
        header.created_at,
        text(header.label),
        text(header.agent),
        header.parent_session,
        header.origin,
        header.delegation_depth,
        header.seed_length,
    )


def _header(row: tuple[object, ...]) -> SessionHeader:
    keys = [key.strip() for key in _HEADER_COLUMNS.split(",")]
    return SessionHeader.model_validate(dict(zip(keys, row, strict=True)))


def _reason(exc: ValidationError) -> str:
    detail = exc.errors()[0]
    return f"{detail['msg']} at {'.'.join(str(p) for p in detail['loc']) or 'top'}"


def _corrupt(path: Path, session_id: str, seq: int, reason: str) -> StoreError:
    return StoreError(
        ErrorCode.SESSION_CORRUPT,
        f'event {seq} of session "{session_id}" cannot be read: {reason}',
        file=path,
        remedy="the log was written by another program or a newer tether; restore it from a "
        "backup or start a new session (nothing was skipped)",
    )
