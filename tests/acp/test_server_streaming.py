"""``tether acp`` streams answers as they arrive: text as ``agent_message_chunk``, reasoning as
``agent_thought_chunk``, the answer not sent again once its pieces carried it.

The server is a real process (the console script) driven by the official ACP SDK's client side
(the helpers of test_server.py); its model is a streaming script, or a function model in a
module next to the profile (``--model function:MODULE:NAME``, imported by the served process).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from tether.store import AssistantMessage, TurnEnded
from tether.testing import write_profile
from tether_acp._server import RETRY_MARKER  # pyright: ignore[reportPrivateUsage]  (white-box)

from .test_server import TIMEOUT, Recorder, events, make_profile, served, text

pytestmark = pytest.mark.anyio

ANSWER = "There are three notes in the folder."
REASONING = "The person asks about notes; I looked."


def chunks(client: Recorder, kind: str) -> list[Any]:
    return [u for _, u in client.updates if u.session_update == kind]


def function_profile(folder: Path, module: str, code: str) -> Path:
    """A profile whose model is given with ``--model``; ``module`` is importable next to it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return write_profile(folder, '[tether]\nstore = "sqlite:.tether/sessions.db"\n[agent.main]\n')


async def test_an_answer_streams_in_pieces_and_is_not_sent_again_whole(tmp_path):
    profile = make_profile(
        tmp_path,
        f"""
        [[steps]]
        reasoning = "{REASONING}"
        text = "{ANSWER}"
        chunks = 4
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=text("The notes?"))
    assert reply.stop_reason == "end_turn"
    said = chunks(client, "agent_message_chunk")
    thought = chunks(client, "agent_thought_chunk")
    assert len(said) == 4  # the pieces, and no whole answer after them
    assert "".join(c.content.text for c in said) == ANSWER
    assert len({c.message_id for c in said}) == 1
    assert len(thought) == 4
    assert "".join(c.content.text for c in thought) == REASONING
    assert {c.message_id for c in thought}.isdisjoint({c.message_id for c in said})
    kinds = [u.session_update for _, u in client.updates]
    assert kinds == ["agent_thought_chunk"] * 4 + ["agent_message_chunk"] * 4
    stored = await events(profile, session.session_id)
    assert [e.content for e in stored if isinstance(e, AssistantMessage)] == [ANSWER]


async def test_a_streamed_answer_keeps_the_id_session_load_replays(tmp_path):
    profile = make_profile(
        tmp_path,
        f"""
        [[steps]]
        text = "{ANSWER}"
        chunks = 3
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=text("The notes?"))
            live = chunks(client, "agent_message_chunk")
            client.updates.clear()
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    (replayed,) = chunks(client, "agent_message_chunk")  # the log holds it whole, once
    assert replayed.content.text == ANSWER
    assert {c.message_id for c in live} == {replayed.message_id}
    assert chunks(client, "agent_thought_chunk") == []


async def test_a_model_that_cannot_stream_gives_one_whole_chunk(tmp_path):
    profile = function_profile(
        tmp_path,
        "whole_brain",
        """
        def answer(request):
            return "One whole answer."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile, "--model", "function:whole_brain:answer") as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            reply = await conn.prompt(session_id=sid, prompt=text("Hello"))
    assert reply.stop_reason == "end_turn"
    assert client.seen() == [("agent_message_chunk", "One whole answer.")]
    (chunk,) = chunks(client, "agent_message_chunk")
    assert chunk.message_id is not None


async def test_only_the_tail_the_pieces_lack_is_sent_when_the_answer_is_logged(tmp_path):
    # A model that streams part of its answer (its reasoning and a first piece) and gives the
    # rest only in its final answer.
    profile = function_profile(
        tmp_path,
        "tail_brain",
        """
        from tether.models import ModelDelta

        async def answer(request):
            yield ModelDelta("reasoning", "Short.")
            yield ModelDelta("text", "Begun, ")
            yield "Begun, and finished."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile, "--model", "function:tail_brain:answer") as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=text("Hello"))
    said = chunks(client, "agent_message_chunk")
    assert [c.content.text for c in said] == ["Begun, ", "and finished."]
    assert len({c.message_id for c in said}) == 1


async def test_a_retried_step_marks_the_void_pieces_and_streams_on(tmp_path):
    # The first attempt streams a piece, then fails recoverably; the step is sent again.
    profile = function_profile(
        tmp_path,
        "flaky_brain",
        """
        from tether.errors import ErrorCode, ModelError
        from tether.models import ModelDelta

        attempts = 0

        async def answer(request):
            global attempts
            attempts += 1
            if attempts == 1:
                yield ModelDelta("text", "A first dra")
                raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "cut", recoverable=True)
            yield ModelDelta("text", "The real ")
            yield ModelDelta("text", "answer.")
            yield "The real answer."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile, "--model", "function:flaky_brain:answer") as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            reply = await conn.prompt(session_id=sid, prompt=text("Hello"))
    assert reply.stop_reason == "end_turn"
    said = chunks(client, "agent_message_chunk")
    assert [c.content.text for c in said] == [
        "A first dra",
        RETRY_MARKER,
        "The real ",
        "answer.",
    ]
    assert [c.field_meta for c in said] == [None, {"tether/retry": True}, None, None]
    assert len({c.message_id for c in said}) == 1
    stored = await events(profile, sid)
    assert [e.content for e in stored if isinstance(e, AssistantMessage)] == ["The real answer."]
    assert [e.stop_reason for e in stored if isinstance(e, TurnEnded)] == ["completed"]


async def test_a_retry_before_any_piece_sends_no_marker(tmp_path):
    profile = make_profile(
        tmp_path,
        f"""
        [[steps]]
        fail_times = 1
        text = "{ANSWER}"
        chunks = 2
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=text("The notes?"))
    said = chunks(client, "agent_message_chunk")
    assert "".join(c.content.text for c in said) == ANSWER
    assert all(c.field_meta is None for c in said)
