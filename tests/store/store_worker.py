"""A separate process for the store tests: ``python store_worker.py MODE DB [ARG]``.

``DB`` is a SQLite file, or a ``postgresql://`` URL for the PostgreSQL store.

Every mode prints ``READY`` once it is set up, then:

* ``hold SESSION``: holds the session's lease (creating the session if needed) and sleeps;
* ``race SESSION``: for each line on stdin, calls ``acquire`` and prints ``took`` (taken over),
  ``free`` (it was free or already ours) or ``busy``;
* ``open SESSION``: waits for a line on stdin, opens the store (a new file, perhaps), creates the
  session with one event, appends another, and prints ``ok``;
* ``lock SECONDS``: holds the file's write lock (``BEGIN IMMEDIATE``) that long, writing nothing.
"""

from __future__ import annotations

import sqlite3
import sys
import time

import anyio

from tether.errors import ErrorCode, StoreError
from tether.store import SessionHeader, SessionStore, SQLiteStore, TurnStarted


def open_store(db: str) -> SessionStore:
    if db.startswith("postgresql"):
        from tether_postgres import PostgresStore

        return PostgresStore(db)
    return SQLiteStore(db)


def say(line: str) -> None:
    print(line, flush=True)


async def hold(db: str, session_id: str) -> None:
    store = open_store(db)
    try:
        await store.create(SessionHeader(id=session_id, created_at=time.time()))
    except StoreError as exc:
        if exc.code is not ErrorCode.SESSION_EXISTS:
            raise
        await store.acquire(session_id)
    await store.append(session_id, [TurnStarted(turn=1)])  # a turn it never ends
    say("READY")
    await anyio.sleep(3600)


async def race(db: str, session_id: str) -> None:
    store = open_store(db)
    say("READY")
    while sys.stdin.readline():
        try:
            say("took" if await store.acquire(session_id) else "free")
        except StoreError as exc:
            if exc.code is not ErrorCode.SESSION_BUSY:
                raise
            say("busy")


async def open_new(db: str, session_id: str) -> None:
    say("READY")
    sys.stdin.readline()
    store = open_store(db)
    await store.create(SessionHeader(id=session_id, created_at=time.time()), [TurnStarted(turn=1)])
    await store.append(session_id, [TurnStarted(turn=2)])
    await store.aclose()
    say("ok")


def lock(db: str, seconds: float) -> None:
    connection = sqlite3.connect(db, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    say("READY")
    time.sleep(seconds)
    connection.execute("ROLLBACK")
    connection.close()


def main() -> None:
    mode, db, arg = sys.argv[1:4]
    if mode == "lock":
        lock(db, float(arg))
    else:
        anyio.run({"hold": hold, "race": race, "open": open_new}[mode], db, arg)


if __name__ == "__main__":
    main()
