"""The caller travels with a cluster message (docs/callers.md, docs/scale-out.md): who submits a
message to a session's workflow is who the worker's agent runs it for, vouched for by the
cluster (``via`` ``cluster``); a message written before callers were carried still reads."""

from __future__ import annotations

import anyio
import pytest
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError

import tether_temporal as temporal
from tether.contracts import Caller
from tether.errors import CallerError, ErrorCode, StoreError
from tether.runtime import Runtime
from tether.store import InboxAccepted, SQLiteStore
from tether.testing import make_kernel, write_profile
from tether_temporal._activities import SessionActivities
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
    _, log = await _log(cluster, session_id)
    alice = Caller(id="os:alice", name="Alice", via="cluster", claims={"team": "billing"})
    bob = Caller(id="acp:bob", via="cluster", claims={"team": "support", "plan": "pro"})
    accepted = [e for e in log if isinstance(e, InboxAccepted)]
    assert [(e.message_id, e.source.caller) for e in accepted] == [(first, alice), (second, bob)]


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
    _, log = await _log(cluster, session_id)
    assert [e.source.caller for e in log if isinstance(e, InboxAccepted)] == [None]


async def test_a_worker_records_the_starter_as_the_new_sessions_initiator(tmp_path):
    """The activities on a real SQLite store (a PostgreSQL header keeps the initiator once
    its store has the column): the session a start creates records its caller, vouched for
    by the cluster; a start whose caller the gates refuse creates nothing and says why."""
    profile = write_profile(
        tmp_path, '[agent.main]\nmodel = "scripted:s.toml"\ncallers = { allow = ["os:*"] }\n'
    )
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        activities = SessionActivities(Runtime(make_kernel(profile), store), store, 1.0)
        made = SessionStart(session_id="ses_00000000000000a1", caller=caller_data(ALICE))
        assert await activities.open_session(made) is None
        header = await store.header(made.session_id)
        assert header.caller == ALICE.model_copy(update={"via": "cluster"})
        refused = SessionStart(session_id="ses_00000000000000b2", caller=caller_data(BOB))
        why = await activities.open_session(refused)
        assert why is not None
        assert why["code"] == str(ErrorCode.CALLER_REFUSED)
        assert 'caller "acp:bob" may not start a session (agent "main")' in why["message"]
        assert [h.id for h in await store.sessions()] == [made.session_id]
        # A message naming no caller is asked about as the initiator (admitted); bob is not.
        anonymous = SessionMessage(message_id="msg_1", content="retry")
        await activities.post_message(made.session_id, anonymous)
        sent = SessionMessage(message_id="msg_2", content="hi", caller=caller_data(BOB))
        with pytest.raises(ApplicationError) as posted:
            await activities.post_message(made.session_id, sent)
        assert posted.value.type == "CallerError"
        assert posted.value.non_retryable
        assert f"may not send to session {made.session_id}" in posted.value.message
        mailbox = await store.mailbox(made.session_id)
        assert [(m.message_id, m.source.caller) for m in mailbox] == [("msg_1", None)]
    finally:
        await store.aclose()


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


GATED = '\n[agent.main.callers]\nclaims = { team = "billing" }\n'


async def test_the_workers_gates_refuse_a_session_and_a_follow_up_and_nothing_is_written(
    cluster,
):
    cluster.script(ANSWER)
    cluster.profile.write_text(cluster.profile.read_text() + GATED)
    cluster.worker()
    client = await temporal.connect(cluster.settings())
    settings = cluster.settings()
    refused_id = temporal.new_session_id()
    with pytest.raises(CallerError) as new:
        await temporal.send(client, settings, refused_id, "let me in", caller=BOB)
    assert new.value.code is ErrorCode.CALLER_REFUSED
    assert 'caller "acp:bob" may not start a session (agent "main")' in str(new.value)
    store = cluster.store()
    try:
        with pytest.raises(StoreError) as missing:
            await store.header(refused_id)
        assert missing.value.code is ErrorCode.SESSION_NOT_FOUND
        # A session alice started takes no follow-up from bob.
        session_id = temporal.new_session_id()
        first = await temporal.send(client, settings, session_id, "one", caller=ALICE)
        with anyio.fail_after(TIMEOUT):
            assert await temporal.wait_for_turn(store, session_id, first) == "completed"
        _, before = await _log(cluster, session_id)
        with pytest.raises(CallerError) as followup:
            await TemporalHost(settings, client).send(session_id, "two", caller=BOB)
        assert f"may not send to session {session_id}" in str(followup.value)
        assert 'refused by gate "profile"' in str(followup.value)
        assert [m.message_id for m in await store.mailbox(session_id)] == []
    finally:
        await store.aclose()
    _, after = await _log(cluster, session_id)
    assert after == before


async def test_acp_fronting_the_cluster_sends_each_prompts_caller(cluster):
    from tests.acp.test_server import Recorder

    from .test_acp import served, text

    cluster.script(ANSWER)
    cluster.profile.write_text(
        cluster.profile.read_text().replace('"work"]', '"work", "acp"]')
        + "\n[plugin.acp.serve]\ntrust_meta_caller = true\n"
    )
    cluster.worker()
    named = {"id": "acp:ann", "claims": {"team": "billing"}}
    with anyio.fail_after(TIMEOUT * 2):
        async with served(cluster) as (conn, client):
            assert isinstance(client, Recorder)
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(cluster.folder))).session_id
            reply = await conn.prompt(
                session_id=sid, prompt=text("hello"), **{"tether/caller": named}
            )
            assert reply.stop_reason == "end_turn"
    _, log = await _log(cluster, sid)
    ann = Caller(id="acp:ann", via="cluster", claims={"team": "billing"})
    assert [e.source.caller for e in log if isinstance(e, InboxAccepted)] == [ann]
