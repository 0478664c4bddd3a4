"""The SQLite store's schema, its migrations, and opening a file that others may open at once.

Several processes may open one new file at the same moment (a parent and its children, a test
suite). Each migration step therefore takes the write lock first (``BEGIN IMMEDIATE``) and reads
the schema version again inside that transaction: whoever comes second finds the step done.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Literal

from ..errors import ErrorCode, StoreError
from ._sqlite_faults import foreign
from ._sqlite_locks import SQLITE_BUSY_MS, Transaction, raise_failure, retry_blocking

__all__ = ("MIGRATIONS", "SCHEMA_VERSION", "open_database")

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
    # 2: one driver per session (its lease) and a mailbox any process may post to.
    """
    CREATE TABLE leases (
        session_id TEXT PRIMARY KEY REFERENCES sessions (id),
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started REAL,
        token TEXT NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX leases_by_token ON leases (token);
    CREATE TABLE mailbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions (id),
        message_id TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX mailbox_by_session ON mailbox (session_id, id);
    """,
    # 3: the model spec a session runs (NULL: written before it was recorded).
    """
    ALTER TABLE sessions ADD COLUMN model TEXT;
    """,
    # 4: no index of leases by token. The table holds only the leases held now, so renewing a
    # process's leases scans a few rows, while the index cost every lease taken and given
    # back (each session's create and release) a second B-tree write.
    """
    DROP INDEX leases_by_token;
    """,
    # 5: the budget ledger (tether.contracts.BudgetLedger): each budget holder's settled spend
    # (spent: Spend JSON, NULL while unknown: the next claimant counts it from the logs) and
    # the claims of the owners spending under it (the owner as a lease names it, its expiry,
    # whether it counts alone in memory, what its requests in flight reserved).
    """
    CREATE TABLE budget_ledger (
        holder TEXT PRIMARY KEY,
        spent TEXT,
        known INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    CREATE TABLE budget_claims (
        holder TEXT NOT NULL,
        token TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started REAL,
        expires_at REAL NOT NULL,
        exclusive INTEGER NOT NULL,
        reserved TEXT NOT NULL,
        PRIMARY KEY (holder, token)
    ) WITHOUT ROWID;
    """,
    # 6: who created the session (its initiator, a Caller as JSON; NULL: nobody known, or
    # written before tether recorded callers), docs/callers.md.
    """
    ALTER TABLE sessions ADD COLUMN caller TEXT;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def open_database(
    path: Path, *, synchronous: Literal["NORMAL", "FULL"], busy_timeout: float
) -> sqlite3.Connection:
    """Connect to ``path``, refuse a newer schema or another program's database, switch to WAL
    and migrate to the current schema; a file locked by another program is waited for up to
    ``busy_timeout`` seconds. A file that cannot be used raises the ``StoreError`` that says
    why (``_sqlite_faults``)."""
    try:
        db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=SQLITE_BUSY_MS / 1000
        )
    except sqlite3.Error as exc:
        raise_failure(exc, path)
    wait = functools.partial(retry_blocking, path=path, budget=busy_timeout)
    try:
        # Before anything changes a file this tether may not understand.
        wait(lambda: _check_version(db, path))
        # Switching a file another process is creating to WAL can find it locked, too.
        wait(lambda: db.execute("PRAGMA journal_mode=WAL"))
        wait(lambda: db.execute(f"PRAGMA synchronous={synchronous}"))
        wait(lambda: db.execute("PRAGMA foreign_keys=ON"))
        while not wait(lambda: _migrate_step(db, path)):
            pass  # one step per transaction
        wait(lambda: _check_tables(db))
    except BaseException:
        db.close()
        raise
    return db


def _version(db: sqlite3.Connection) -> int:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return version


def _check_version(db: sqlite3.Connection, path: Path) -> int:
    version = _version(db)
    if version == 0:
        # Version 0 is a file no tether has migrated (a migration bumps the version in its own
        # transaction): new and empty, or another program's database, which is left alone.
        tables = _tables(db)
        # Read again: another process may have committed its first migration in between.
        if tables and _version(db) == 0:
            raise foreign(path, tables)
    if version > SCHEMA_VERSION:
        raise StoreError(
            ErrorCode.STORE_SCHEMA_UNSUPPORTED,
            f"session store schema version {version} is newer than this tether "
            f"understands ({SCHEMA_VERSION})",
            file=path,
            remedy="upgrade tether, or point the profile's store at another file",
        )
    return version


def _tables(db: sqlite3.Connection) -> list[str]:
    rows = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [name for (name,) in rows]


#: The columns each table of the current schema has, in the order the store reads them.
_COLUMNS: dict[str, str] = {
    "sessions": "id, created_at, label, agent, parent_session, origin, delegation_depth, "
    "seed_length, model",
    "events": "session_id, seq, type, data",
    "leases": "session_id, host, pid, started, token, expires_at",
    "mailbox": "id, session_id, message_id, data",
    "budget_ledger": "holder, spent, known",
    "budget_claims": "holder, token, host, pid, started, expires_at, exclusive, reserved",
}


def _check_tables(db: sqlite3.Connection) -> None:
    """Make sure the file has the tables and columns the store uses: a file whose version
    says "tether" but whose tables do not (another program that uses user_version too, a
    damaged file) fails here with ``STORE_CORRUPT`` instead of halfway through a command."""
    for table, columns in _COLUMNS.items():
        db.execute(f"SELECT {columns} FROM {table} LIMIT 0").fetchall()


def _migrate_step(db: sqlite3.Connection, path: Path) -> bool:
    """Run the next migration, if any, in its own transaction with its version bump (a crash
    mid-migration leaves the previous version); True once the schema is current."""
    if _version(db) == SCHEMA_VERSION:  # a committed version never goes back: no lock needed
        return True
    with Transaction(db):
        version = _check_version(db, path)  # again, under the write lock
        if version == SCHEMA_VERSION:
            return True  # another process migrated while we waited for the lock
        for statement in MIGRATIONS[version].split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version={version + 1}")
    return False
