"""A process that ends sessions and is killed half-way: ``python lifecycle_worker.py MODE DB
SESSION``, for the crash tests of ``SessionLifecycle``.

``DB`` is a SQLite file or a ``postgresql://`` URL. MODE is ``close`` (close SESSION's tree),
``delete`` (delete SESSION, closing its children) or ``delete-tree`` (delete its whole tree).

On SQLite the worker stops inside the store's transaction at its last statement, every other
change made and uncommitted (SQLite's own trace callback, no change to the store): it prints
``MIDWAY`` and sleeps until it is killed. On PostgreSQL
the test's trigger stalls the transaction on the server instead; the worker prints ``READY``
before it calls the store. Without a kill it prints ``done`` at the end.
"""

from __future__ import annotations

import sys
import time

import anyio

from tether.store import SQLiteStore
from tether_postgres import PostgresStore

#: Where each removal stops: at its last statement, everything before it done, uncommitted.
_LAST = {"close": "DELETE FROM mailbox", "delete": "DELETE FROM sessions"}


def say(line: str) -> None:
    print(line, flush=True)


def stall_at(last: str):
    def stall(sql: str) -> None:
        if sql.startswith(last):
            say("MIDWAY")
            time.sleep(3600)  # inside the transaction: what a crash here leaves is the test

    return stall


def open_store(db: str, mode: str) -> SQLiteStore | PostgresStore:
    if db.startswith("postgresql"):
        return PostgresStore(db)
    store = SQLiteStore(db)
    last = _LAST["close" if mode == "close" else "delete"]
    store.lifetimes._db.set_trace_callback(stall_at(last))  # pyright: ignore[reportPrivateUsage]
    return store


async def main(mode: str, db: str, session_id: str) -> None:
    store = open_store(db, mode)
    say("READY")
    if mode == "close":
        await store.close_session(session_id, at=time.time())
    else:
        await store.delete_session(session_id, at=time.time(), tree=mode == "delete-tree")
    await store.aclose()
    say("done")


if __name__ == "__main__":
    mode, db, session_id = sys.argv[1:4]
    anyio.run(main, mode, db, session_id)
