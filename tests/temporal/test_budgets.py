"""Tree budgets on the cluster (docs/budgets.md): a root under a profile budget runs on one
``tether worker`` and its children on others (each child's workflow on the task queue); a
worker that drives a child reads the root's ``budget`` record from the store and spends under
it through the store's ledger (``BudgetLedger``: PostgreSQL, or a SQLite file the workers
share), so the tree's requests, in every process, are charged to the root's one budget and the
tree stops at its limit. A ``live_children`` limit counts a child from its start until its
task ends on whichever worker ran it."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
import pytest

import tether_temporal as temporal
from tether.budgets import BUDGET_EXCEEDED_DESCRIPTOR
from tether.store import AssistantMessage, DescriptorEvent, ToolResult, TurnEnded
from tether.testing import log_problems

from .conftest import TIMEOUT, Cluster

pytestmark = pytest.mark.anyio

PROFILE = """\
[tether]
plugins = ["postgres", "temporal", "work", "spawn", "subagent"]
plugin_dirs = ["plugins"]
store = "{store}"
budget = {{ {budget} }}

[plugin.temporal]
address = "{address}"
task_queue = "{queue}"
heartbeat_timeout = 2.0
idle_timeout = 60.0
max_sessions = {max_sessions}

[agent.main]
model = "function:budgeted:answer"
"""

#: The model of the tests here (``budgeted.py`` in the cluster's folder): the children's as
#: in :mod:`delegator`; the root delegates the lines of its prompt all at once, as there, or
#: one per step after a first line ``one by one``.
MODEL = """\
from tether.models import Message, ModelResponse
from tether.subagents.notices import DELEGATION_NOTE

import delegator


def answer(request):
    if any(m.content.startswith(DELEGATION_NOTE) for m in request.messages):
        return delegator.answer(request)
    first, *lines = [m for m in request.messages if m.role == "user"][0].content.splitlines()
    if first != "one by one":
        return delegator.answer(request)
    done = sum(m.role == "tool" for m in request.messages)
    if done == len(lines):
        return ModelResponse(text="noted")
    ask = Message(role="user", content=lines[done])
    return delegator.answer(request.model_copy(update={"messages": [ask]}))
"""


def budgeted(cluster: Cluster, budget: str, *, max_sessions: int = 2) -> None:
    (cluster.folder / "budgeted.py").write_text(MODEL)
    cluster.profile.write_text(
        PROFILE.format(
            store=cluster.store_url,
            address=cluster.address,
            queue=cluster.queue,
            budget=budget,
            max_sessions=max_sessions,
        )
    )


async def run_tree(cluster: Cluster, prompt: str) -> tuple[str, str, dict[str, list[Any]]]:
    """Send ``prompt`` to a new root session on the cluster, wait for its turn and its
    children's: its stop reason, its id, and the logs of the tree (root first)."""
    client = await temporal.connect(cluster.settings())
    store = cluster.store()
    try:
        root = temporal.new_session_id()
        message_id = await temporal.send(client, cluster.settings(), root, prompt)
        with anyio.fail_after(TIMEOUT):
            stop = await temporal.wait_for_turn(store, root, message_id)
        children = [h.id for h in await store.sessions(parent=root)]
        logs = {
            session: [s.event for s in await store.events(session)] for session in [root, *children]
        }
        return stop, root, logs
    finally:
        await store.aclose()


def answers(logs: dict[str, list[Any]]) -> int:
    return sum(isinstance(e, AssistantMessage) for log in logs.values() for e in log)


def refused(logs: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
    return {
        session: e.data
        for session, log in logs.items()
        for e in log
        if isinstance(e, DescriptorEvent) and e.kind == BUDGET_EXCEEDED_DESCRIPTOR
    }


class SQLiteCluster(Cluster):
    """A cluster whose workers share a SQLite file (one machine) instead of PostgreSQL."""

    def store(self):
        from tether.store import SQLiteStore

        return SQLiteStore(self.store_url.removeprefix("sqlite:"))


@pytest.fixture(params=["postgres", "sqlite"])
def stores(request, cluster: Cluster) -> Cluster:
    """``cluster`` on PostgreSQL, or on a SQLite file in its folder."""
    if request.param == "postgres":
        return cluster
    made = SQLiteCluster(
        cluster.folder, cluster.address, cluster.queue, f"sqlite:{cluster.folder / 'tree.db'}"
    )
    made.workers = cluster.workers  # stopped with the cluster's
    return made


def ledger(cluster: Cluster) -> dict[str, tuple[str | None, bool]]:
    """The store's budget ledger: each holder's key, its spend as written, whether known."""
    if isinstance(cluster, SQLiteCluster):
        import sqlite3

        with contextlib.closing(sqlite3.connect(cluster.store_url.removeprefix("sqlite:"))) as db:
            rows = db.execute("SELECT holder, spent, known FROM budget_ledger").fetchall()
        return {holder: (spent, bool(known)) for holder, spent, known in rows}
    import psycopg

    with psycopg.connect(cluster.store_url) as db:
        rows = db.execute("SELECT holder, spent, known FROM tether_budget_ledger").fetchall()
    return {holder: (spent, known) for holder, spent, known in rows}


def stops(log: list[Any]) -> list[str]:
    return [e.stop_reason for e in log if isinstance(e, TurnEnded)]


THREE = "child 0\nchild 1\nchild 2"


@pytest.mark.parametrize("limit", [5, 7])
async def test_children_on_other_workers_spend_the_roots_budget_and_stop_at_its_limit(
    stores: Cluster, limit: int
):
    """The tree asks 8 requests without a budget (the root 2, each child 2). Under 5 the
    children's second requests are refused but one; under 7 every child completes and the
    root's second request is the one refused."""
    budgeted(stores, f"requests = {limit}")
    workers = stores.start_workers(2)
    stop, root, logs = await run_tree(stores, THREE)
    assert answers(logs) == limit
    assert stop == "error"
    (last,) = [e for e in logs[root] if isinstance(e, TurnEnded)]
    assert "[BUDGET_EXCEEDED]" in (last.error or "")
    found = refused(logs)
    assert root in found
    for data in found.values():
        assert data == {
            "holder": root,
            "limit": "requests",
            "allowed": limit,
            "used": limit,
            "need": 1,
        }
    children = [s for s in logs if s != root]
    assert len(children) == 3
    # Each child's tool ran at most once, on a worker; what the children were answered
    # is what the budget left after the root's first request, wherever they ran.
    ran = [stores.runs(f"child {n}.quick") for n in range(3)]
    assert all(len(pids) <= 1 for pids in ran), ran
    pids = {pid for pids in ran for pid in pids}
    assert pids
    assert pids <= {w.pid for w in workers}
    spent = {c: sum(isinstance(e, AssistantMessage) for e in logs[c]) for c in children}
    assert sum(spent.values()) == limit - 1, spent
    completed = {c for c in children if stops(logs[c]) == ["completed"]}
    assert {c for c in children if spent[c] == 2} == completed
    assert set(children) - completed <= set(found)  # each other child was refused
    if limit == 7:
        # Every child completed, in both processes (two drives per worker: the root takes
        # one), and the root's worker knew it: its own second request was the eighth.
        assert len(completed) == 3
        assert len(pids) == 2
        assert set(found) == {root}
    # The workers shared the root's budget through the store's ledger: one holder, the root's.
    rows = ledger(stores)
    ((key, (written, known)),) = rows.items()
    assert key.split("@")[0] == root
    assert known
    assert written is not None
    assert json.loads(written)["requests"] == limit
    assert json.loads(written)["children"] == 3
    for session, log in logs.items():
        assert log_problems(log) == [], session


async def test_live_children_on_other_workers_count_while_they_work_and_no_longer(cluster):
    """``live_children = 1``, and one drive per worker (the root's worker cannot take its
    children): of three children delegated at once, one works and the other two are refused
    (each start counts at once, before its session is written); delegated one at a time, each
    starts once the one before ended on the other worker."""
    budgeted(cluster, "live_children = 1", max_sessions=1)
    cluster.start_workers(2)
    stop, root, logs = await run_tree(cluster, THREE)
    assert stop == "completed"
    told = sorted(e.content for e in logs[root] if isinstance(e, ToolResult))
    assert [t.startswith("done: quick:child") for t in told] == [True, False, False], told
    assert all("[BUDGET_EXCEEDED]" in t and "children are working already" in t for t in told[1:])
    assert len(logs) == 2  # the refused children were never created

    stop, root, logs = await run_tree(cluster, "one by one\nchild 3\nchild 4\nchild 5")
    assert stop == "completed"
    told = [e.content for e in logs[root] if isinstance(e, ToolResult)]
    assert told == [f"done: quick:child {n}" for n in (3, 4, 5)]
    assert len(logs) == 4
