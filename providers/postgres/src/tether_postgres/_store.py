"""``PostgresStore``: sessions, leases and mailboxes in one PostgreSQL database.

Every process (and host) that opens the same database shares its sessions, under the rules the
SQLite store keeps for one file: a session is written only by the holder of its lease, and every
write checks the lease in the same statement or transaction (``FOR SHARE`` on the lease row, so a
takeover waits for a write in flight and a write after a takeover is refused); any process may
post to a session's mailbox. Lease expiries are read and written on the database server's clock,
so hosts whose clocks disagree still agree on when a lease ran out.

Calls run on a pool of connections (psycopg 3, async): the sessions of one process write in
parallel, each write one round trip when the lease is already held.

Every wait is bounded, so a network partition or a frozen server ends a call with
``STORE_UNAVAILABLE`` instead of hanging it: a connection is given ``connect_timeout``, a
statement ``statement_timeout`` on the server, and every call the same time plus a grace on the
client (the connection's socket is shut down when it runs out, what no server-side setting can do
for a server that does not run); TCP keepalives and ``tcp_user_timeout`` drop a connection whose
peer vanished.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, NoReturn, cast

import anyio
import psycopg
import psycopg.errors
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydantic import ValidationError

from tether.contracts import Budget, LedgerClaim, LedgerReserve, SessionRemoval, Spend
from tether.errors import ErrorCode, StoreError
from tether.models import DeltaKind, ModelDelta
from tether.store import (
    DEFAULT_LEASE_TTL,
    HEADER_COLUMNS,
    ClaimRow,
    DeltaBatch,
    Event,
    HolderLedger,
    InboxAccepted,
    LeaseOwner,
    SessionHeader,
    StoredEvent,
    accepts,
    check_depth,
    check_mail,
    dump_caller,
    dump_event,
    dump_spend,
    header_data,
    held_open,
    load_spend,
    parse_event,
    replace_surrogates,
    session_busy,
    session_closed,
    session_not_found,
    split_deltas,
)

from ._schema import migrate

__all__ = (
    "ANSWER_GRACE",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_STATEMENT_TIMEOUT",
    "DELTA_PIECE",
    "PostgresStore",
    "delta_channel",
    "describe",
    "unreadable",
)

log = logging.getLogger(__name__)

#: Connections one store keeps at most (its sessions' writes run in parallel up to this many).
DEFAULT_POOL_SIZE = 8
#: Seconds to wait for the server (a connection, or one from the pool) before STORE_UNAVAILABLE.
DEFAULT_CONNECT_TIMEOUT = 10.0
#: Seconds a statement waits for a row or table lock another program holds before STORE_BUSY.
DEFAULT_BUSY_TIMEOUT = 5.0
#: Seconds a statement may run on the server (PostgreSQL's statement_timeout) before STORE_BUSY;
#: a call that gets no answer for this long plus ``ANSWER_GRACE`` is STORE_UNAVAILABLE.
DEFAULT_STATEMENT_TIMEOUT = 30.0
#: Seconds the server keeps a session idle inside a transaction (its client gone mid-way) before
#: it ends it, giving back its locks (PostgreSQL's idle_in_transaction_session_timeout).
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT = 60.0
#: Seconds past ``statement_timeout`` a call waits for the server's answer (its own timeout
#: error, over a slow network) before the client gives up on the connection.
ANSWER_GRACE = 5.0
#: libpq's TCP keepalive settings, unless the connection string sets them: a peer silent for
#: 10 s is probed every 5 s, and given up after 3 unanswered probes.
_KEEPALIVES = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5"}
_KEEPALIVE_COUNT = "3"

_HEADER_COLUMNS = HEADER_COLUMNS
#: A session's lifetime tree (``SessionLifecycle``): it, and every session below it through
#: children not started detached, the session first; each once (UNION), even in a cycle.
_LIFETIME = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM tether_sessions WHERE id = %s UNION "
    "SELECT s.id FROM tether_sessions AS s JOIN tree ON s.parent_session = tree.id "
    "WHERE NOT s.detached) SELECT id FROM tree"
)
#: Every session below one, detached or not, the session first.
_SUBTREE = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM tether_sessions WHERE id = %s UNION "
    "SELECT s.id FROM tether_sessions AS s JOIN tree ON s.parent_session = tree.id) "
    "SELECT id FROM tree"
)
_NOW = "extract(epoch from clock_timestamp())"
_LEASE = (
    f"SELECT host, pid, started, token, expires_at, {_NOW} FROM tether_leases WHERE session_id = %s"
)
#: One statement: the events are inserted only if this store holds the session's lease, and the
#: lease row is share-locked until they commit (a takeover, which updates it, waits for them).
_FENCED_INSERT = (
    "WITH lease AS (SELECT 1 FROM tether_leases WHERE session_id = %(session)s "
    "AND token = %(token)s FOR SHARE) "
    "INSERT INTO tether_events (session_id, seq, type, data) "
    "SELECT %(session)s, v.seq, v.type, v.data "
    "FROM unnest(%(seqs)b::integer[], %(types)b::text[], %(datas)b::text[]) AS v(seq, type, data) "
    "WHERE EXISTS (SELECT 1 FROM lease)"
)
#: Many sessions' appends in one statement (group commit): each session's rows are inserted only
#: if this store holds its lease (share-locked in session order, so two batches never wait on
#: each other in a cycle); the rows that went in come back, to tell each append its outcome.
_GROUPED_INSERT = (
    "WITH held AS (SELECT session_id FROM tether_leases WHERE session_id = ANY(%(ids)b::text[]) "
    "AND token = %(token)s ORDER BY session_id FOR SHARE) "
    "INSERT INTO tether_events (session_id, seq, type, data) "
    "SELECT v.session_id, v.seq, v.type, v.data FROM unnest(%(sessions)b::text[], "
    "%(seqs)b::integer[], %(types)b::text[], %(datas)b::text[]) AS v(session_id, seq, type, data) "
    "WHERE v.session_id IN (SELECT session_id FROM held) "
    "RETURNING session_id"
)
_INSERT = (
    "INSERT INTO tether_events (session_id, seq, type, data) "
    "SELECT %(session)s, v.seq, v.type, v.data "
    "FROM unnest(%(seqs)b::integer[], %(types)b::text[], %(datas)b::text[]) AS v(seq, type, data)"
)
#: What ``delete`` removes, children before the session row they refer to.
_SESSION_ROWS = (
    ("tether_events", "session_id"),
    ("tether_mailbox", "session_id"),
    ("tether_leases", "session_id"),
    ("tether_budget_claims", "holder"),
    ("tether_budget_ledger", "holder"),
    ("tether_sessions", "id"),
)
#: The holder's ledger row, locked: every ledger call on one holder waits for the one before.
_LEDGER_ROW = f"SELECT spent, known, {_NOW} FROM tether_budget_ledger WHERE holder = %s FOR UPDATE"
_LEDGER_CLAIMS = (
    "SELECT token, host, pid, started, expires_at, exclusive, reserved "
    "FROM tether_budget_claims WHERE holder = %s"
)
#: One statement writes what a ledger call changed: the dead claims go, this owner's claim is
#: upserted (or goes too, released), the row takes its new spend. A budget write is not worth
#: a WAL flush of its own (the logs hold the truth): its commit does not wait for one.
_LEDGER_WRITE = (
    "WITH dropped AS (DELETE FROM tether_budget_claims WHERE holder = %(holder)s "
    "AND token = ANY(%(dropped)s::text[])), "
    "mine AS (INSERT INTO tether_budget_claims (holder, token, host, pid, started, expires_at, "
    "exclusive, reserved) SELECT %(holder)s::text, %(token)s::text, %(host)s::text, "
    "%(pid)s::integer, %(started)s::double precision, %(expires_at)s::double precision, "
    "%(exclusive)s::boolean, %(reserved)s::text WHERE %(keep)s::boolean "
    "ON CONFLICT (holder, token) DO UPDATE SET expires_at = excluded.expires_at, "
    "exclusive = excluded.exclusive, reserved = excluded.reserved), "
    "row AS (UPDATE tether_budget_ledger SET spent = %(spent)s::text, known = %(known)s::boolean "
    "WHERE holder = %(holder)s AND %(row_changed)s::boolean) "
    "SELECT set_config('synchronous_commit', 'off', true)"
)
#: The holders this owner claims exclusively and the other claims on them (a LEFT JOIN: one
#: row even when there are none), with this owner's earliest claim expiry and the server's clock.
_CONTENDED = (
    "SELECT m.earliest, m.now, c.holder, o.host, o.pid, o.started, o.token, o.expires_at "
    "FROM (SELECT min(expires_at) AS earliest, "
    f"{_NOW} AS now FROM tether_budget_claims WHERE token = %(token)s) AS m "
    "LEFT JOIN (tether_budget_claims AS c JOIN tether_budget_claims AS o "
    "ON o.holder = c.holder AND o.token <> c.token) ON c.token = %(token)s AND c.exclusive"
)

Connection = AsyncConnection[tuple[Any, ...]]


def describe(conninfo: str) -> str:
    """Where a connection string points, without its password: ``postgresql://HOST:PORT/DB``."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql (an unreadable connection string)"
    host = str(parts.get("host") or "localhost")
    port = str(parts.get("port") or 5432)
    user = parts.get("user")
    where = f"postgresql://{user}@" if user else "postgresql://"
    return f"{where}{host}:{port}/{parts.get('dbname') or user or ''}"


def unreadable(exc: psycopg.ProgrammingError) -> StoreError:
    """``STORE_SPEC_INVALID`` for a connection string libpq cannot read (``exc`` says why)."""
    return StoreError(
        ErrorCode.STORE_SPEC_INVALID,
        f"the PostgreSQL connection string cannot be read: {_first_line(exc)}",
        key="[tether] store",
        remedy='write a URL such as "postgresql://USER@HOST:5432/DATABASE"; its parameters are '
        "libpq's (sslmode, application_name, ...) and tether's (connect_timeout, "
        "statement_timeout, busy_timeout, idle_in_transaction_session_timeout)",
    )


class PostgresStore:
    """Sessions in a PostgreSQL database (``postgresql://...`` in a profile).

    ``conninfo``: a libpq connection string or URL. ``pool_size``: connections kept at most.
    ``busy_timeout``: seconds to wait for a lock another program holds before ``STORE_BUSY``
    (``lock_timeout``). ``connect_timeout``: seconds to wait for a connection before
    ``STORE_UNAVAILABLE``. ``statement_timeout``: seconds a statement may run before
    ``STORE_BUSY``; a call without an answer for this long plus :data:`ANSWER_GRACE` (a
    partition, a frozen server) is ``STORE_UNAVAILABLE``. ``idle_in_transaction_timeout``:
    seconds the server lets a transaction whose client went silent hold its locks.
    ``lease_ttl``: seconds a lease lasts past its last ``renew()``, for stores on other hosts
    (on the holder's own host a lease lasts as long as its process). Nothing connects until the
    first call.
    """

    durable = True

    def __init__(
        self,
        conninfo: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
        idle_in_transaction_timeout: float = DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
        lease_ttl: float = DEFAULT_LEASE_TTL,
    ) -> None:
        self.conninfo = conninfo
        self.where = describe(conninfo)
        self.pool_size = pool_size
        self.busy_timeout = busy_timeout
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self.idle_in_transaction_timeout = idle_in_transaction_timeout
        self.lease_ttl = lease_ttl
        try:
            self._conninfo = self._bounded_conninfo(conninfo)
        except psycopg.ProgrammingError as exc:
            raise unreadable(exc) from None
        self.owner = LeaseOwner.current()
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._opening = anyio.Lock()
        self._closed = False
        self._connected = False  # whether it ever reached the server (and may hold leases)
        # The next seq of the sessions this store wrote to; true while it holds their lease.
        self._next_seq: dict[str, int] = {}
        # One writer at a time per session in this store: writes awaited concurrently (the
        # results of parallel tool calls) get their seqs, and their places, in call order.
        self._writing: dict[str, anyio.Lock] = {}
        # The batch of appends whose leader lets this moment's other appends join it, if any.
        self._gathering: _Batch | None = None
        self._notified = 0  # delta notifications sent (numbers them: none is a duplicate)
        self._claimed = False  # whether it ever wrote a budget claim (renew and close push them)

    @property
    def answer_timeout(self) -> float:
        """Seconds a call waits for the server's answer before ``STORE_UNAVAILABLE``."""
        return self.statement_timeout + ANSWER_GRACE

    def _bounded_conninfo(self, conninfo: str) -> str:
        """``conninfo`` with the client's bounds: ``connect_timeout`` (libpq's, whole seconds,
        at least 2), and TCP keepalives and ``tcp_user_timeout`` unless it sets them."""
        params: dict[str, Any] = conninfo_to_dict(conninfo)
        params["connect_timeout"] = str(max(2, round(self.connect_timeout)))
        for key, value in _KEEPALIVES.items():
            params.setdefault(key, value)
        params.setdefault("keepalives_count", _KEEPALIVE_COUNT)
        # Data sent and not acknowledged for this long drops the connection (Linux).
        params.setdefault("tcp_user_timeout", str(round(self.answer_timeout * 1000)))
        return make_conninfo("", **params)

    async def _connect(self) -> Connection:
        """A connection of its own (not the pool's), configured as the pool's are."""
        db = await AsyncConnection.connect(self._conninfo, autocommit=True)
        try:
            with self._bounded(db):
                await self._configure(db)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await db.close()
            raise
        return db

    def _writer(self, session_id: str) -> anyio.Lock:
        lock = self._writing.get(session_id)
        if lock is None:
            lock = self._writing[session_id] = anyio.Lock()
        return lock

    # -- connections ------------------------------------------------------------------------

    async def _open(self) -> AsyncConnectionPool[Connection]:
        async with self._opening:
            if self._closed:
                raise StoreError(
                    ErrorCode.STORE_UNAVAILABLE,
                    f"the session store {self.where} is closed; nothing was written",
                    where=self.where,
                    remedy="open a new store",
                )
            if self._pool is not None:
                return self._pool
            # One direct connection first: it says exactly why a server cannot be used (refused,
            # no such database, authentication), where a pool would only time out.
            with self._errors():
                first = await self._connect()
                try:
                    with self._bounded(first):
                        await migrate(first, self.where)
                finally:
                    await first.close()
                pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
                    self._conninfo,
                    min_size=1,
                    max_size=self.pool_size,
                    kwargs={"autocommit": True},
                    configure=self._configure,
                    timeout=self.connect_timeout,
                    open=False,
                    name="tether",
                )
                await pool.open(wait=True, timeout=self.connect_timeout)
            self._pool = pool
            self._connected = True
            return pool

    async def _configure(self, db: Connection) -> None:
        # On the server, per session (SET, not libpq's options, which poolers such as
        # PgBouncer refuse): a lock another program holds is waited for busy_timeout, then
        # STORE_BUSY; a statement runs at most statement_timeout; a transaction whose client
        # went silent is ended after idle_in_transaction_timeout, giving its locks back.
        await db.execute(
            "SELECT set_config('lock_timeout', %s, false), "
            "set_config('statement_timeout', %s, false), "
            "set_config('idle_in_transaction_session_timeout', %s, false)",
            (
                _milliseconds(self.busy_timeout),
                _milliseconds(self.statement_timeout),
                _milliseconds(self.idle_in_transaction_timeout),
            ),
        )

    @contextmanager
    def _bounded(self, db: Connection) -> Generator[None]:
        """Give up on ``db`` when the block has had no answer for ``answer_timeout`` seconds:
        its socket is shut down, which ends the wait at once (libpq sees the connection
        closed), where cancelling the wait would make psycopg wait again, for the server to
        cancel the statement. The block then raises ``STORE_UNAVAILABLE`` and the connection
        is closed; whether a write it sent was committed is for the log to say."""
        timer = _Timer()
        handle = asyncio.get_running_loop().call_later(self.answer_timeout, timer.fire, db)
        try:
            yield
        except BaseException as exc:
            if timer.fired and not isinstance(exc, StoreError):
                raise self._no_answer() from exc
            raise
        finally:
            handle.cancel()
        if timer.fired:  # answered as it ran out, but the socket is shut: no more use
            db.pgconn.finish()

    def _no_answer(self) -> StoreError:
        return StoreError(
            ErrorCode.STORE_UNAVAILABLE,
            f"the session store {self.where} did not answer within {self.answer_timeout:g} s "
            "(the network to it, or the server, is down)",
            where=self.where,
            remedy="check the network and the server, then run the session again: its log "
            "holds everything the store confirmed, and the turn the failure cut short is closed "
            "when it is restored",
        )

    @asynccontextmanager
    async def _connection(self) -> AsyncGenerator[Connection]:
        # Shielded, as a SQLite store's call is (it never awaits): a caller cancelled during
        # a call gets its outcome, and the cancellation at its next checkpoint. Unshielded,
        # psycopg cancels the statement on the server, is itself interrupted doing so (anyio
        # cancels at every await), closes the connection and logs two warnings to stderr; and
        # a write the server committed looks unwritten to its caller. Each statement is
        # bounded by busy_timeout, the pool by connect_timeout.
        # Each call is bounded by answer_timeout (_bounded), the pool by connect_timeout.
        with anyio.CancelScope(shield=True):
            pool = self._pool or await self._open()
            try:
                with self._errors():
                    async with pool.connection() as db:
                        with self._bounded(db):
                            yield db
            except StoreError as exc:
                if exc.code is ErrorCode.STORE_UNAVAILABLE:
                    await self._drop_pool(pool)
                raise

    async def _drop_pool(self, pool: AsyncConnectionPool[Connection]) -> None:
        """After the server was out of reach, its other connections are likely dead too: the
        next call starts a new pool (and says at once why the server cannot be used)."""
        async with self._opening:
            if self._pool is not pool:
                return  # another call dropped it already
            self._pool = None
        # Not waiting on a server that does not answer: idle connections are closed at once
        # (nothing is read back), the ones in use when they are given back.
        await pool.close(timeout=0.5)

    @asynccontextmanager
    async def _transaction(self) -> AsyncGenerator[Connection]:
        async with self._connection() as db, db.transaction():
            yield db

    @contextmanager
    def _errors(self) -> Generator[None]:
        """Turn what psycopg raises into the ``StoreError`` that says what it means; integrity
        errors (the caller's to read) and ``StoreError`` pass through."""
        try:
            yield
        except psycopg.errors.IntegrityError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> NoReturn:
        """Raise the ``StoreError`` that says what ``exc`` (from psycopg) means for the user."""
        if isinstance(exc, psycopg.errors.QueryCanceled) and not isinstance(
            exc, psycopg.errors.LockNotAvailable
        ):
            raise StoreError(
                ErrorCode.STORE_BUSY,
                f"a statement of the session store {self.where} ran past its statement_timeout "
                f"of {self.statement_timeout:g} s: {_first_line(exc)}",
                where=self.where,
                remedy="the server is overloaded or another program holds what it needs; try "
                "again later, or raise statement_timeout in the profile's [tether] store "
                "(?statement_timeout=60s); nothing was written",
            ) from exc
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            raise StoreError(
                ErrorCode.STORE_BUSY,
                f"the session store {self.where} stayed locked by another program for "
                f"{self.busy_timeout:g} s: {_first_line(exc)}",
                where=self.where,
                remedy="find the session that holds the lock (pg_stat_activity) and end it, or "
                "try again later; nothing was written",
            ) from exc
        if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
            raise StoreError(
                ErrorCode.STORE_CORRUPT,
                f"the session store {self.where} lacks a table or column it had: "
                f"{_first_line(exc)}",
                where=self.where,
                remedy="another program dropped or altered the tether_ tables; restore them "
                "from a backup, or point the profile at a new database",
            ) from exc
        if isinstance(exc, PoolTimeout):
            raise StoreError(
                ErrorCode.STORE_UNAVAILABLE,
                f"no connection to the session store {self.where} within "
                f"{self.connect_timeout:g} s",
                where=self.where,
                remedy="check that the server runs and accepts connections, or raise the "
                "server's max_connections; nothing was written",
            ) from exc
        raise StoreError(
            ErrorCode.STORE_UNAVAILABLE,
            f"the session store {self.where} cannot be used: {_first_line(exc)}",
            where=self.where,
            remedy="check that the PostgreSQL server runs, that the database exists and that "
            "the profile's URL names the right user; nothing was written",
        ) from exc

    # -- sessions and their logs ------------------------------------------------------------

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        datas = [(event.type, _text(dump_event(event))) for event in events]
        try:
            async with self._transaction() as db:  # header, lease and first events, or nothing
                await db.execute(
                    f"INSERT INTO tether_sessions ({_HEADER_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    _header_row(header),
                )
                await self._insert_lease(db, header.id)
                if datas:
                    await db.execute(_INSERT, _rows(header.id, 1, datas))
        except psycopg.errors.UniqueViolation:
            raise StoreError(
                ErrorCode.SESSION_EXISTS,
                f'session "{header.id}" already exists',
                where=self.where,
                remedy="use a new session id",
            ) from None
        self._next_seq[header.id] = len(datas) + 1
        return header

    async def header(self, session_id: str) -> SessionHeader:
        async with self._connection() as db:
            row = await (
                await db.execute(
                    f"SELECT {_HEADER_COLUMNS} FROM tether_sessions WHERE id = %s", (session_id,)
                )
            ).fetchone()
        if row is None:
            raise session_not_found(session_id)
        return self._header(row)

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        header = await self.header(session_id)
        if check_depth(header, depth):
            async with self._connection() as db:
                # The WHERE clause keeps the rule even against a concurrent writer.
                await db.execute(
                    "UPDATE tether_sessions SET delegation_depth = %s "
                    "WHERE id = %s AND delegation_depth < %s",
                    (depth, session_id, depth),
                )
            header = header.model_copy(update={"delegation_depth": depth})
        return header

    async def set_model(
        self, session_id: str, model: str, events: Sequence[Event] = ()
    ) -> SessionHeader:
        datas = [(event.type, _text(dump_event(event))) for event in events]
        async with self._writer(session_id):
            await self._set_model(session_id, model, datas)
        return await self.header(session_id)

    async def _set_model(self, session_id: str, model: str, datas: list[tuple[str, str]]) -> None:
        first = 0
        try:
            async with self._transaction() as db:  # the header and the events that log it
                await self._claim(db, session_id)
                first = await self._seq(db, session_id)
                await db.execute(
                    "UPDATE tether_sessions SET model = %s WHERE id = %s",
                    (_text(replace_surrogates(model)), session_id),
                )
                if datas:
                    await db.execute(_INSERT, _rows(session_id, first, datas))
        except psycopg.errors.UniqueViolation:
            raise self._conflict(session_id, first) from None
        except BaseException:
            self._next_seq.pop(session_id, None)  # read where the log is before the next write
            raise
        self._next_seq[session_id] = first + len(datas)

    async def _seq(self, db: Connection, session_id: str) -> int:
        seq = self._next_seq.get(session_id)
        if seq is None:
            seq = self._next_seq[session_id] = await self._last_seq(db, session_id) + 1
        return seq

    async def _last_seq(self, db: Connection, session_id: str) -> int:
        row = await (
            await db.execute(
                "SELECT (SELECT max(seq) FROM tether_events WHERE session_id = %s), "
                "EXISTS (SELECT 1 FROM tether_sessions WHERE id = %s)",
                (session_id, session_id),
            )
        ).fetchone()
        if row is None or not row[1]:
            raise session_not_found(session_id)
        return int(row[0] or 0)

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        """Append ``events``; the appends of this store's sessions that are ready at the same
        moment go in one statement (group commit): the first leads, yields once to the event
        loop so that the other tasks ready now can join, then inserts all of them, each
        session's rows fenced by its lease. An append whose lease the batch did not find (not
        held yet, or lost) and a batch a foreign writer's rows broke fall back to the append
        of one session, which takes a free lease or says why not, with the error it has
        alone. The batch, once sent, is waited for even by a cancelled member: its rows may be
        in, and its caller must know."""
        datas = [(event.type, _text(dump_event(event))) for event in events]
        async with self._writer(session_id):
            first = self._next_seq.get(session_id)
            if first is not None and datas and not accepts(kind for kind, _ in datas):
                last = await self._grouped(session_id, first, datas)
                if last is not None:
                    return last
            return await self._append(session_id, datas)

    async def _grouped(
        self, session_id: str, first: int, datas: list[tuple[str, str]]
    ) -> int | None:
        """Write with this moment's other appends: the seq of the append's last event, or
        None when it must be written alone."""
        me = _Member(session_id, first, datas)
        batch = self._gathering
        if batch is not None:  # a leader is gathering this moment's appends: join it
            batch.members.append(me)
            return await _follow(batch, me)
        batch = self._gathering = _Batch(me)
        try:
            # Shielded: a leader cancelled here would strand the members that joined it.
            await anyio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self._gathering = None  # later appends start the next batch
        try:
            await self._commit(batch)
        except BaseException as exc:
            batch.error = exc
            for member in batch.members:  # the rows may be in or not: read where the log is
                self._next_seq.pop(member.session_id, None)
            raise
        finally:
            batch.done.set()
        return me.outcome()

    async def _commit(self, batch: _Batch) -> None:
        """One statement for ``batch``'s members that are still wanted; each member learns
        whether its rows went in (``_next_seq`` moves for those)."""
        batch.sent = True
        live = [member for member in batch.members if not member.withdrawn]
        if len(live) == 1:  # alone: the one-session statement is cheaper, one round trip too
            (me,) = live
            params = _rows(me.session_id, me.first, me.datas)
            params["token"] = self.owner.token
            try:
                async with self._connection() as db:
                    cursor = await db.execute(_FENCED_INSERT, params)
            except psycopg.errors.UniqueViolation:
                me.settle(None)  # a foreign writer's row: the one-session path says so
                return
            me.settle(me.last if cursor.rowcount == len(me.datas) else None)
            if me.seq is not None:
                self._next_seq[me.session_id] = me.seq + 1
            return
        sessions: list[str] = []
        seqs: list[int] = []
        types: list[str] = []
        texts: list[str] = []
        for member in live:
            for n, (kind, data) in enumerate(member.datas):
                sessions.append(member.session_id)
                seqs.append(member.first + n)
                types.append(kind)
                texts.append(data)
        params = {
            "ids": sorted(member.session_id for member in live),
            "token": self.owner.token,
            "sessions": sessions,
            "seqs": seqs,
            "types": types,
            "datas": texts,
        }
        try:
            async with self._connection() as db:
                rows = await (await db.execute(_GROUPED_INSERT, params)).fetchall()
        except psycopg.errors.UniqueViolation:
            # A row another writer put in the way failed the whole statement: each member
            # goes alone and learns whether it is the one.
            for member in live:
                member.settle(None)
            return
        written = Counter(session_id for (session_id,) in rows)
        for member in live:
            if written[member.session_id] == len(member.datas):
                member.settle(member.last)
                self._next_seq[member.session_id] = member.last + 1
            else:
                member.settle(None)

    async def _append(self, session_id: str, datas: list[tuple[str, str]]) -> int:
        first = self._next_seq.get(session_id)
        if not datas:
            if first is not None:
                return first - 1
            async with self._connection() as db:
                return await self._last_seq(db, session_id)
        # Accepting a message: the transaction below checks that the session is still open,
        # its row share-locked (a close, which updates it, commits before or after).
        accepting = accepts(kind for kind, _ in datas)
        try:
            async with self._connection() as db:
                if first is not None and not accepting:
                    # The common case: one statement, one round trip, the lease checked inside.
                    params = _rows(session_id, first, datas)
                    params["token"] = self.owner.token
                    cursor = await db.execute(_FENCED_INSERT, params)
                    if cursor.rowcount == len(datas):
                        self._next_seq[session_id] = first + len(datas)
                        return first + len(datas) - 1
                # Not ours (or not known to be): claim a free lease, or say why not.
                async with db.transaction():
                    if accepting:
                        await self._check_open(db, session_id)
                    if not await self._holds(db, session_id, lock=True):
                        await self._claim(db, session_id)
                    self._next_seq.pop(session_id, None)
                    first = await self._seq(db, session_id)
                    await db.execute(_INSERT, _rows(session_id, first, datas))
        except psycopg.errors.UniqueViolation:
            raise self._conflict(session_id, first or 0) from None
        except BaseException:
            self._next_seq.pop(session_id, None)  # read where the log is before the next append
            raise
        self._next_seq[session_id] = first + len(datas)
        return first + len(datas) - 1

    def _conflict(self, session_id: str, seq: int) -> StoreError:
        # Only a writer that ignores leases (another program, an old tether) gets here.
        self._next_seq.pop(session_id, None)
        return StoreError(
            ErrorCode.SESSION_CONFLICT,
            f'session "{session_id}" already has an event {seq}: another writer appended to it',
            where=self.where,
            remedy="let one process at a time run a session; nothing was written",
        )

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        async with self._connection() as db:
            rows = await (
                await db.execute(
                    "SELECT seq, data FROM tether_events WHERE session_id = %s AND seq > %s "
                    "ORDER BY seq LIMIT %s",
                    (session_id, after, limit),
                )
            ).fetchall()
            if not rows and not await self._exists(db, session_id):
                raise session_not_found(session_id)
        stored: list[StoredEvent] = []
        expected = after + 1
        for seq, data in rows:
            if seq != expected:
                raise self._corrupt(session_id, expected, f"event {expected} is missing")
            try:
                event = parse_event(data)
            except ValidationError as exc:
                raise self._corrupt(session_id, seq, _reason(exc)) from exc
            stored.append(StoredEvent(seq, event))
            expected += 1
        return stored

    async def sessions(
        self, *, parent: str | None = None, limit: int | None = None
    ) -> list[SessionHeader]:
        where = "" if parent is None else "WHERE parent_session = %(parent)s "
        async with self._connection() as db:
            rows = await (
                await db.execute(
                    f"SELECT {_HEADER_COLUMNS} FROM tether_sessions {where}"
                    "ORDER BY created_at DESC, id LIMIT %(limit)s".encode(),
                    {"parent": parent, "limit": limit},
                )
            ).fetchall()
        return [self._header(row) for row in rows]

    async def delete(self, session_id: str) -> None:
        async with self._transaction() as db:
            if not await self._exists(db, session_id):
                raise session_not_found(session_id)
            lease = await self._lease(db, session_id, lock=True)
            if lease is not None and lease[0].token != self.owner.token:
                holder, expires_at, now = lease
                if holder.alive(expires_at, now=now):  # a dead owner's session may be undone
                    raise session_busy(session_id, holder, alive=True, where=self.where)
            for table, column in _SESSION_ROWS:
                await db.execute(f"DELETE FROM {table} WHERE {column} = %s".encode(), (session_id,))
        self._next_seq.pop(session_id, None)

    # -- ending sessions (tether.contracts.SessionLifecycle) ---------------------------------

    async def _check_open(self, db: Connection, session_id: str) -> None:
        """``SESSION_CLOSED`` if the session is closed (``SESSION_NOT_FOUND`` if absent); its
        row share-locked until the transaction ends."""
        cursor = await db.execute(
            "SELECT closed_at FROM tether_sessions WHERE id = %s FOR SHARE", (session_id,)
        )
        row = await cursor.fetchone()
        if row is None:
            raise session_not_found(session_id)
        if row[0] is not None:
            raise session_closed(session_id, float(row[0]), where=self.where)

    async def _ids(self, db: Connection, query: str, session_id: str) -> list[str]:
        rows = await (await db.execute(query.encode(), (session_id,))).fetchall()
        return [str(sid) for (sid,) in rows]

    async def _close_open(self, db: Connection, ids: Sequence[str], at: float) -> tuple[str, ...]:
        """Inside a transaction: close those of ``ids`` still open and drop their mail."""
        if not ids:
            return ()
        cursor = await db.execute(
            "UPDATE tether_sessions SET closed_at = %s "
            "WHERE id = ANY(%s::text[]) AND closed_at IS NULL RETURNING id",
            (at, list(ids)),
        )
        now = {str(sid) for (sid,) in await cursor.fetchall()}
        closed = tuple(sid for sid in ids if sid in now)
        await db.execute(
            "DELETE FROM tether_mailbox WHERE session_id = ANY(%s::text[])", (list(closed),)
        )
        return closed

    async def close_session(self, session_id: str, *, at: float) -> tuple[str, ...]:
        async with self._transaction() as db:  # the whole tree closed, its mail dropped, or none
            if not await self._exists(db, session_id):
                raise session_not_found(session_id)
            return await self._close_open(db, await self._ids(db, _LIFETIME, session_id), at)

    async def delete_session(
        self, session_id: str, *, at: float, tree: bool = False
    ) -> SessionRemoval:
        async with self._transaction() as db:  # the whole removal, or nothing of it
            if not await self._exists(db, session_id):
                raise session_not_found(session_id)
            doomed = await self._ids(db, _SUBTREE, session_id) if tree else [session_id]
            # Locked in id order (two removals never wait on each other in a cycle).
            await db.execute(
                "SELECT id FROM tether_sessions WHERE id = ANY(%s::text[]) ORDER BY id FOR UPDATE",
                (doomed,),
            )
            for sid in doomed:
                await self._refuse_held_open(db, sid)
            gone = set(doomed)
            lifetime = [s for s in await self._ids(db, _LIFETIME, session_id) if s not in gone]
            closed = await self._close_open(db, lifetime, at)
            for table, column in _SESSION_ROWS:
                await db.execute(
                    f"DELETE FROM {table} WHERE {column} = ANY(%s::text[])".encode(), (doomed,)
                )
        for sid in doomed:
            self._next_seq.pop(sid, None)
        return SessionRemoval(deleted=tuple(doomed), closed=closed)

    async def _refuse_held_open(self, db: Connection, session_id: str) -> None:
        """``SESSION_BUSY`` if another live process holds ``session_id`` and it is open."""
        lease = await self._lease(db, session_id, lock=True)
        if lease is None or lease[0].token == self.owner.token:
            return
        holder, expires_at, now = lease
        if not holder.alive(expires_at, now=now):
            return
        cursor = await db.execute(
            "SELECT closed_at FROM tether_sessions WHERE id = %s", (session_id,)
        )
        row = await cursor.fetchone()
        if row is not None and row[0] is None:
            raise held_open(session_id, holder, where=self.where)

    async def _exists(self, db: Connection, session_id: str) -> bool:
        cursor = await db.execute("SELECT 1 FROM tether_sessions WHERE id = %s", (session_id,))
        return await cursor.fetchone() is not None

    # -- leases -----------------------------------------------------------------------------

    async def _lease(
        self, db: Connection, session_id: str, *, lock: bool = False
    ) -> tuple[LeaseOwner, float, float] | None:
        """The lease row (owner, expiry) and the server's clock; ``lock``: ``FOR UPDATE``."""
        query = _LEASE + (" FOR UPDATE" if lock else "")
        row = await (await db.execute(query.encode(), (session_id,))).fetchone()
        if row is None:
            return None
        host, pid, started, token, expires_at, now = row
        owner = LeaseOwner(host=host, pid=pid, started=started, token=token)
        return owner, float(expires_at), float(now)

    async def _holds(self, db: Connection, session_id: str, *, lock: bool = False) -> bool:
        query = "SELECT 1 FROM tether_leases WHERE session_id = %s AND token = %s"
        cursor = await db.execute(
            (query + (" FOR SHARE" if lock else "")).encode(), (session_id, self.owner.token)
        )
        return await cursor.fetchone() is not None

    async def _insert_lease(self, db: Connection, session_id: str) -> bool:
        """Take the free lease of ``session_id``; False when someone else holds it."""
        owner = self.owner
        cursor = await db.execute(
            "INSERT INTO tether_leases (session_id, host, pid, started, token, expires_at) "
            f"VALUES (%s, %s, %s, %s, %s, {_NOW} + %s) ON CONFLICT (session_id) DO NOTHING",
            (session_id, owner.host, owner.pid, owner.started, owner.token, self.lease_ttl),
        )
        return cursor.rowcount == 1

    async def _claim(self, db: Connection, session_id: str) -> None:
        """Inside a transaction: make sure this store holds the lease before it writes. A free
        lease is taken; another owner's (even a dead one's) is ``SESSION_BUSY``."""
        lease = await self._lease(db, session_id, lock=True)
        if lease is None:
            if not await self._exists(db, session_id):
                raise session_not_found(session_id)
            if await self._insert_lease(db, session_id):
                self._next_seq.pop(session_id, None)  # others may have written while it was free
                return
            lease = await self._lease(db, session_id, lock=True)  # another store took it first
            if lease is None:  # and gave it back already: a race lost twice is a busy store
                raise self._retry_later(session_id)
        holder, expires_at, now = lease
        if holder.token != self.owner.token:
            raise session_busy(
                session_id, holder, alive=holder.alive(expires_at, now=now), where=self.where
            )

    def _retry_later(self, session_id: str) -> StoreError:
        return StoreError(
            ErrorCode.STORE_BUSY,
            f'the lease of session "{session_id}" changed hands while it was being taken',
            where=self.where,
            remedy="another process is taking and releasing it right now; try again",
        )

    async def acquire(self, session_id: str) -> bool:
        async with self._connection() as db:
            if await self._holds(db, session_id):
                return False  # already ours: nothing to write
            async with db.transaction():
                lease = await self._lease(db, session_id, lock=True)
                if lease is None or lease[0].token == self.owner.token:
                    await self._claim(db, session_id)  # a free lease is taken
                    return False
                holder, expires_at, now = lease
                if holder.alive(expires_at, now=now):
                    raise session_busy(session_id, holder, alive=True, where=self.where)
                # The row is locked: of several takers, exactly one finds the dead token.
                me = self.owner
                cursor = await db.execute(
                    f"UPDATE tether_leases SET host = %s, pid = %s, started = %s, token = %s, "
                    f"expires_at = {_NOW} + %s WHERE session_id = %s AND token = %s",
                    (
                        me.host,
                        me.pid,
                        me.started,
                        me.token,
                        self.lease_ttl,
                        session_id,
                        holder.token,
                    ),
                )
                if cursor.rowcount != 1:
                    raise session_busy(session_id, holder, alive=True, where=self.where)
        self._next_seq.pop(session_id, None)  # the dead owner may have written last
        return True

    async def release(self, session_id: str) -> None:
        async with self._connection() as db:
            await db.execute(
                "DELETE FROM tether_leases WHERE session_id = %s AND token = %s",
                (session_id, self.owner.token),
            )
        self._next_seq.pop(session_id, None)  # once released, others may write
        self._forget_writer(session_id)

    def _forget_writer(self, session_id: str) -> None:
        lock = self._writing.get(session_id)
        if lock is not None and not lock.locked() and not lock.statistics().tasks_waiting:
            del self._writing[session_id]

    async def renew(self) -> None:
        """Push the expiry of this store's leases (and budget claims: in the same statement)."""
        if not self._connected:
            return  # never connected: no lease to renew
        leases = f"UPDATE tether_leases SET expires_at = {_NOW} + %(ttl)s WHERE token = %(token)s"
        if self._claimed:
            leases = (
                f"WITH claims AS (UPDATE tether_budget_claims SET expires_at = {_NOW} + %(ttl)s "
                f"WHERE token = %(token)s) {leases}"
            )
        async with self._connection() as db:
            await db.execute(leases.encode(), {"ttl": self.lease_ttl, "token": self.owner.token})

    async def holder(self, session_id: str) -> LeaseOwner | None:
        async with self._connection() as db:
            lease = await self._lease(db, session_id)
            if lease is None:
                if not await self._exists(db, session_id):
                    raise session_not_found(session_id)
                return None
        owner, expires_at, now = lease
        if owner.token == self.owner.token or owner.alive(expires_at, now=now):
            return owner
        return None

    # -- the budget ledger (tether.contracts.BudgetLedger) -----------------------------------

    @asynccontextmanager
    async def _holder(self, holder: str) -> AsyncGenerator[HolderLedger]:
        """One transaction on ``holder``: its row locked and read, with its claims; what the
        block changed in the ``HolderLedger`` is written before the commit."""
        async with self._transaction() as db:
            row = await (await db.execute(_LEDGER_ROW, (holder,))).fetchone()
            if row is None:
                await db.execute(
                    "INSERT INTO tether_budget_ledger (holder) VALUES (%s) "
                    "ON CONFLICT (holder) DO NOTHING",
                    (holder,),
                )
                row = await (await db.execute(_LEDGER_ROW, (holder,))).fetchone()
            assert row is not None
            spent, known, now = row
            claims: dict[str, ClaimRow] = {}
            for token, host, pid, started, expires_at, exclusive, reserved in await (
                await db.execute(_LEDGER_CLAIMS, (holder,))
            ).fetchall():
                owner = LeaseOwner(host=host, pid=pid, started=started, token=token)
                claims[token] = ClaimRow(
                    owner, float(expires_at), bool(exclusive), load_spend(reserved)
                )
            ledger = HolderLedger(
                holder,
                self.owner,
                load_spend(spent) if known else None,
                claims,
                now=float(now),
                ttl=self.lease_ttl,
            )
            yield ledger
            dropped, mine, spent_now, row_changed = ledger.changes()
            me = self.owner
            await db.execute(
                _LEDGER_WRITE,
                {
                    "holder": holder,
                    "dropped": dropped,
                    "token": me.token,
                    "host": me.host,
                    "pid": me.pid,
                    "started": me.started,
                    "expires_at": 0.0 if mine is None else mine.expires_at,
                    "exclusive": mine is not None and mine.exclusive,
                    "reserved": dump_spend(Spend() if mine is None else mine.reserved),
                    "keep": mine is not None,
                    "spent": None if spent_now is None else dump_spend(spent_now),
                    "known": spent_now is not None,
                    "row_changed": row_changed,
                },
            )
            if mine is not None:
                self._claimed = True

    async def budget_claim(self, holder: str) -> LedgerClaim:
        async with self._holder(holder) as ledger:
            return ledger.claim()

    async def budget_contended(self) -> tuple[list[str], float]:
        if not self._claimed:
            return [], self.lease_ttl
        async with self._connection() as db:
            rows = await (await db.execute(_CONTENDED, {"token": self.owner.token})).fetchall()
        holders: list[str] = []
        earliest, now = rows[0][0], float(rows[0][1])
        for _, _, holder, host, pid, started, token, expires_at in rows:
            if holder is None or holder in holders:
                continue
            owner = LeaseOwner(host=host, pid=pid, started=started, token=token)
            if owner.alive(float(expires_at), now=now):
                holders.append(holder)
        valid_for = self.lease_ttl if earliest is None else max(float(earliest) - now, 0.0)
        return holders, valid_for

    async def budget_share(self, holder: str, spent: Spend, reserved: Spend) -> None:
        async with self._holder(holder) as ledger:
            ledger.share(spent, reserved)

    async def budget_reserve(
        self,
        holder: str,
        need: Spend,
        budget: Budget,
        *,
        settle: tuple[Spend, Spend] | None = None,
    ) -> LedgerReserve:
        async with self._holder(holder) as ledger:
            return ledger.reserve(need, budget, settle)

    async def budget_release(self, holder: str, spent: Spend | None) -> None:
        if not self._claimed:
            return
        async with self._holder(holder) as ledger:
            ledger.release(spent)

    # -- the mailbox ------------------------------------------------------------------------

    async def post(self, session_id: str, message: InboxAccepted) -> None:
        check_mail(message)
        async with self._connection() as db:
            # The session row share-locked: a close in flight commits first, and is seen.
            cursor = await db.execute(
                "INSERT INTO tether_mailbox (session_id, message_id, data) SELECT %s, %s, %s "
                "FROM tether_sessions WHERE id = %s AND closed_at IS NULL FOR SHARE",
                (session_id, _text(message.message_id), _text(dump_event(message)), session_id),
            )
            if cursor.rowcount != 1:
                await self._check_open(db, session_id)  # closed, or not there
                raise session_not_found(session_id)

    async def mail(self) -> list[str]:
        async with self._connection() as db:
            rows = await (
                await db.execute(
                    "SELECT session_id FROM tether_mailbox GROUP BY session_id ORDER BY min(id)"
                )
            ).fetchall()
        return [session_id for (session_id,) in rows]

    async def mailbox(self, session_id: str) -> list[InboxAccepted]:
        async with self._connection() as db:
            rows = await self._mail_rows(db, session_id)
        return [self._parse_mail(session_id, data) for _, data in rows]

    async def _mail_rows(
        self, db: Connection, session_id: str, *, lock: bool = False
    ) -> list[tuple[int, str]]:
        query = "SELECT id, data FROM tether_mailbox WHERE session_id = %s ORDER BY id"
        cursor = await db.execute((query + (" FOR UPDATE" if lock else "")).encode(), (session_id,))
        rows = [(int(id_), str(data)) for id_, data in await cursor.fetchall()]
        if not rows and not await self._exists(db, session_id):
            raise session_not_found(session_id)
        return rows

    def _parse_mail(self, session_id: str, data: str) -> InboxAccepted:
        try:
            return InboxAccepted.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(
                ErrorCode.SESSION_CORRUPT,
                f'a message posted to session "{session_id}" cannot be read: {_reason(exc)}',
                where=self.where,
                remedy="the mailbox was written by another program or a newer tether; delete "
                "the row from tether_mailbox (nothing was taken)",
            ) from exc

    async def take_mail(self, session_id: str) -> list[InboxAccepted]:
        async with self._writer(session_id):
            return await self._take_mail(session_id)

    async def _take_mail(self, session_id: str) -> list[InboxAccepted]:
        first = 0
        try:
            async with self._connection() as db:
                row = await (
                    await db.execute(
                        "SELECT EXISTS (SELECT 1 FROM tether_leases WHERE session_id = %s "
                        "AND token = %s), "
                        "EXISTS (SELECT 1 FROM tether_mailbox WHERE session_id = %s)",
                        (session_id, self.owner.token, session_id),
                    )
                ).fetchone()
                if row is not None and row[0] and not row[1]:
                    return []  # the usual answer: one read, no transaction
                async with db.transaction():  # into the log and out of the mailbox, or neither
                    await self._claim(db, session_id)
                    rows = await self._mail_rows(db, session_id, lock=True)
                    messages = [self._parse_mail(session_id, data) for _, data in rows]
                    if not rows:
                        return []
                    first = await self._seq(db, session_id)
                    datas = [("inbox/accepted", data) for _, data in rows]
                    await db.execute(_INSERT, _rows(session_id, first, datas))
                    await db.execute(
                        "DELETE FROM tether_mailbox WHERE session_id = %s AND id <= %s",
                        (session_id, rows[-1][0]),
                    )
        except psycopg.errors.UniqueViolation:
            raise self._conflict(session_id, first) from None
        except BaseException:
            self._next_seq.pop(session_id, None)
            raise
        self._next_seq[session_id] = first + len(rows)
        return messages

    # -- the delta relay (LISTEN/NOTIFY) ---------------------------------------------------

    async def publish_deltas(self, batches: Sequence[DeltaBatch]) -> None:
        """``NOTIFY`` each batch on its session's channel (``tether/SESSION``), in pieces of at
        most ``DELTA_PIECE`` characters of text (a notification holds under 8,000 bytes);
        one statement for all of them. Delivered to the connections listening now, if any."""
        channels: list[str] = []
        payloads: list[str] = []
        for batch in batches:
            for run in split_deltas(batch.deltas, DELTA_PIECE):
                self._notified += 1  # a payload sent twice in one statement is delivered once
                channels.append(delta_channel(batch.session_id))
                payloads.append(
                    json.dumps(
                        {
                            "n": self._notified,
                            "m": batch.message_id,
                            "s": batch.step,
                            "d": [[d.kind, _text(d.text), d.index, d.name] for d in run],
                        },
                        ensure_ascii=False,
                    )
                )
        if not payloads:
            return
        async with self._connection() as db:
            await db.execute(
                "SELECT pg_notify(c, p) FROM unnest(%s::text[], %s::text[]) AS v(c, p)",
                (channels, payloads),
            )

    @asynccontextmanager
    async def follow_deltas(self, session_id: str) -> AsyncGenerator[AsyncIterator[DeltaBatch]]:
        """``LISTEN`` on the session's channel, on a connection of its own for the block."""
        with self._errors():
            db = await self._connect()
        try:
            with self._errors(), self._bounded(db):
                await db.execute(
                    sql.SQL("LISTEN {}").format(sql.Identifier(delta_channel(session_id)))
                )
            yield _batches(db, session_id)
        finally:
            with anyio.CancelScope(shield=True):
                await db.close()

    # -- closing ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        async with self._opening:
            if self._closed:
                return
            self._closed = True
            pool, self._pool = self._pool, None
        if not self._connected:
            return  # never connected: no lease to give back
        token = self.owner.token
        release: tuple[bytes, tuple[str, ...]] = (
            b"DELETE FROM tether_leases WHERE token = %s",
            (token,),
        )
        if self._claimed:  # its budget claims too; an exclusive one's holder is forgotten
            release = (
                b"WITH forgotten AS (UPDATE tether_budget_ledger SET spent = NULL, known = false "
                b"WHERE holder IN (SELECT holder FROM tether_budget_claims "
                b"WHERE token = %s AND exclusive)), "
                b"claims AS (DELETE FROM tether_budget_claims WHERE token = %s) "
                b"DELETE FROM tether_leases WHERE token = %s",
                (token, token, token),
            )
        try:
            # Shielded: a cancelled close still gives its sessions back; bounded in time.
            with anyio.CancelScope(shield=True):
                if pool is not None:
                    async with pool.connection(timeout=self.connect_timeout) as db:
                        with self._bounded(db):
                            await db.execute(*release)
                else:  # its pool was dropped when the server went out of reach
                    db = await self._connect()
                    try:
                        with self._bounded(db):
                            await db.execute(*release)
                    finally:
                        await db.close()
        except (psycopg.Error, PoolTimeout, StoreError) as exc:
            log.warning("could not release the leases of %s: %s", self.where, exc)
        finally:
            if pool is not None:
                with anyio.CancelScope(shield=True):
                    await pool.close(timeout=self.connect_timeout)

    # -- reading rows -----------------------------------------------------------------------

    def _header(self, row: tuple[Any, ...]) -> SessionHeader:
        try:
            return SessionHeader.model_validate(header_data(row))
        except (ValidationError, ValueError) as exc:
            reason = _reason(exc) if isinstance(exc, ValidationError) else f"caller: {exc}"
            raise StoreError(
                ErrorCode.SESSION_CORRUPT,
                f"the header of session {str(row[0])[:80]!r} cannot be read: {reason}",
                where=self.where,
                remedy="tether_sessions was written by another program or a newer tether; "
                "restore it from a backup or delete that row (nothing was changed)",
            ) from exc

    def _corrupt(self, session_id: str, seq: int, reason: str) -> StoreError:
        return StoreError(
            ErrorCode.SESSION_CORRUPT,
            f'event {seq} of session "{session_id}" cannot be read: {reason}',
            where=self.where,
            remedy="the log was written by another program or a newer tether; restore it from "
            "a backup or start a new session (nothing was skipped)",
        )


#: The most text, in characters, one delta notification carries (under 8,000 bytes in JSON).
DELTA_PIECE = 1000
_DELTA_KINDS = frozenset({"text", "reasoning", "tool_call", "retry"})


def delta_channel(session_id: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel of a session's deltas (a name of at most 63 bytes)."""
    name = f"tether/{session_id}"
    if len(name.encode()) <= 63:
        return name
    return "tether/" + hashlib.sha256(session_id.encode()).hexdigest()[:48]


async def _batches(db: Connection, session_id: str) -> AsyncIterator[DeltaBatch]:
    """The delta batches ``db`` is notified of; a notification that is not one (another
    program's) is logged and skipped."""
    async for notify in db.notifies():
        try:
            batch = _parse_batch(session_id, notify.payload)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            log.warning(
                "a notification on %s is not a delta batch (%s): %.200r",
                notify.channel,
                exc,
                notify.payload,
            )
            continue
        yield batch


def _parse_batch(session_id: str, payload: str) -> DeltaBatch:
    data = json.loads(payload)
    message_id, step, rows = data["m"], data["s"], data["d"]
    if not isinstance(message_id, str) or not isinstance(step, int) or not isinstance(rows, list):
        raise TypeError("m, s or d has the wrong type")
    deltas: list[ModelDelta] = []
    for row in rows:  # pyright: ignore[reportUnknownVariableType]
        kind, text, index, name = row  # pyright: ignore[reportUnknownVariableType]
        if kind not in _DELTA_KINDS or not isinstance(text, str) or not isinstance(index, int):
            raise ValueError(f"a delta is malformed: {row!r:.80}")
        deltas.append(
            ModelDelta(cast(DeltaKind, kind), text, index, name if isinstance(name, str) else None)
        )
    return DeltaBatch(session_id, message_id, step, tuple(deltas))


class _Member:
    """One append waiting for its batch's statement, then its outcome."""

    __slots__ = ("datas", "first", "seq", "session_id", "settled", "withdrawn")

    def __init__(self, session_id: str, first: int, datas: list[tuple[str, str]]) -> None:
        self.session_id = session_id
        self.first = first
        self.datas = datas
        self.seq: int | None = None
        self.settled = False
        # Its caller was cancelled before the statement was sent: the statement leaves it out.
        self.withdrawn = False

    @property
    def last(self) -> int:
        return self.first + len(self.datas) - 1

    def settle(self, seq: int | None) -> None:
        """Record what the statement did: the seq of the last event, or None (not written)."""
        self.seq = seq
        self.settled = True

    def outcome(self) -> int | None:
        return self.seq


class _Batch:
    """The appends one leader writes in one statement, in the order they were called."""

    __slots__ = ("done", "error", "members", "sent")

    def __init__(self, leader: _Member) -> None:
        self.members = [leader]
        self.done = anyio.Event()
        self.sent = False
        # What failed the whole statement (STORE_UNAVAILABLE, STORE_BUSY, a closed store).
        self.error: BaseException | None = None


async def _follow(batch: _Batch, me: _Member) -> int | None:
    """Wait for ``batch``'s leader, then ``me``'s outcome."""
    try:
        await batch.done.wait()
    except BaseException:
        if not batch.sent:
            me.withdrawn = True  # left out of the statement: unwritten, as a cancelled append
            raise
        # Sent: its rows may be in, and raising would say they are not (an agent would write
        # its events again). The cancellation comes again at the caller's next checkpoint.
        with anyio.CancelScope(shield=True):
            await batch.done.wait()
    if not me.settled and batch.error is not None:
        raise batch.error
    return me.outcome()


class _Timer:
    """Whether a call's bound ran out; when it does, the connection's socket is shut down."""

    __slots__ = ("fired",)

    def __init__(self) -> None:
        self.fired = False

    def fire(self, db: Connection) -> None:
        self.fired = True
        try:
            fd = db.pgconn.socket
        except psycopg.OperationalError:
            return  # closed already
        # A duplicate of the descriptor: shutting it down shuts the connection's socket (what
        # libpq waits on wakes up to an end of file) and closing it leaves libpq's descriptor.
        with socket.socket(fileno=os.dup(fd)) as sock, suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _milliseconds(seconds: float) -> str:
    """A duration as PostgreSQL reads a timeout setting: whole milliseconds, at least 1."""
    return str(max(1, round(seconds * 1000)))  # 0 would mean no limit at all


def _rows(session_id: str, first: int, datas: Sequence[tuple[str, str]]) -> dict[str, Any]:
    return {
        "session": session_id,
        "seqs": list(range(first, first + len(datas))),
        "types": [kind for kind, _ in datas],
        "datas": [data for _, data in datas],
    }


def _text(value: str) -> str:
    # PostgreSQL's text cannot hold NUL; JSON escapes it, but a header's text may carry one.
    return value.replace("\0", "\ufffd") if "\0" in value else value


def _header_row(header: SessionHeader) -> tuple[object, ...]:
    def text(value: str | None) -> str | None:
        return None if value is None else _text(replace_surrogates(value))

    return (
        _text(header.id),
        header.created_at,
        text(header.label),
        text(header.agent),
        header.parent_session,
        header.origin,
        header.delegation_depth,
        header.seed_length,
        text(header.model),
        dump_caller(header),
        header.detached,
        header.closed_at,
    )


def _reason(exc: ValidationError) -> str:
    detail = exc.errors()[0]
    return f"{detail['msg']} at {'.'.join(str(p) for p in detail['loc']) or 'top'}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
