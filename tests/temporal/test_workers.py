"""Sessions driven through Temporal by real ``tether worker`` processes on a shared PostgreSQL
store: two workers share a task queue, a worker killed (SIGKILL) in a tool call or a model step
is replaced by another, every accepted message runs exactly once, and no tool runs twice."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

import tether_temporal as temporal
from tether.store import AssistantMessage, InboxAccepted, ToolResult, TurnEnded, UserMessage

from .conftest import TIMEOUT, Cluster, wait_for

pytestmark = pytest.mark.anyio

QUICK = """\
[[steps]]
tool_calls = [{{ name = "quick", arguments = {{ text = "{text}" }} }}]

[[steps]]
text = "done {text}"
"""


async def events(cluster: Cluster, session_id: str) -> list[object]:
    store = cluster.store()
    try:
        return [stored.event for stored in await store.events(session_id)]
    finally:
        await store.aclose()


async def send_and_wait(cluster: Cluster, client, session_id: str, text: str) -> str:
    store = cluster.store()
    try:
        message_id = await temporal.send(client, cluster.settings(), session_id, text)
        with anyio.fail_after(TIMEOUT):
            return await temporal.wait_for_turn(store, session_id, message_id)
    finally:
        await store.aclose()


async def test_two_workers_share_a_queue_and_each_message_runs_once(cluster):
    cluster.script(QUICK.format(text="job"))
    first, second = cluster.start_workers(2)
    client = await temporal.connect(cluster.settings())
    sessions = [temporal.new_session_id() for _ in range(4)]
    stops: dict[str, str] = {}

    async def one(session_id: str) -> None:
        stops[session_id] = await send_and_wait(cluster, client, session_id, "go")

    async with anyio.create_task_group() as group:
        for session_id in sessions:
            group.start_soon(one, session_id)
    assert stops == {session_id: "completed" for session_id in sessions}
    for session_id in sessions:
        log = await events(cluster, session_id)
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["go"]
        assert [e.content for e in log if isinstance(e, ToolResult)] == ["quick:job"]
        assert [e.content for e in log if isinstance(e, AssistantMessage)][-1] == "done job"
    ran = cluster.runs("job.quick")
    assert len(ran) == len(sessions)  # each session's tool ran once
    assert set(ran) <= {first.pid, second.pid}


async def test_a_worker_killed_in_a_tool_call_is_replaced_and_the_tool_never_runs_twice(
    cluster,
):
    cluster.script(
        '[[steps]]\ntool_calls = [{ name = "slow", arguments = { text = "once" } }]\n\n'
        '[[steps]]\ntext = "after"\n'
    )
    workers = {w.pid: w for w in cluster.start_workers(2)}
    client = await temporal.connect(cluster.settings())
    session_id = temporal.new_session_id()
    store = cluster.store()
    try:
        message_id = await temporal.send(client, cluster.settings(), session_id, "work")
        (victim,) = wait_for(lambda: cluster.runs("once.slow"), "the slow tool to start")
        os.kill(victim, signal.SIGKILL)
        workers[victim].wait(timeout=TIMEOUT)
        with anyio.fail_after(TIMEOUT):
            stop = await temporal.wait_for_turn(store, session_id, message_id)
        assert stop == "aborted"  # the turn the dead worker left open was closed
        log = await events(cluster, session_id)
        (result,) = [e for e in log if isinstance(e, ToolResult)]
        assert result.is_error
        assert "may or may not have run" in result.content
        assert cluster.runs("once.slow") == [victim]  # never run again
        # The session goes on, on the worker that is left.
        assert await send_and_wait(cluster, client, session_id, "again") == "completed"
        log = await events(cluster, session_id)
        assert [e.content for e in log if isinstance(e, AssistantMessage)][-1] == "after"
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["work", "again"]
        accepted = _accepted(log)
        assert len(accepted) == 2
        assert accepted[0] == message_id
    finally:
        await store.aclose()


async def test_a_worker_killed_in_an_idempotent_tool_call_is_replaced_and_the_turn_goes_on(
    cluster,
):
    cluster.script(
        '[[steps]]\ntool_calls = [{ name = "lookup", arguments = { text = "again" } }]\n\n'
        '[[steps]]\ntext = "found"\n'
    )
    workers = {w.pid: w for w in cluster.start_workers(2)}
    client = await temporal.connect(cluster.settings())
    session_id = temporal.new_session_id()
    store = cluster.store()
    try:
        message_id = await temporal.send(client, cluster.settings(), session_id, "look")
        (victim,) = wait_for(lambda: cluster.runs("again.lookup"), "the lookup to start")
        os.kill(victim, signal.SIGKILL)
        workers[victim].wait(timeout=TIMEOUT)
        with anyio.fail_after(TIMEOUT):
            stop = await temporal.wait_for_turn(store, session_id, message_id)
        assert stop == "completed"  # the other worker ran the call again and went on
        (survivor,) = set(workers) - {victim}
        assert cluster.runs("again.lookup") == [victim, survivor]
        log = await events(cluster, session_id)
        assert [e.content for e in log if isinstance(e, ToolResult)] == ["looked up again"]
        assert [e.content for e in log if isinstance(e, AssistantMessage)][-1] == "found"
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed"]
        assert _accepted(log) == [message_id]
    finally:
        await store.aclose()


def _accepted(log: list[object]) -> list[str]:
    return [e.message_id for e in log if isinstance(e, InboxAccepted)]


async def test_a_worker_killed_in_a_model_step_is_replaced_and_the_message_runs_once(cluster):
    # Killed before the first step's answer, the message was never claimed: the worker that
    # takes the session over runs it (asking the model again changes nothing).
    text = cluster.profile.read_text().replace(
        '"scripted:script.toml"', '"function:thinker:answer"'
    )
    cluster.profile.write_text(text)
    workers = {w.pid: w for w in cluster.start_workers(2)}
    client = await temporal.connect(cluster.settings())
    session_id = temporal.new_session_id()
    store = cluster.store()
    try:
        message_id = await temporal.send(client, cluster.settings(), session_id, "the sea")
        marker = cluster.markers / "thinking"
        wait_for(marker.exists, "the first model step to start")
        victim = int(wait_for(marker.read_text, "the thinking worker's pid"))
        assert victim in workers
        os.kill(victim, signal.SIGKILL)
        workers[victim].wait(timeout=TIMEOUT)
        with anyio.fail_after(TIMEOUT):
            stop = await temporal.wait_for_turn(store, session_id, message_id)
        assert stop == "completed"
        assert await send_and_wait(cluster, client, session_id, "the sky") == "completed"
        log = [s.event for s in await store.events(session_id)]
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["the sea", "the sky"]
        assert [e.content for e in log if isinstance(e, AssistantMessage)] == [
            "thought about the sea",
            "thought about the sky",
        ]
        assert len([e for e in log if isinstance(e, TurnEnded)]) == 2
    finally:
        await store.aclose()


async def test_a_worker_killed_in_a_later_model_step_is_replaced_and_the_turn_goes_on(cluster):
    # Killed while its second step asks the model: the first step's answer and tool result are
    # stored, so the worker that takes the session over asks the model again and the turn goes
    # on (a worker resumes cut turns, as Temporal retries a lost activity); the tool, whose
    # result was stored, is not run again.
    text = cluster.profile.read_text().replace(
        '"scripted:script.toml"', '"function:stepper:answer"'
    )
    cluster.profile.write_text(text)
    workers = {w.pid: w for w in cluster.start_workers(2)}
    client = await temporal.connect(cluster.settings())
    session_id = temporal.new_session_id()
    store = cluster.store()
    try:
        message_id = await temporal.send(client, cluster.settings(), session_id, "go")
        marker = cluster.markers / "second-step"
        wait_for(marker.exists, "the second model step to start")
        victim = int(wait_for(marker.read_text, "the thinking worker's pid"))
        assert victim in workers
        os.kill(victim, signal.SIGKILL)
        workers[victim].wait(timeout=TIMEOUT)
        with anyio.fail_after(TIMEOUT):
            stop = await temporal.wait_for_turn(store, session_id, message_id)
        assert stop == "completed"
        log = [s.event for s in await store.events(session_id)]
        assert [e.content for e in log if isinstance(e, ToolResult)] == ["quick:step"]
        assert cluster.runs("step.quick") == [victim]  # once, on the worker that was killed
        assert [e.content for e in log if isinstance(e, AssistantMessage)][-1] == "went on"
        (end,) = [e for e in log if isinstance(e, TurnEnded)]
        assert (end.stop_reason, end.steps) == ("completed", 2)
    finally:
        await store.aclose()
