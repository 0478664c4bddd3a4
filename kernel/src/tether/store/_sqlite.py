"""The durable default: one SQLite file in WAL mode, a versioned schema with migrations.

Calls run synchronously on the event loop's thread: an append is one short transaction (tens of
microseconds in WAL mode), cheaper than a hop to a worker thread, and one connection serialises
every session of the process without locks. ``synchronous=NORMAL`` (the default) makes a
committed append survive a crash of the process; pass ``synchronous="FULL"`` to also survive a
power loss, at the cost of an fsync per commit. At ``FULL`` the appends of one moment share one
commit (group commit, ``SQLiteStore.append``), so many agents of one process pay one fsync.

Several processes share one file safely: a session is written only by the holder of its lease
(``leases`` table; every write checks the lease in the same statement or transaction), and other
processes reach a session's driver through its mailbox (``mailbox`` table).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, TypeVar

import anyio
import anyio.lowlevel
from pydantic import ValidationError

from ..contracts import Budget, LedgerClaim, LedgerReserve, SessionRemoval, Spend
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
from ._headers import HEADER_COLUMNS, header_data, header_row
from ._lease import DEFAULT_LEASE_TTL, LeaseOwner
from ._lifecycle import accepts
from ._rules import check_depth, check_mail, session_not_found
from ._sqlite_budgets import SQLiteLedger
from ._sqlite_copies import SQLiteCopies
from ._sqlite_faults import check_location
from ._sqlite_leases import RELEASE, SQLiteLeases, session_exists
from ._sqlite_lifetimes import SQLiteLifetimes
from ._sqlite_locks import DEFAULT_BUSY_TIMEOUT, Transaction, raise_failure, retry, waitable
from ._sqlite_mail import SQLiteMailbox, validation_reason
from ._sqlite_schema import SCHEMA_VERSION, open_database

__all__ = ("DEFAULT_BUSY_TIMEOUT", "SCHEMA_VERSION", "SQLiteStore")

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds ``aclose`` waits for a locked file to drop this store's leases before giving up
#: (the leases then stay until this process exits, when other processes see them as dead).
CLOSE_TIMEOUT = 5.0

_HEADER_COLUMNS = HEADER_COLUMNS
#: Appends of up to this many events are one statement; longer ones (a fork's seed) one
#: transaction (a statement has at most 999 parameters on older SQLite builds).
_ONE_STATEMENT_ROWS = 32


@functools.lru_cache(maxsize=_ONE_STATEMENT_ROWS)
def _fenced_insert(rows: int) -> str:
    """One statement inserting ``rows`` events if this store holds the session's lease: the
    lease check and the insert cannot be split by another writer (fencing)."""
    values = ", ".join(["(?, ?, ?, ?)"] * rows)
    return (
        f"INSERT INTO events SELECT * FROM (VALUES {values}) "
        "WHERE EXISTS (SELECT 1 FROM leases WHERE session_id = ? AND token = ?)"
    )


class SQLiteStore:
    """Sessions in one SQLite file (``sqlite:PATH`` in a profile).

    ``synchronous``: ``"NORMAL"`` (a returned write survives a crash of the process) or
    ``"FULL"`` (it also survives a power loss: each commit is an fsync, and concurrent appends
    share one commit). ``busy_timeout``: seconds to wait for a file another program keeps
    locked before ``STORE_BUSY``. ``lease_ttl``: seconds a lease lasts past its last
    ``renew()``, for stores on other hosts (on this host a lease lasts as long as its process).
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
        check_location(self.path)  # a folder, a FIFO, a path below a file: STORE_UNAVAILABLE
        self._db = open_database(self.path, synchronous=synchronous, busy_timeout=busy_timeout)
        # The next seq of the sessions this store wrote to; true while it holds their lease.
        self._next_seq: dict[str, int] = {}
        self._closed = False
        #: Who may write which session (the ``leases`` table).
        self.leases = SQLiteLeases(
            self._db, self.owner, ttl=lease_ttl, path=self.path, next_seq=self._next_seq
        )
        #: What other processes post to this file's sessions (the ``mailbox`` table).
        self.mailbox_table = SQLiteMailbox(self._db, path=self.path)
        #: How its sessions end (closing, deleting: ``SessionLifecycle``).
        self.lifetimes = SQLiteLifetimes(self._db, self.leases, path=self.path)
        #: Branches: a new session made of another's stored events, copied in SQL.
        self.copies = SQLiteCopies(self._db, self.leases, self._next_seq, self.path, busy_timeout)
        #: Who spends under which budget holder, and what it spent (``budget_*`` tables).
        self.ledger = SQLiteLedger(
            self._db, self.owner, ttl=lease_ttl, relaxed=synchronous == "FULL"
        )
        # At FULL a commit is an fsync: worth gathering the appends of one moment into one.
        self._group_commit = synchronous == "FULL"
        # The batch whose leader is letting this moment's other writes join it, if any.
        self._gathering: _Batch | None = None

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
                row = header_row(header)
                marks = ", ".join("?" * len(row))
                self._db.execute(f"INSERT INTO sessions ({_HEADER_COLUMNS}) VALUES ({marks})", row)
                self.leases.insert(header.id)
                if datas:
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
            raise session_not_found(session_id)
        return _header(row, self.path)

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

    async def set_model(
        self, session_id: str, model: str, events: Sequence[Event] = ()
    ) -> SessionHeader:
        datas = [(event.type, dump_event(event)) for event in events]
        await self._run(lambda: self._set_model(session_id, replace_surrogates(model), datas))
        return await self.header(session_id)

    def _set_model(self, session_id: str, model: str, datas: list[tuple[str, str]]) -> None:
        first = 0
        try:
            with self._transaction():  # the header and the events that log it, or neither
                self.leases.claim(session_id)
                first = self._seq(session_id)
                self._db.execute("UPDATE sessions SET model = ? WHERE id = ?", (model, session_id))
                self._db.executemany(
                    "INSERT INTO events VALUES (?, ?, ?, ?)",
                    [(session_id, first + n, kind, data) for n, (kind, data) in enumerate(datas)],
                )
        except sqlite3.IntegrityError:
            raise self._conflict(session_id, first) from None
        self._next_seq[session_id] = first + len(datas)

    def _seq(self, session_id: str) -> int:
        seq = self._next_seq.get(session_id)
        if seq is None:
            seq = self._next_seq[session_id] = self._last_seq(session_id) + 1
        return seq

    def _last_seq(self, session_id: str) -> int:
        if not session_exists(self._db, session_id):
            raise session_not_found(session_id)
        (last,) = self._db.execute(
            "SELECT coalesce(max(seq), 0) FROM events WHERE session_id = ?", (session_id,)
        ).fetchone()
        return last

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        """Store ``events`` after the log's last one; the seq of the last (durable on return).

        At ``synchronous="FULL"`` the appends (and ``release`` calls) of one moment share one
        commit: the first one leads, yields once to the event loop so that the other tasks
        ready now can join, then writes all of them in one transaction, each under its own
        savepoint, so that one session's refusal (``SESSION_BUSY``, ``SESSION_CONFLICT``,
        ``SESSION_NOT_FOUND``) fails that append alone, with the error it has alone. Every
        member returns after the commit. The leader finishes the commit even if cancelled
        (within ``busy_timeout``); another member cancelled before the commit is left out of
        it. The other writes (``create``, ``take_mail``, ``post``, ``acquire``, ``renew``,
        ``delete``) stay one commit each: a turn seldom makes one (``take_mail`` writes only
        when another process posted mail).
        """
        datas = [(event.type, dump_event(event)) for event in events]
        if self._group_commit and datas:
            return await self._grouped(session_id, datas)
        try:  # the first attempt inline: the hot path pays for no retry machinery
            return self._append(session_id, datas)
        except sqlite3.Error as exc:
            if not waitable(exc):
                raise_failure(exc, self.path)
        return await retry(
            lambda: self._append(session_id, datas),
            path=self.path,
            budget=self.busy_timeout,
            tried=True,
        )

    def _append(self, session_id: str, datas: list[tuple[str, str]]) -> int:
        first = self._seq(session_id)
        count = len(datas)
        if not count:
            return first - 1
        # Accepting a message: the transaction below checks, under the write lock, that the
        # session is still open (a close commits before or after it, never in between).
        accepting = accepts(kind for kind, _ in datas)
        try:
            if count <= _ONE_STATEMENT_ROWS and not accepting:
                # The common case: one statement (one commit), the lease checked inside it.
                params = [v for n, row in enumerate(datas) for v in (session_id, first + n, *row)]
                params += (session_id, self.owner.token)
                if self._db.execute(_fenced_insert(count), params).rowcount == count:
                    self._next_seq[session_id] = first + count
                    return first + count - 1
            # Not ours (or not any more): the transaction claims a free lease, or says why not.
            with self._transaction():
                if accepting:
                    self.lifetimes.check_open(session_id)
                if not self.leases.holds(session_id):
                    self.leases.claim(session_id)  # takes a free lease, refuses another owner's
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

    async def _grouped(self, session_id: str, datas: list[tuple[str, str]] | None) -> int:
        """Write with this moment's other grouped writes (``datas`` ``None``: a release)."""
        if self._closed:
            raise _closed(self.path)
        me = _Pending(session_id, datas)
        batch = self._gathering
        if batch is not None:  # a leader is gathering this moment's writes: join it
            batch.members.append(me)
            return await _follow(batch, me)
        batch = self._gathering = _Batch(me)
        try:
            # Shielded: a leader cancelled here would strand the members that joined it.
            await anyio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self._gathering = None  # later writes start the next batch
        # Shielded for the same reason, and bounded: retry gives up after busy_timeout.
        with anyio.CancelScope(shield=True):
            try:
                await retry(lambda: self._commit(batch), path=self.path, budget=self.busy_timeout)
            except BaseException as exc:
                batch.error = exc
                raise
            finally:
                batch.done.set()
        return me.outcome()

    def _commit(self, batch: _Batch) -> None:
        """One attempt at writing ``batch``: one transaction, or nothing (``_next_seq`` moves
        only after its commit, so an attempt that found the file locked leaves no trace)."""
        if self._closed:
            raise _closed(self.path)
        live = [member for member in batch.members if not member.withdrawn]
        if len(live) == 1:  # alone: the direct path's statements are cheaper, one commit too
            (me,) = live
            try:
                if me.datas is None:
                    self.leases.release(me.session_id)
                    me.settle(0)
                else:
                    me.settle(self._append(me.session_id, me.datas))
            except StoreError as exc:
                me.settle(exc)
            return
        # The next seq of each session as this attempt leaves it; None: forget it (released).
        nexts: dict[str, int | None] = {}
        with self._transaction():
            outcomes = [self._write_member(member, nexts) for member in live]
        for session_id, seq in nexts.items():
            if seq is None:
                self._next_seq.pop(session_id, None)
            else:
                self._next_seq[session_id] = seq
        for member, outcome in zip(live, outcomes, strict=True):
            member.settle(outcome)

    def _write_member(self, member: _Pending, nexts: dict[str, int | None]) -> int | StoreError:
        """Inside the batch's transaction: ``member``'s rows under their own savepoint, the
        lease checked in the same transaction (fencing, as the direct path does)."""
        session_id = member.session_id
        if member.datas is None:  # one statement that refuses nothing: no savepoint needed
            self._db.execute(RELEASE, (session_id, self.owner.token))
            nexts[session_id] = None  # once released, others may write
            return 0
        self._db.execute("SAVEPOINT member")
        first = 0
        try:
            if not self.leases.holds(session_id):
                self.leases.claim(session_id)  # takes a free lease, refuses another owner's
                nexts.pop(session_id, None)
            if accepts(kind for kind, _ in member.datas):
                self.lifetimes.check_open(session_id)
            first = self._batch_seq(session_id, nexts)
            self._db.executemany(
                "INSERT INTO events VALUES (?, ?, ?, ?)",
                [
                    (session_id, first + n, kind, data)
                    for n, (kind, data) in enumerate(member.datas)
                ],
            )
        except sqlite3.IntegrityError:
            self._db.execute("ROLLBACK TO member")
            self._db.execute("RELEASE member")
            nexts.pop(session_id, None)  # read where the log is before the next member
            return self._conflict(session_id, first)
        except StoreError as exc:
            self._db.execute("ROLLBACK TO member")
            self._db.execute("RELEASE member")
            return exc
        self._db.execute("RELEASE member")
        last = first + len(member.datas) - 1
        nexts[session_id] = last + 1
        return last

    def _batch_seq(self, session_id: str, nexts: dict[str, int | None]) -> int:
        seq = nexts[session_id] if session_id in nexts else self._next_seq.get(session_id)
        if seq is None:
            # Not kept in _next_seq: the read counts rows this transaction may still roll back.
            seq = self._last_seq(session_id) + 1
        return seq

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
                raise _corrupt(self.path, session_id, seq, validation_reason(exc)) from exc
            stored.append(StoredEvent(seq, event))
            expected += 1
        return stored

    def _event_rows(self, session_id: str, after: int, limit: int | None) -> list[tuple[int, str]]:
        if not session_exists(self._db, session_id):
            raise session_not_found(session_id)
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
        return [_header(row, self.path) for row in rows]

    async def delete(self, session_id: str) -> None:
        await self._run(lambda: self.lifetimes.roll_back(session_id))
        self._next_seq.pop(session_id, None)

    # -- ending sessions (``self.lifetimes``; tether.contracts.SessionLifecycle) -------------

    async def close_session(self, session_id: str, *, at: float) -> tuple[str, ...]:
        return await self._run(lambda: self.lifetimes.close(session_id, at))

    async def delete_session(
        self, session_id: str, *, at: float, tree: bool = False
    ) -> SessionRemoval:
        removal = await self._run(lambda: self.lifetimes.delete(session_id, at, tree))
        for sid in removal.deleted:
            self._next_seq.pop(sid, None)
        return removal

    # -- leases (``self.leases``) and the mailbox (``self.mailbox_table``) ---------------------

    async def acquire(self, session_id: str) -> bool:
        return await self._run(lambda: self._acquire(session_id))

    def _acquire(self, session_id: str) -> bool:
        if self.leases.holds(session_id):
            return False  # already ours: nothing to write
        with self._transaction():
            return self.leases.take_over(session_id)

    async def release(self, session_id: str) -> None:
        """Give the lease of ``session_id`` back (at ``FULL``, in the commit of this moment's
        appends, see ``append``)."""
        if self._group_commit:
            await self._grouped(session_id, None)
        else:
            await self._run(lambda: self.leases.release(session_id))

    async def renew(self) -> None:
        """Push the expiry of this store's leases and budget claims (one transaction)."""
        if self.leases.taken or self.ledger.claimed:
            await self._run(self._renew)

    def _renew(self) -> None:
        if not self.ledger.claimed:
            self.leases.renew()
            return
        with self._transaction():
            if self.leases.taken:
                self.leases.renew()
            self.ledger.renew()

    async def holder(self, session_id: str) -> LeaseOwner | None:
        lease = await self._run(lambda: self.leases.get_or_missing(session_id))
        if lease is None:
            return None
        owner, expires_at = lease
        return owner if owner.token == self.owner.token or owner.alive(expires_at) else None

    async def post(self, session_id: str, message: InboxAccepted) -> None:
        check_mail(message)
        if not await self._run(lambda: self.mailbox_table.post(session_id, message)):
            await self._run(lambda: self.lifetimes.check_open(session_id))  # closed, or not there
            raise session_not_found(session_id)

    async def mail(self) -> list[str]:
        return await self._run(self.mailbox_table.waiting)

    async def mailbox(self, session_id: str) -> list[InboxAccepted]:
        rows = await self._run(lambda: self.mailbox_table.rows(session_id))
        return [self.mailbox_table.parse(session_id, data) for _, data in rows]

    async def take_mail(self, session_id: str) -> list[InboxAccepted]:
        return await self._run(lambda: self._take_mail(session_id))

    def _take_mail(self, session_id: str) -> list[InboxAccepted]:
        mailbox = self.mailbox_table
        if self.leases.holds(session_id) and not mailbox.has_mail(session_id):
            return []  # the usual answer, without taking the write lock
        first = 0
        try:
            with self._transaction():  # into the log and out of the mailbox, or neither
                self.leases.claim(session_id)
                rows = mailbox.rows(session_id)
                messages = [mailbox.parse(session_id, data) for _, data in rows]
                if not rows:
                    return []
                first = self._seq(session_id)
                self._db.executemany(
                    "INSERT INTO events VALUES (?, ?, 'inbox/accepted', ?)",
                    [(session_id, first + n, data) for n, (_, data) in enumerate(rows)],
                )
                mailbox.remove(session_id, rows[-1][0])
        except sqlite3.IntegrityError:
            raise self._conflict(session_id, first) from None
        self._next_seq[session_id] = first + len(rows)
        return messages

    # -- the budget ledger (``self.ledger``; tether.contracts.BudgetLedger) -------------------

    async def budget_claim(self, holder: str) -> LedgerClaim:
        return await self._run(lambda: self.ledger.claim(holder))

    async def budget_contended(self) -> tuple[list[str], float]:
        return await self._run(self.ledger.contended)

    async def budget_share(self, holder: str, spent: Spend, reserved: Spend) -> None:
        await self._run(lambda: self.ledger.share(holder, spent, reserved))

    async def budget_reserve(
        self,
        holder: str,
        need: Spend,
        budget: Budget,
        *,
        settle: tuple[Spend, Spend] | None = None,
    ) -> LedgerReserve:
        return await self._run(lambda: self.ledger.reserve(holder, need, budget, settle))

    async def budget_release(self, holder: str, spent: Spend | None) -> None:
        await self._run(lambda: self.ledger.release(holder, spent))

    # -- closing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            # Shielded but bounded: a cancelled close still gives its sessions back.
            with anyio.CancelScope(shield=True):
                budget = min(self.busy_timeout, CLOSE_TIMEOUT)
                await retry(self._drop, path=self.path, budget=budget)
        except (StoreError, sqlite3.Error) as exc:
            log.warning("could not release the leases of %s: %s", self.path, exc)
        finally:
            self._db.close()

    def _drop(self) -> None:
        """Give back every lease and budget claim this store holds (one transaction)."""
        if not self.ledger.claimed:
            self.leases.drop()
            return
        with self._transaction():
            self.leases.drop()
            self.ledger.drop()


class _Pending:
    """One append (``datas``) or release (``datas`` ``None``) waiting for its batch's commit,
    then its outcome."""

    __slots__ = ("datas", "error", "seq", "session_id", "settled", "withdrawn")

    def __init__(self, session_id: str, datas: list[tuple[str, str]] | None) -> None:
        self.session_id = session_id
        self.datas = datas
        self.seq = 0
        self.error: StoreError | None = None
        self.settled = False
        # Its caller was cancelled before it was written: later attempts leave it out.
        self.withdrawn = False

    def settle(self, outcome: int | StoreError) -> None:
        """Record what the committed attempt did with this append."""
        if isinstance(outcome, StoreError):
            self.error = outcome
        else:
            self.seq = outcome
        self.settled = True

    def outcome(self) -> int:
        """The seq of the append's last event, or its own error."""
        if self.error is not None:
            raise self.error
        return self.seq


class _Batch:
    """The writes one leader makes in one transaction, in the order they were called."""

    __slots__ = ("done", "error", "members")

    def __init__(self, leader: _Pending) -> None:
        self.members = [leader]
        self.done = anyio.Event()
        # What failed the whole batch (STORE_BUSY, a closed store, a broken file).
        self.error: BaseException | None = None


async def _follow(batch: _Batch, me: _Pending) -> int:
    """Wait for ``batch``'s leader, then ``me``'s outcome."""
    try:
        await batch.done.wait()
    except BaseException:
        if me.settled:
            # Committed already: raising would say it was not (an agent would write its
            # events again). A cancel scope cancels again at the caller's next checkpoint.
            return me.outcome()
        me.withdrawn = True  # later attempts leave it out: unwritten, as a cancelled direct one
        raise
    if not me.settled and batch.error is not None:
        raise batch.error
    return me.outcome()


def _closed(path: Path) -> sqlite3.ProgrammingError:
    # The type the direct path raises for a closed connection, with the file named.
    return sqlite3.ProgrammingError(f"the session store {path} is closed; nothing was written")


def _header(row: tuple[object, ...], path: Path) -> SessionHeader:
    try:
        return SessionHeader.model_validate(header_data(row))
    except (ValidationError, ValueError) as exc:
        reason = validation_reason(exc) if isinstance(exc, ValidationError) else f"caller: {exc}"
        raise StoreError(
            ErrorCode.SESSION_CORRUPT,
            f"the header of session {str(row[0])[:80]!r} cannot be read: {reason}",
            file=path,
            remedy="the sessions table was written by another program or a newer tether; "
            "restore the file from a backup or delete that row (nothing was changed)",
        ) from exc


def _corrupt(path: Path, session_id: str, seq: int, reason: str) -> StoreError:
    return StoreError(
        ErrorCode.SESSION_CORRUPT,
        f'event {seq} of session "{session_id}" cannot be read: {reason}',
        file=path,
        remedy="the log was written by another program or a newer tether; restore it from a "
        "backup or start a new session (nothing was skipped)",
    )
