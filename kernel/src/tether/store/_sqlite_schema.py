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
from ._sqlite_locks import SQLITE_BUSY_MS, Transaction, retry_blocking

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
)
SCHEMA_VERSION = len(MIGRATIONS)


def open_database(
    path: Path, *, synchronous: Literal["NORMAL", "FULL"], busy_timeout: float
) -> sqlite3.Connection:
    """Connect to ``path``, refuse a newer schema, switch to WAL and migrate to the current
    schema; a file locked by another program is waited for up to ``busy_timeout`` seconds."""
    db = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=SQLITE_BUSY_MS / 1000
    )
    wait = functools.partial(retry_blocking, path=path, budget=busy_timeout)
    try:
        # Before anything changes a file this tether may not understand.
        wait(lambda: _check_version(db, path))
        # Switching a file another process is creating to WAL can find it locked, too.
        wait(lambda: db.execute("PRAGMA journal_mode=WAL"))
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("PRAGMA foreign_keys=ON")
        while not wait(lambda: _migrate_step(db, path)):
            pass  # one step per transaction
    except BaseException:
        db.close()
        raise
    return db


def _version(db: sqlite3.Connection) -> int:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return version


def _check_version(db: sqlite3.Connection, path: Path) -> int:
    version = _version(db)
    if version > SCHEMA_VERSION:
        raise StoreError(
            ErrorCode.STORE_SCHEMA_UNSUPPORTED,
            f"session store schema version {version} is newer than this tether "
            f"understands ({SCHEMA_VERSION})",
            file=path,
            remedy="upgrade tether, or point the profile's store at another file",
        )
    return version


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
