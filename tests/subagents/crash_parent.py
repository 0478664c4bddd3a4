"""A parent process for the crash test (run as a script, not collected by pytest).

``crash_parent.py first DB_PATH``: open a parent agent on a SQLite store, start a continuable
child whose model never answers its first turn, send it two follow-ups (each returns once the
child's inbox durably accepted it), print ``READY <parent> <child> <msg1> <msg2>`` and wait to
be killed.

``crash_parent.py nested DB_PATH``: the same one level down: the child starts a continuable
grandchild whose first turn never ends, sends it a follow-up, and ends its own turn waiting on
it; ``READY <parent> <child> <grandchild> <msg>``.

``crash_parent.py second DB_PATH PARENT_ID``: reopen the store and the parent, recover its
children, wait until the child settles and the parent is idle, print ``RECOVERED <JSON>`` (what
``recover`` returned: first, again at once, and once all settled) and exit 0. The child's model
now answers at once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

import tether_spawn
import tether_subagent_tools
from tether.models import FunctionModel, ModelRequest
from tether.runtime import compose_agent
from tether.store import SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_runtime, scaled, write_profile

PROFILE = """
[tether]
plugins = ["spawn", "subagent"]
[plugin.subagent]
background = "continuable"
[agent.main]
model = "scripted:none.toml"
"""
PROMPT = "the first task"
FOLLOW_UPS = ("follow-up one", "follow-up two")
#: A bound on everything the second process waits for, in seconds.
TIMEOUT = scaled(30.0)


def is_child(request: ModelRequest) -> bool:
    return any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)


def runtime(db: str) -> Any:
    path = write_profile(Path(db).parent / "profile", PROFILE)
    return make_runtime(
        path, {"spawn": tether_spawn, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )


async def first(db: str) -> None:
    entered = anyio.Event()

    async def answer(request: ModelRequest) -> str:
        if not is_child(request):
            return "parent answer"
        entered.set()
        await anyio.sleep(3600)  # the first turn never ends: the process is killed in it
        return "never"

    k = runtime(db)
    store = SQLiteStore(db)
    parent = await compose_agent(k, store, model=FunctionModel(answer))
    async with parent:
        started = await k.subagents.start_continuable(
            "spawn", SubagentStartRequest(prompt=PROMPT, parent=parent, label="crash child")
        )
        await entered.wait()  # the first turn is open and claimed its message
        continuation = k.subagents.continuation
        ids = [await continuation.followup(parent, started.child_id, text) for text in FOLLOW_UPS]
        print("READY", parent.session_id, started.child_id, *ids, flush=True)
        await anyio.sleep_forever()


async def nested(db: str) -> None:
    entered = anyio.Event()
    sent = anyio.Event()
    ids: list[str] = []

    async def answer(request: ModelRequest) -> str:
        if request.session_label == "grandchild":
            entered.set()
            await anyio.sleep(3600)  # killed in this turn
        if request.session_label == "crash child":
            me = next(a for a in k.live_agents.values() if a.header.label == "crash child")
            started = await k.subagents.start_continuable(
                "spawn", SubagentStartRequest(prompt=PROMPT, parent=me, label="grandchild")
            )
            await entered.wait()
            continuation = k.subagents.continuation
            ids.extend(
                [started.child_id, await continuation.followup(me, started.child_id, "deep")]
            )
            sent.set()
            return "waiting on my own child"
        return "parent answer"

    k = runtime(db)
    store = SQLiteStore(db)
    parent = await compose_agent(k, store, model=FunctionModel(answer))
    async with parent:
        started = await k.subagents.start_continuable(
            "spawn", SubagentStartRequest(prompt=PROMPT, parent=parent, label="crash child")
        )
        await sent.wait()
        await anyio.sleep(0.2)  # the child's turn ends; it is waiting on the grandchild
        print("READY", parent.session_id, started.child_id, *ids, flush=True)
        await anyio.sleep_forever()


async def second(db: str, parent_id: str) -> None:
    def answer(request: ModelRequest) -> str:
        last = request.messages[-1].content
        if is_child(request):
            return f"child answer to {last}"
        return "parent noted the notice"

    k = runtime(db)
    store = SQLiteStore(db)
    try:
        parent = await compose_agent(k, store, model=FunctionModel(answer), session_id=parent_id)
        continuation = k.subagents.continuation
        with anyio.fail_after(TIMEOUT):
            async with parent:
                restored = await continuation.recover(parent)
                again = await continuation.recover(parent)  # the children are live: nothing
                await continuation.wait_quiet(parent)
                after = await continuation.recover(parent)  # all claimed: nothing
        print("RECOVERED", json.dumps([restored, again, after]), flush=True)
    finally:
        await store.aclose()


def main(argv: list[str]) -> None:
    mode, db, *rest = argv
    if mode == "first":
        anyio.run(first, db)
    elif mode == "nested":
        anyio.run(nested, db)
    elif mode == "second":
        anyio.run(second, db, rest[0])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
