"""One trace across the cluster: an ACP client prompts ``tether acp`` fronting a cluster with
a W3C ``traceparent`` in the prompt's ``_meta``; the message carries it through the workflow's
``send`` update into the shared store, and the worker that runs the turn continues the client's
trace. The root delegates to two children, which run as sessions of their own on either
worker: their turns are spans of the delegating calls, in the same trace. Each worker exports
its spans only when it exits (the batch processor's delay is ten minutes), so the spans prove
``tether worker`` flushes at exit too."""

from __future__ import annotations

import os
import signal
from typing import Any

import anyio
import pytest
from temporalio.client import WorkflowUpdateFailedError

import tether_temporal as temporal
from tests.otel.test_processes import _console_spans  # pyright: ignore[reportPrivateUsage]

from .conftest import TIMEOUT, Cluster
from .test_acp import served, text
from .test_children import DELEGATING

pytestmark = pytest.mark.anyio

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
OTEL = '\n[plugin.otel]\nexporter = "console"\nmetrics = false\nservice_name = "cluster"\n'


def traced(cluster: Cluster) -> None:
    profile = DELEGATING.format(
        store=cluster.store_url,
        address=cluster.address,
        queue=cluster.queue,
        max_sessions=2,
        extra=OTEL,
    ).replace('"subagent"]', '"subagent", "otel"]')
    cluster.profile.write_text(profile)


async def test_a_clients_trace_goes_on_across_workers_and_children(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
):
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")  # nothing exported before exit
    traced(cluster)
    workers = cluster.start_workers(2)
    with anyio.fail_after(TIMEOUT * 2):
        async with served(cluster) as (conn, client):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(cluster.folder), mcp_servers=[])).session_id
            reply = await conn.prompt(
                session_id=sid,
                prompt=text("first\nsecond"),
                traceparent=f"00-{TRACE_ID}-{CLIENT_SPAN}-01",
            )
            assert reply.stop_reason == "end_turn"
            answer = "".join(row[1] for row in client.seen(sid) if row[0] == "agent_message_chunk")
            assert answer == "children said: done: quick:first | done: quick:second"

        # A trace context that is not one (too long) is refused, and says why.
        settings, connected = cluster.settings(), await temporal.connect(cluster.settings())
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await temporal.send(connected, settings, sid, "hi", trace={"traceparent": "0" * 600})
        assert "at most 512 characters" in str(refused.value.cause)

    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=TIMEOUT) == 0
    spans: list[dict[str, Any]] = []
    for index in range(2):
        spans += _console_spans((cluster.folder / f"worker-{index}.txt").read_text())

    assert {span["context"]["trace_id"] for span in spans} == {f"0x{TRACE_ID}"}
    turns = [span for span in spans if span["name"] == "invoke_agent main"]
    (root,) = [span for span in turns if span["parent_id"] == f"0x{CLIENT_SPAN}"]
    assert root["attributes"]["gen_ai.conversation.id"] == sid
    calls = [span for span in spans if span["name"] == "execute_tool subagent"]
    assert len(calls) == 2
    assert {call["parent_id"] for call in calls} == {root["context"]["span_id"]}
    children = [span for span in turns if span is not root]
    assert sorted(child["parent_id"] for child in children) == sorted(
        call["context"]["span_id"] for call in calls
    )
    # Every span hangs from another of the trace (or the client's): one tree.
    ids = {span["context"]["span_id"] for span in spans} | {f"0x{CLIENT_SPAN}"}
    assert all(span["parent_id"] in ids for span in spans)
    assert len([span for span in spans if span["name"] == "execute_tool quick"]) == 2
