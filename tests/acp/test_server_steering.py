"""Steering ``tether acp`` (docs/acp.md#steering-a-running-turn), in a real process driven by
the ACP SDK's client: a ``session/prompt`` that arrives while another prompt's turn runs steers
that turn (its next model request carries it, both prompts answer at the turn's end, each
update goes out once); a steer after the turn's last step becomes a turn of its own, which its
prompt streams; ``_meta`` ``{"tether/queue": true}`` queues a prompt as a turn of its own
instead; a cancel answers every prompt ``cancelled`` and the steer never runs; a caller a gate
refuses cannot steer.

The model (:mod:`tests.acp.steermodel`, copied next to the profile) holds a step until the test
makes a file, so each steer is sent, and durably accepted, while the step it races runs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest

from tether.errors import ErrorCode
from tether.store import InboxAccepted, InboxDiscarded, TurnEnded, TurnStarted, UserMessage
from tether.testing import write_profile

from .test_server import SHOUT, TIMEOUT, Recorder, events, served, text

pytestmark = pytest.mark.anyio

QUEUE = {"tether/queue": True}
BILLING = {"id": "acp:ann@example.com", "claims": {"team": "billing"}}
GUEST = {"id": "acp:gus@example.com", "claims": {"plan": "free"}}


def make_profile(folder: Path, extra: str = "") -> Path:
    """The ``shout`` tool and the holding model; ``extra``: more of the profile."""
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / "plugins" / "shout.py").write_text(SHOUT, encoding="utf-8")
    shutil.copy(Path(__file__).parent / "steermodel.py", folder / "steermodel.py")
    return write_profile(
        folder,
        f"""
        [tether]
        plugins = [{extra and '"acp", '}"shout"]
        plugin_dirs = ["plugins"]
        store = "sqlite:.tether/sessions.db"
        {extra}

        [agent.main]
        model = "function:steermodel:brain"
        """,
    )


def requests(folder: Path) -> list[list[list[str]]]:
    """The messages of each model request, in order."""
    lines = (folder / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


async def accepted(profile: Path, sid: str, content: str) -> InboxAccepted:
    """Wait until ``content`` is durably accepted in ``sid``'s log."""
    while True:
        for event in await events(profile, sid):
            if isinstance(event, InboxAccepted) and event.content == content:
                return event
        await anyio.sleep(0.02)


class Prompts:
    """Prompts sent in the background; their answers (or errors) by text."""

    def __init__(self, conn: acp.ClientSideConnection, sid: str) -> None:
        self.conn, self.sid = conn, sid
        self.replies: dict[str, Any] = {}

    def sender(self, message: str, **meta: Any) -> Callable[[], Coroutine[Any, Any, None]]:
        async def send() -> None:
            try:
                reply = await self.conn.prompt(session_id=self.sid, prompt=text(message), **meta)
            except acp.RequestError as exc:
                self.replies[message] = exc
            else:
                self.replies[message] = reply

        return send


async def open_session(conn: acp.ClientSideConnection, cwd: Path, **meta: Any) -> str:
    await conn.initialize(protocol_version=1)
    return (await conn.new_session(cwd=str(cwd), mcp_servers=[], **meta)).session_id


async def seen(client: Recorder, row: tuple[str, ...]) -> None:
    await client.wait_for(lambda rows: row in rows)


async def test_a_prompt_during_a_running_turn_steers_its_next_step(tmp_path):
    profile = make_profile(tmp_path)
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            sid = await open_session(conn, tmp_path)
            prompts = Prompts(conn, sid)
            async with anyio.create_task_group() as group:
                group.start_soon(prompts.sender("hold a"))
                await seen(client, ("agent_message_chunk", "holding a."))
                group.start_soon(prompts.sender("use the blue one"))
                steer = await accepted(profile, sid, "use the blue one")
                (tmp_path / "a").touch()
    first, steering = prompts.replies["hold a"], prompts.replies["use the blue one"]
    assert (first.stop_reason, steering.stop_reason) == ("end_turn", "end_turn")
    assert steering.usage == first.usage  # the same turn's
    assert steer.delivery == "step"
    # The turn's next request carried the steer, after the tool's result.
    second_request = requests(tmp_path)[1]
    assert second_request[-2:] == [["tool", "A!"], ["user", "use the blue one"]]
    # The prompt whose turn it is streamed the whole turn, the steered part included, once.
    assert client.seen() == [
        ("agent_message_chunk", "holding a."),
        ("tool_call", "call_a", "shout", "pending"),
        ("tool_call_update", "call_a", "in_progress", ""),
        ("tool_call_update", "call_a", "completed", "A!"),
        ("agent_message_chunk", "heard use the blue one"),
    ]
    stored = await events(profile, sid)
    assert [e.content for e in stored if isinstance(e, UserMessage)] == [
        "hold a",
        "use the blue one",
    ]
    assert [(e.turn, e.stop_reason) for e in stored if isinstance(e, TurnEnded)] == [
        (1, "completed")
    ]
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
    assert "differs from the text its model streamed" not in (tmp_path / "stderr.log").read_text()


async def test_a_steer_after_the_last_step_becomes_a_turn_its_prompt_streams(tmp_path):
    profile = make_profile(tmp_path)
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            sid = await open_session(conn, tmp_path)
            prompts = Prompts(conn, sid)
            async with anyio.create_task_group() as group:
                group.start_soon(prompts.sender("slow a"))
                await seen(client, ("agent_message_chunk", "slow a."))
                group.start_soon(prompts.sender("and then this"))
                steer = await accepted(profile, sid, "and then this")
                (tmp_path / "a").touch()  # the turn's only step ends: the steer comes too late
    assert {m: r.stop_reason for m, r in prompts.replies.items()} == {
        "slow a": "end_turn",
        "and then this": "end_turn",
    }
    assert client.seen() == [
        ("agent_message_chunk", "slow a."),
        ("agent_message_chunk", " finished."),
        ("agent_message_chunk", "heard and then this"),
    ]
    stored = await events(profile, sid)
    starts = [(e.turn, e.message_id) for e in stored if isinstance(e, TurnStarted)]
    assert starts[1] == (2, steer.message_id)
    assert [e.stop_reason for e in stored if isinstance(e, TurnEnded)] == ["completed"] * 2
    assert [r[-1] for r in requests(tmp_path)] == [["user", "slow a"], ["user", "and then this"]]


async def test_tether_queue_in_meta_makes_a_prompt_wait_for_a_turn_of_its_own(tmp_path):
    profile = make_profile(tmp_path)
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            sid = await open_session(conn, tmp_path)
            prompts = Prompts(conn, sid)
            async with anyio.create_task_group() as group:
                group.start_soon(prompts.sender("hold a"))
                await seen(client, ("agent_message_chunk", "holding a."))
                group.start_soon(prompts.sender("next, please", **QUEUE))
                # Requests are taken in order: once a later one is answered, the queued prompt
                # has arrived, and waits.
                await conn.initialize(protocol_version=1)
                (tmp_path / "a").touch()
    assert {m: r.stop_reason for m, r in prompts.replies.items()} == {
        "hold a": "end_turn",
        "next, please": "end_turn",
    }
    # The running turn did not see it: its second step answered the tool's result.
    assert [r[-1] for r in requests(tmp_path)] == [
        ["user", "hold a"],
        ["tool", "A!"],
        ["user", "next, please"],
    ]
    assert client.seen() == [
        ("agent_message_chunk", "holding a."),
        ("tool_call", "call_a", "shout", "pending"),
        ("tool_call_update", "call_a", "in_progress", ""),
        ("tool_call_update", "call_a", "completed", "A!"),
        ("agent_message_chunk", "shouted A!"),
        ("agent_message_chunk", "heard next, please"),
    ]
    stored = await events(profile, sid)
    queued = next(e for e in stored if isinstance(e, InboxAccepted) and e.content != "hold a")
    assert queued.delivery == "turn"
    starts = [(e.turn, e.message_id) for e in stored if isinstance(e, TurnStarted)]
    assert starts[1] == (2, queued.message_id)


async def test_a_cancel_answers_the_turn_and_its_steer_cancelled_and_the_steer_never_runs(
    tmp_path,
):
    profile = make_profile(tmp_path)
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            sid = await open_session(conn, tmp_path)
            prompts = Prompts(conn, sid)
            async with anyio.create_task_group() as group:
                group.start_soon(prompts.sender("hold a"))
                await seen(client, ("agent_message_chunk", "holding a."))
                group.start_soon(prompts.sender("never mind"))
                steer = await accepted(profile, sid, "never mind")
                await conn.cancel(session_id=sid)
            after = await conn.prompt(session_id=sid, prompt=text("hello again"))
    assert {m: r.stop_reason for m, r in prompts.replies.items()} == {
        "hold a": "cancelled",
        "never mind": "cancelled",
    }
    assert after.stop_reason == "end_turn"
    stored = await events(profile, sid)
    assert InboxDiscarded(message_id=steer.message_id) in stored
    assert [e.content for e in stored if isinstance(e, UserMessage)] == ["hold a", "hello again"]
    assert [(e.turn, e.stop_reason) for e in stored if isinstance(e, TurnEnded)] == [
        (1, "aborted"),
        (2, "completed"),
    ]
    assert all("never mind" not in str(request) for request in requests(tmp_path))
    assert client.seen()[-1] == ("agent_message_chunk", "heard hello again")


async def test_a_turn_that_fails_answers_its_steer_with_the_same_error(tmp_path):
    profile = make_profile(tmp_path)
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            sid = await open_session(conn, tmp_path)
            prompts = Prompts(conn, sid)
            async with anyio.create_task_group() as group:
                group.start_soon(prompts.sender("hold a"))
                await seen(client, ("agent_message_chunk", "holding a."))
                group.start_soon(prompts.sender("fail on purpose"))  # the next step fails
                await accepted(profile, sid, "fail on purpose")
                (tmp_path / "a").touch()
            after = await conn.prompt(session_id=sid, prompt=text("still there?"))
    first, steering = prompts.replies["hold a"], prompts.replies["fail on purpose"]
    assert isinstance(first, acp.RequestError)
    assert isinstance(steering, acp.RequestError)
    assert (
        (steering.code, steering.data)
        == (first.code, first.data)
        == (
            -32603,
            {"stopReason": "error", "sessionId": sid, "turn": 1},
        )
    )
    assert "the model failed: on purpose" in str(steering)
    assert str(steering) == str(first)
    assert after.stop_reason == "end_turn"  # the session goes on


async def test_a_caller_a_gate_refuses_cannot_steer(tmp_path, monkeypatch):
    # The profile trusts its client's callers (the acp plugin's settings, found by entry point)
    # and its gate admits the billing team only.
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    profile = make_profile(
        tmp_path,
        "[plugin.acp.serve]\ntrust_meta_caller = true\n\n"
        '[agent.main.callers]\nclaims = { team = ["billing"] }',
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            sid = await open_session(conn, tmp_path, **{"tether/caller": BILLING})
            prompts = Prompts(conn, sid)
            async with anyio.create_task_group() as group:
                group.start_soon(prompts.sender("hold a"))
                await seen(client, ("agent_message_chunk", "holding a."))
                await prompts.sender("mine now", **{"tether/caller": GUEST})()
                (tmp_path / "a").touch()
    refused = prompts.replies["mine now"]
    assert isinstance(refused, acp.RequestError)
    assert refused.code == -32003
    assert refused.data == {"tetherCode": str(ErrorCode.CALLER_REFUSED)}
    assert f'caller "{GUEST["id"]}"' in str(refused)
    assert prompts.replies["hold a"].stop_reason == "end_turn"
    stored = await events(profile, sid)
    assert [e.content for e in stored if isinstance(e, InboxAccepted)] == ["hold a"]
    assert requests(tmp_path)[-1][-1] == ["tool", "A!"]
