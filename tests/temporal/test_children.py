"""Delegation on the cluster: a worker's one-shot children are sessions of their own, each
driven by its own workflow on the task queue, so any worker may run them (spawn, fork and the
specialists start children through ``Runtime.child_host``, which ``tether worker`` points at
the cluster).

A root delegates three children that land on different workers; a worker killed (SIGKILL) in
a child's tool call is replaced, the tool never runs twice and the root is told the child was
interrupted; and the subagent provider conformance suite runs through the cluster (a parent in
this process, its children on two workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

import tether_temporal as temporal
from tether.agents import Agent
from tether.runtime import Runtime
from tether.store import AssistantMessage, Event, InboxAccepted, ToolResult, TurnEnded
from tether.testing import log_problems, make_kernel, tree_problems, write_profile
from tether.testing.subagent_provider_conformance import SubagentProviderConformance
from tether_spawn import SpawnProvider
from tether_temporal._host import TemporalHost

from .conftest import TIMEOUT, Cluster, make_cluster, wait_for

pytestmark = pytest.mark.anyio

DELEGATING = """\
[tether]
plugins = ["postgres", "temporal", "work", "spawn", "subagent"]
plugin_dirs = ["plugins"]
store = "{store}"

[plugin.temporal]
address = "{address}"
task_queue = "{queue}"
heartbeat_timeout = 2.0
idle_timeout = 60.0
max_sessions = {max_sessions}

[agent.main]
model = "function:delegator:answer"
{extra}"""


def delegating(cluster: Cluster, max_sessions: int, extra: str = "") -> None:
    cluster.profile.write_text(
        DELEGATING.format(
            store=cluster.store_url,
            address=cluster.address,
            queue=cluster.queue,
            max_sessions=max_sessions,
            extra=extra,
        )
    )


async def run_root(
    cluster: Cluster, prompt: str, *, foreground: bool = True
) -> tuple[str, list[Event], list[str]]:
    """Send ``prompt`` to a new root session; its turn's stop reason, its log, and its
    children's ids (whose logs are checked too when they ran in the foreground)."""
    client = await temporal.connect(cluster.settings())
    store = cluster.store()
    try:
        root = temporal.new_session_id()
        message_id = await temporal.send(client, cluster.settings(), root, prompt)
        with anyio.fail_after(TIMEOUT):
            stop = await temporal.wait_for_turn(store, root, message_id)
        log = [stored.event for stored in await store.events(root)]
        children = [header.id for header in await store.sessions(parent=root)]
        # A background child may still work, and its notice wait in the root's inbox.
        assert log_problems(log, settled=foreground) == []
        for child in children if foreground else ():
            assert log_problems([s.event for s in await store.events(child)]) == []
        return stop, log, children
    finally:
        await store.aclose()


async def test_a_root_delegates_three_children_that_land_on_different_workers(cluster):
    # Two drives per worker: the root takes one, so its three children cannot all run on
    # the root's worker.
    delegating(cluster, max_sessions=2)
    first, second = cluster.start_workers(2)
    stop, log, children = await run_root(cluster, "child 0\nchild 1\nchild 2")
    assert stop == "completed"
    assert len(children) == 3
    ran = [cluster.runs(f"child {n}.quick") for n in range(3)]
    assert all(len(pids) == 1 for pids in ran)  # each child's tool ran once
    pids = {pids[0] for pids in ran}
    assert pids <= {first.pid, second.pid}
    assert len(pids) == 2
    (answer,) = [e.content for e in log if isinstance(e, AssistantMessage) and e.content]
    assert answer == "children said: " + " | ".join(f"done: quick:child {n}" for n in range(3))


async def test_a_worker_killed_in_a_childs_tool_call_is_replaced_and_the_tool_never_runs_twice(
    cluster,
):
    # One drive per worker: the root's worker cannot take its child, and a third worker is
    # free to take the child over.
    delegating(cluster, max_sessions=1)
    cluster.start_workers(3)
    async with anyio.create_task_group() as group:
        outcome: list[tuple[str, list[Event], list[str]]] = []

        async def root() -> None:
            outcome.append(await run_root(cluster, "slow child"))

        group.start_soon(root)
        (victim,) = await anyio.to_thread.run_sync(
            lambda: wait_for(lambda: cluster.runs("slow child.slow"), "the child's slow tool")
        )
        os.kill(victim, signal.SIGKILL)
    ((stop, log, (child,)),) = outcome
    assert stop == "completed"
    assert cluster.runs("slow child.slow") == [victim]  # never run again
    store = cluster.store()
    try:
        child_log = [s.event for s in await store.events(child)]
    finally:
        await store.aclose()
    (result,) = [e for e in child_log if isinstance(e, ToolResult)]
    assert "interrupted" in result.content
    assert "may or may not have run" in result.content
    assert [e.stop_reason for e in child_log if isinstance(e, TurnEnded)] == ["aborted"]
    (told,) = [e.content for e in log if isinstance(e, ToolResult)]
    assert told.startswith("error: subagent run was cancelled: the process stopped")


async def test_sessions_send_from_a_third_process_reaches_a_continuable_child_on_a_worker(
    cluster,
):
    """A continuable child runs under its root on a worker; `tether sessions send CHILD` from
    another process goes to the cluster, and a worker killed while the child runs that
    follow-up is replaced: the message ran once, the tool never twice, the turn is repaired."""
    delegating(cluster, max_sessions=1, extra='[plugin.subagent]\nbackground = "continuable"\n')
    cluster.start_workers(2)
    stop, _, (child,) = await run_root(cluster, "bg child", foreground=False)
    assert stop == "completed"
    store = cluster.store()
    try:

        async def settled() -> bool:
            ends = [s.event for s in await store.events(child) if isinstance(s.event, TurnEnded)]
            return len(ends) == 1

        with anyio.fail_after(TIMEOUT):
            while not await settled():
                await anyio.sleep(0.1)
        assert cluster.runs("bg child.quick")  # the child ran on a worker

        sender = subprocess.Popen(
            [sys.executable, "-m", "tether", "sessions", "send", child, "slow follow-up",
             "--profile", str(cluster.profile)],
            cwd=cluster.folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=cluster.env(),
        )  # fmt: skip
        try:
            (victim,) = await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: cluster.runs("slow follow-up.slow"), "the follow-up")
            )
            os.kill(victim, signal.SIGKILL)
            out, err = await anyio.to_thread.run_sync(lambda: sender.communicate(timeout=TIMEOUT))
        finally:
            if sender.poll() is None:
                sender.kill()
                sender.wait()
        assert sender.returncode == 1, out + err  # the follow-up's turn was cut: aborted
        assert out.splitlines()[-1] == f"session {child}"
        assert cluster.runs("slow follow-up.slow") == [victim]  # never run again
        log = [s.event for s in await store.events(child)]
        accepted = [e.content for e in log if isinstance(e, InboxAccepted)]
        assert accepted.count("slow follow-up") == 1
        (cut,) = [e for e in log if isinstance(e, ToolResult) and "slow" in e.name]
        assert "may or may not have run" in cut.content
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed", "aborted"]
        assert await tree_problems(store, child) == {}
    finally:
        await store.aclose()


# ------------------------------------------------------------------ the conformance suite

CONFORMANCE = """\
[tether]
plugins = ["postgres", "temporal", "spawn"]
store = "{store}"

[plugin.temporal]
address = "{address}"
task_queue = "{queue}"
heartbeat_timeout = 1.5
idle_timeout = 60.0

[agent.main]
model = "function:tether.testing.subagent_provider_conformance:conformance_model"
"""

LOCAL = """\
[tether]
plugins = []

[agent.main]
model = "function:tether.testing.subagent_provider_conformance:conformance_model"
"""


@pytest.fixture(scope="module")
def conformance_cluster(tmp_path_factory, temporal_server, postgres_database) -> Iterator[Cluster]:
    import uuid

    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_database, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"'.encode())
    url = f"{postgres_database}?options=-csearch_path%3D{schema}"
    made = make_cluster(tmp_path_factory.mktemp("conformance"), temporal_server.address, url)
    made.profile.write_text(CONFORMANCE.format(store=url, address=made.address, queue=made.queue))
    try:
        made.start_workers(2)
        yield made
    finally:
        made.stop()


@pytest.fixture
async def cluster_parent(conformance_cluster: Cluster, tmp_path: Path) -> AsyncIterator[object]:
    """A parent in this process whose children go to the cluster."""
    kernel = make_kernel(write_profile(tmp_path, LOCAL))
    store = conformance_cluster.store()
    host = TemporalHost(conformance_cluster.settings())
    try:
        async with Runtime.open(kernel, store) as runtime:
            runtime.child_host = host

            async def make() -> Agent:
                return await runtime.compose()

            yield make
    finally:
        await host.aclose()
        await store.aclose()


class TestSpawnOnTheCluster(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return SpawnProvider()

    @pytest.fixture
    def make_parent(self, cluster_parent):  # pyright: ignore[reportIncompatibleMethodOverride]
        return cluster_parent
