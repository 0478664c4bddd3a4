"""``session/load`` after a crash: ``tether acp`` is killed (SIGKILL) in the middle of a turn,
and a new ``tether acp`` loads the session. The turn is closed as ``tether run --session``
closes it (open calls answered as interrupted, the turn ``aborted``, once), children a crash
left mid-turn are repaired too, and every load replays the same history with the same ids.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest

from tether.store import SQLiteStore, ToolResult, TurnEnded
from tether.testing import scaled, write_profile

from .test_server import Recorder, events, served, text

pytestmark = pytest.mark.anyio

TIMEOUT = scaled(30.0)

INTERRUPTED = "error: interrupted: the process stopped before this tool finished"

HANG = """
import anyio
import tether
from tether.agents import Tool


async def hang(args, ctx):
    await anyio.sleep(3600)
    return "never"


@tether.hookimpl
def tether_tools():
    return [Tool("hang", "Wait a long time.", hang, {"type": "object"})]
"""


def hanging_profile(folder: Path) -> Path:
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / "plugins" / "hang.py").write_text(HANG, encoding="utf-8")
    write_profile(
        folder,
        """
        [[steps]]
        text = "Waiting."
        tool_calls = [{ name = "hang", arguments = {} }]

        [[steps]]
        expect = "Are you back"
        text = "Yes, back now."
        """,
        "script.toml",
    )
    return write_profile(
        folder,
        """
        [tether]
        plugins = ["hang"]
        plugin_dirs = ["plugins"]
        store = "sqlite:.tether/sessions.db"

        [agent.main]
        model = "scripted:script.toml"
        """,
    )


def ids_of(client: Recorder) -> list[tuple[str, Any]]:
    """Each update's kind and its message or tool call id."""
    return [
        (u.session_update, getattr(u, "message_id", None) or getattr(u, "tool_call_id", None))
        for _, u in client.updates
    ]


async def kill_during(conn: Any, client: Recorder, process: Any, sid: str, prompt: str) -> None:
    """Prompt, wait until the turn's tool call streamed, and kill the process (SIGKILL)."""
    async with anyio.create_task_group() as group:

        async def run() -> None:
            with pytest.raises((ConnectionError, acp.RequestError)):
                await conn.prompt(session_id=sid, prompt=text(prompt))

        group.start_soon(run)
        await client.wait_for(lambda seen: any(row[0] == "tool_call" for row in seen))
        process.send_signal(signal.SIGKILL)


async def test_a_turn_a_crash_left_open_is_closed_once_and_replayed_the_same_way(tmp_path):
    profile = hanging_profile(tmp_path)
    # Four server processes, one after another: a budget for each (on a busy machine a start
    # alone can take seconds).
    with anyio.fail_after(TIMEOUT * 3):
        async with served(profile) as (conn, live, process):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await kill_during(conn, live, process, sid, "Please wait")
        replays: list[Recorder] = []
        for _ in range(2):  # two loads, each in a process of its own
            async with served(profile) as (conn, client, _):
                await conn.initialize(protocol_version=1)
                await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replays.append(client)
        async with served(profile) as (conn, client, _):
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            again = await conn.prompt(session_id=sid, prompt=text("Are you back?"))
    first, second = replays
    assert first.seen() == [
        ("user_message_chunk", "Please wait"),
        ("agent_message_chunk", "Waiting."),
        ("tool_call", "call_1_1", "hang", "pending"),
        ("tool_call_update", "call_1_1", "failed", first.seen()[3][3]),
    ]
    assert first.seen()[3][3].startswith(INTERRUPTED)
    # The same history with the same ids, load after load, and the ids the prompt streamed.
    assert second.seen() == first.seen()
    assert ids_of(second) == ids_of(first)
    assert ids_of(first)[1:3] == ids_of(live)[:2]
    # The kill may come after the call was marked running, which a replay does not repeat.
    assert [u.status for _, u in live.updates[2:]] in ([], ["in_progress"])
    assert again.stop_reason == "end_turn"
    stored = await events(profile, sid)
    ends = [(e.turn, e.stop_reason) for e in stored if isinstance(e, TurnEnded)]
    assert ends == [(1, "aborted"), (2, "completed")]  # closed once, not once per load
    assert len([e for e in stored if isinstance(e, ToolResult)]) == 1


DELEGATING_MODEL = """
from pathlib import Path

import anyio
from tether.models import ModelResponse, ToolCall
from tether.subagents.notices import DELEGATION_NOTE

READY = Path(__file__).with_name("ready.fifo")


async def answer(request):
    last = request.messages[-1]
    if any(m.content.startswith(DELEGATION_NOTE) for m in request.messages):
        if last.role != "tool":  # the child's first step: a call, stored with its result
            call = ToolCall(id="c1", name="look", arguments={})
            return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
        # Its second step never ends: say so through the FIFO, then wait to be killed.
        await anyio.to_thread.run_sync(READY.write_text, "ready")
        await anyio.sleep(3600)
        return "never"
    if last.role == "tool":
        return "The helper was interrupted."
    call = ToolCall(id="d1", name="subagent", arguments={"description": "d", "prompt": "work"})
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
"""


async def test_session_load_repairs_a_child_a_crash_left_mid_turn(tmp_path, monkeypatch):
    (tmp_path / "delegating_model.py").write_text(DELEGATING_MODEL, encoding="utf-8")
    ready = tmp_path / "ready.fifo"
    os.mkfifo(ready)
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["spawn", "subagent"]
        store = "sqlite:.tether/sessions.db"

        [plugin.subagent]
        provider = "spawn"

        [agent.main]
        model = "function:delegating_model:answer"
        """,
    )
    monkeypatch.setenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", "0")  # spawn, subagent: installed
    with anyio.fail_after(TIMEOUT * 2):  # two server processes, one after another
        async with served(profile) as (conn, client, process):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            async with anyio.create_task_group() as group:

                async def run() -> None:
                    with pytest.raises((ConnectionError, acp.RequestError)):
                        await conn.prompt(session_id=sid, prompt=text("Delegate it"))

                group.start_soon(run)
                assert await anyio.to_thread.run_sync(ready.read_text) == "ready"
                process.send_signal(signal.SIGKILL)
        store = SQLiteStore(tmp_path / ".tether" / "sessions.db")
        try:
            (child,) = await store.sessions(parent=sid)
        finally:
            await store.aclose()
        before = await events(profile, child.id)
        async with served(profile) as (conn, client, _):
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        after = await events(profile, child.id)
    assert not [e for e in before if isinstance(e, TurnEnded)]  # the crash left it open
    ends = [e for e in after if isinstance(e, TurnEnded)]
    assert [(e.turn, e.stop_reason) for e in ends] == [(1, "aborted")]
    assert "the process stopped during this turn" in (ends[0].error or "")
    replayed = client.seen(sid)
    assert replayed[0] == ("user_message_chunk", "Delegate it")
    assert replayed[-1][:3] == ("tool_call_update", "d1", "failed")
