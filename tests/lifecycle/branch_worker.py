"""A process that branches or rewinds a session and is killed half-way: ``python
branch_worker.py MODE PROFILE DB SESSION TURN``, for the crash tests of branch and rewind.

MODE is ``branch`` (branch SESSION at turn TURN) or ``rewind`` (rewind SESSION to turn TURN),
or ``branch-whole``/``rewind-whole`` to run to the end. Otherwise the worker stops inside the
store's write, at the statement that writes the last event (the branch's lineage record, the
rewind event), every statement before it run and nothing committed (SQLite's own trace
callback, no change to the store): it prints ``MIDWAY`` and sleeps until it is killed. It
prints ``done ID`` when it finished.
"""

from __future__ import annotations

import sys
import time

import anyio

from tether.runtime import Runtime, branch_session, rewind_session
from tether.store import SQLiteStore
from tether.testing import make_kernel

#: What the statement writing each operation's last event carries.
_LAST = {"branch": '"kind":"branch"', "rewind": '"type":"rewind"'}


def say(line: str) -> None:
    print(line, flush=True)


def stall_at(mark: str):
    def stall(sql: str) -> None:
        if mark in sql:
            say("MIDWAY")
            time.sleep(3600)  # inside the write: what a crash here leaves is the test

    return stall


async def main(mode: str, profile: str, db: str, session_id: str, turn: int) -> None:
    store = SQLiteStore(db)
    operation = mode.removesuffix("-whole")
    if not mode.endswith("-whole"):
        store._db.set_trace_callback(stall_at(_LAST[operation]))  # pyright: ignore[reportPrivateUsage]
    runtime = Runtime(make_kernel(profile), store)
    say("READY")
    if operation == "branch":
        header = await branch_session(runtime, session_id, at_turn=turn)
        say(f"done {header.id}")
    else:
        await rewind_session(runtime, session_id, turn)
        say(f"done {session_id}")
    await store.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
