"""The caller travels with a cluster message (docs/callers.md, docs/scale-out.md): who submits a
message to a session's workflow is who the worker's agent runs it for, vouched for by the
cluster (``via`` ``cluster``); a message written before callers were carried still reads."""

from __future__ import annotations

import anyio
import pytest
from temporalio.converter import DataConverter

import tether_temporal as temporal
from tether.contracts import Caller
from tether.store import InboxAccepted, UserMessage
from tether_temporal._client import caller_data
from tether_temporal._host import TemporalHost
from tether_temporal._workflow import SessionMessage, SessionStart

from .conftest import TIMEOUT, Cluster

pytestmark = pytest.mark.anyio

ANSWER = '[[steps]]\ntext = "noted"\n\n[[steps]]\ntext = "noted again"\n'
ALICE = Caller(id="os:alice", name="Alice", via="cli", claims={"team": "billing"})
BOB = Caller(id="acp:bob", via="acp", claims={"team": "support", "plan": "pro"})


async def _log(cluster: Cluster, session_id: str) -> tuple[object, list[object]]:
    store = cluster.store()
    try:
        header = await store.header(session_id)
        return header, [stored.event for stored in await store.events(session_id)]
    finally:
        await store.aclose()


async def test_the_submitters_caller_reaches_the_workers_agent_vouched_by_the_cluster(cluster):
    cluster.script(ANSWER)
    cluster.worker()
    client = await temporal.connect(cluster.settings())
    session_id = temporal.new_session_id()
    store = cluster.store()
    try:
        first = await temporal.send(client, cluster.settings(), session_id, "one", caller=ALICE)
        with anyio.fail_after(TIMEOUT):
            assert await temporal.wait_for_turn(store, session_id, first) == "completed"
        # Another sender continues the session: its message runs with its caller.
        host = TemporalHost(cluster.settings(), client)
        second = await host.send(session_id, "two", caller=BOB)
        with anyio.fail_after(TIMEOUT):
            assert await temporal.wait_for_turn(store, session_id, second) == "completed"
    finally:
        await store.aclose()
    header, log = await _log(cluster, session_id)
    alice = Caller(id="os:alice", name="Alice", via="cluster", claims={"team": "billing"})
    bob = Caller(id="acp:bob", via="cluster", claims={"team": "support", "plan": "pro"})
    assert header.caller == alice  # the initiator: who sent the message that created it
    accepted = [e for e in log if isinstance(e, InboxAccepted)]
    assert [(e.message_id, e.source.caller) for e in accepted] == [(first, alice), (second, bob)]
    said = [(e.content, e.source.caller) for e in log if isinstance(e, UserMessage)]
    assert said == [("one", alice), ("two", bob)]


async def test_a_message_without_a_caller_runs_with_none(cluster):
    cluster.script(ANSWER)
    cluster.worker()
    client = await temporal.connect(cluster.settings())
    session_id = temporal.new_session_id()
    store = cluster.store()
    try:
        sent = await temporal.send(client, cluster.settings(), session_id, "anonymous")
        with anyio.fail_after(TIMEOUT):
            assert await temporal.wait_for_turn(store, session_id, sent) == "completed"
    finally:
        await store.aclose()
    header, log = await _log(cluster, session_id)
    assert header.caller is None
    assert [e.source.caller for e in log if isinstance(e, InboxAccepted)] == [None]


def test_a_message_and_a_start_written_before_callers_were_carried_still_read():
    """What a workflow's history holds from before (no ``caller`` field) decodes: no caller."""
    converter = DataConverter.default.payload_converter
    old_message = converter.to_payloads(
        [{"message_id": "msg_1", "content": "hi", "delivery": "turn", "sender": None}]
    )
    old_start = converter.to_payloads([{"session_id": "ses_0123456789abcdef", "seen": ["a"]}])
    (message,) = converter.from_payloads(old_message, [SessionMessage])
    (start,) = converter.from_payloads(old_start, [SessionStart])
    assert message == SessionMessage(message_id="msg_1", content="hi")
    assert message.caller is None
    assert (start.session_id, start.seen, start.caller) == ("ses_0123456789abcdef", ["a"], None)


def test_a_message_carries_its_caller_without_the_surface_that_vouched():
    """The worker vouches (``cluster``): what the submitter's surface was does not travel."""
    converter = DataConverter.default.payload_converter
    sent = SessionMessage(message_id="msg_2", content="hi", caller=caller_data(ALICE))
    (payload,) = converter.to_payloads([sent])
    (read,) = converter.from_payloads([payload], [SessionMessage])
    assert read.caller == {"id": "os:alice", "name": "Alice", "claims": {"team": "billing"}}
