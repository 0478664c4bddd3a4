"""A process that drives one child of a tree directly (as a cluster worker drives the children
it is given), for the budget tests: run as a script, not collected by pytest.

``drive_child.py PROFILE DB CHILD_ID``: open the store, compose the child's agent on its own
session and send it ``more`` until a turn ends with ``BUDGET_EXCEEDED`` (at most 200 turns);
print ``DONE <turns>``. Its ancestors' budgets are read from the store (its parent is driven
by another process) and shared with that process through the store's ledger.
"""

from __future__ import annotations

import sys

import anyio

from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.testing import make_kernel

sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[1]).parent))

from tests.budgets.tree import PLUGINS


async def main(profile: str, db: str, child: str) -> None:
    kernel = make_kernel(profile, PLUGINS)
    store = SQLiteStore(db)
    try:
        async with Runtime.open(kernel, store) as runtime:
            agent = await runtime.compose(session_id=child)
            turns = 0
            async with runtime.hold(agent) as held:
                print("READY", flush=True)
                while turns < 200:
                    turns += 1
                    await held.run(["more"])
                    if "BUDGET_EXCEEDED" in (agent.loop.last_error or ""):
                        break
            print("DONE", turns, agent.loop.last_error, flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
