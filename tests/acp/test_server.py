"""``tether acp``: a tether agent served over ACP on stdio.

Most tests start ``tether acp`` as a real process (the console script) and drive it with the ACP
SDK's client side; the profile's model is scripted and its tool a local plugin, so no installed
plugin is needed (entry-point autoload stays off in the child too). A few tests call the
server's methods in-process, where the timing they need cannot be arranged over the wire.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import acp
import anyio
import pytest
from click.testing import CliRunner

import tether_acp
import tether_subagent_tools
from tether.cli import cli
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime, compose_agent, profile_store
from tether.store import (
    InboxAccepted,
    InboxDiscarded,
    SQLiteStore,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.testing import make_runtime, scaled, write_profile
from tether_acp._protocol import stop_reason
from tether_acp._server import TetherAcpAgent

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"
TIMEOUT = scaled(30.0)  # generous: the suite must stay green with both cores busy

PROFILE = """
[tether]
plugins = ["shout"]
plugin_dirs = ["plugins"]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "scripted:script.toml"
"""

# A local plugin: "shout" upper-cases its text, and prints to standard output on the way (which
# must not reach the ACP stream).
SHOUT = """
import tether
from tether.agents import Tool

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def shout(args, ctx):
    print("shouting on stdout")
    return args["text"].upper() + "!"


@tether.hookimpl
def tether_tools():
    return [Tool("shout", "Shout TEXT.", shout, SCHEMA)]
"""


def make_profile(folder: Path, script: str) -> Path:
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / "plugins" / "shout.py").write_text(SHOUT, encoding="utf-8")
    write_profile(folder, script, "script.toml")
    return write_profile(folder, PROFILE)


class Recorder:
    """An ACP client that records every ``session/update`` (and asks nothing else)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self._arrived = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self._arrived.set()
        self._arrived = anyio.Event()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise acp.RequestError.method_not_found("session/request_permission")

    def seen(self, session_id: str | None = None) -> list[tuple[str, ...]]:
        """The updates in short form: ``(kind, text or tool call id[, status])``."""
        rows: list[tuple[str, ...]] = []
        for sid, update in self.updates:
            if session_id is not None and sid != session_id:
                continue
            kind = update.session_update
            if kind in ("agent_message_chunk", "user_message_chunk"):
                rows.append((kind, update.content.text))
            elif kind == "tool_call":
                rows.append((kind, update.tool_call_id, update.title, update.status))
            elif kind == "tool_call_update":
                text = "".join(c.content.text for c in update.content or [])
                rows.append((kind, update.tool_call_id, update.status, text))
            else:
                rows.append((kind,))
        return rows

    async def wait_for(self, predicate: Callable[[list[tuple[str, ...]]], bool]) -> None:
        while not predicate(self.seen()):
            await self._arrived.wait()


R = TypeVar("R", bound=Recorder)


@asynccontextmanager
async def served(
    profile: Path, *args: str, client: R | None = None
) -> AsyncIterator[tuple[acp.ClientSideConnection, R, Any]]:
    """``tether acp --profile PROFILE ARGS`` in a process of its own, with a client on it
    (``client``, else a :class:`Recorder`).

    The process's standard error goes to ``stderr.log`` next to the profile. Leaving the block
    closes its standard input (then terminates, then kills it if it lingers).
    """
    client = client if client is not None else cast(R, Recorder())
    with (profile.parent / "stderr.log").open("ab") as stderr:
        async with acp.spawn_agent_process(
            cast(acp.Client, client),
            str(TETHER),
            "acp",
            "--profile",
            str(profile),
            *args,
            env=dict(os.environ),
            cwd=profile.parent,
            # The server exits on its own once its input closes; on a busy machine that can
            # take longer than the library's 2 s before it terminates the process.
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 15.0},
        ) as (conn, process):
            yield conn, client, process


async def events(profile: Path, session_id: str) -> list[Any]:
    store = SQLiteStore(profile.parent / ".tether" / "sessions.db")
    try:
        return [stored.event for stored in await store.events(session_id)]
    finally:
        await store.aclose()


def text(*parts: str) -> list[Any]:
    return [acp.text_block(part) for part in parts]


# ------------------------------------------------------------------------ over stdio


async def test_initialize_offers_load_session_and_text_prompts(tmp_path):
    profile = make_profile(tmp_path, "")
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, _):
            reply = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
    assert reply.protocol_version == 1
    capabilities = reply.agent_capabilities
    assert capabilities is not None
    assert capabilities.load_session is True
    prompts = capabilities.prompt_capabilities
    assert prompts is not None
    assert (prompts.image, prompts.audio, prompts.embedded_context) == (False, False, False)
    # tether-mcp-client is installed here: the client's HTTP MCP servers are taken too.
    assert capabilities.mcp_capabilities is not None
    assert capabilities.mcp_capabilities.http is True
    assert reply.agent_info is not None
    assert reply.agent_info.name == "tether"


async def test_a_prompt_streams_the_answer_and_ends_the_turn(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        expect = "Hello there"
        text = "Hi! How can I help?"
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=text("Hello", " there"))
    assert reply.stop_reason == "end_turn"
    assert client.seen() == [("agent_message_chunk", "Hi! How can I help?")]
    assert process.returncode == 0
    # The ACP session is the tether session, stored in the profile's store.
    stored = await events(profile, session.session_id)
    assert [e.content for e in stored if isinstance(e, UserMessage)] == ["Hello there"]
    assert [e.stop_reason for e in stored if isinstance(e, TurnEnded)] == ["completed"]


async def test_a_second_prompt_continues_the_session(tmp_path):
    # Step i answers the request holding i assistant messages: the second step is only played
    # when the model's request carries the first turn.
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        expect = "my name is Ada"
        text = "Nice to meet you, Ada."

        [[steps]]
        expect = "what is my name"
        text = "Your name is Ada."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            first = await conn.prompt(session_id=sid, prompt=text("Hi, my name is Ada."))
            second = await conn.prompt(session_id=sid, prompt=text("So, what is my name?"))
    assert (first.stop_reason, second.stop_reason) == ("end_turn", "end_turn")
    assert client.seen() == [
        ("agent_message_chunk", "Nice to meet you, Ada."),
        ("agent_message_chunk", "Your name is Ada."),
    ]
    stored = await events(profile, sid)
    assert [e.turn for e in stored if isinstance(e, TurnEnded)] == [1, 2]


async def test_tool_calls_stream_as_tool_call_and_tool_call_update(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        text = "Let me shout."
        tool_calls = [
            { name = "shout", arguments = { text = "hello" } },
            { name = "whisper", arguments = { text = "hello" } },
        ]

        [[steps]]
        expect = "no tool"
        text = "Shouted: HELLO!"
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=text("Shout hello"))
    assert reply.stop_reason == "end_turn"
    assert client.seen() == [
        ("agent_message_chunk", "Let me shout."),
        # Pending until the kernel reaches each call; a call it refuses never runs.
        ("tool_call", "call_1_1", "shout", "pending"),
        ("tool_call", "call_1_2", "whisper", "pending"),
        ("tool_call_update", "call_1_1", "in_progress", ""),
        ("tool_call_update", "call_1_1", "completed", "HELLO!"),
        (
            "tool_call_update",
            "call_1_2",
            "failed",
            'error: there is no tool "whisper"; available tools: shout',
        ),
        ("agent_message_chunk", "Shouted: HELLO!"),
    ]
    start = client.updates[1][1]
    assert start.raw_input == {"text": "hello"}
    # What the tool printed went to standard error, not into the protocol stream.
    assert "shouting on stdout" in (tmp_path / "stderr.log").read_text()


async def test_cancel_during_a_slow_step_answers_cancelled(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        text = "Working on it."
        tool_calls = [{ name = "shout", arguments = { text = "step one" } }]

        [[steps]]
        delay = 30
        text = "Too late."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            replies: list[Any] = []

            async def prompt() -> None:
                replies.append(await conn.prompt(session_id=sid, prompt=text("Work slowly")))

            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                # The first step is done (its tool result streamed): the slow step runs now.
                await client.wait_for(
                    lambda seen: any(
                        r[0] == "tool_call_update" and r[2] == "completed" for r in seen
                    )
                )
                with anyio.fail_after(scaled(5)):  # not the 30 s of the slow step
                    await conn.cancel(session_id=sid)
                    while not replies:
                        await anyio.sleep(0.01)
    assert replies[0].stop_reason == "cancelled"
    assert ("agent_message_chunk", "Too late.") not in client.seen()
    stored = await events(profile, sid)
    ends = [e for e in stored if isinstance(e, TurnEnded)]
    assert [(e.turn, e.stop_reason) for e in ends] == [(1, "aborted")]


async def test_a_cancel_also_answers_a_prompt_waiting_for_its_turn(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        delay = 30
        text = "Too late."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            replies: dict[str, Any] = {}

            async def prompt(message: str, **meta: Any) -> None:
                replies[message] = await conn.prompt(session_id=sid, prompt=text(message), **meta)

            async with anyio.create_task_group() as group:
                group.start_soon(prompt, "first")
                # Accepted, so its turn runs (its turn/start is stored with its first answer).
                while not [e for e in await events(profile, sid) if isinstance(e, InboxAccepted)]:
                    await anyio.sleep(0.01)
                # Queued (it would steer the running turn otherwise): it waits for its turn.
                group.start_soon(partial(prompt, "second", **{"tether/queue": True}))
                await anyio.sleep(0.2)
                await conn.cancel(session_id=sid)
    assert {m: r.stop_reason for m, r in replies.items()} == {
        "first": "cancelled",
        "second": "cancelled",
    }
    stored = await events(profile, sid)
    assert [e.content for e in stored if isinstance(e, InboxAccepted)] == ["first"]


async def test_load_session_replays_a_stored_session_and_continues_it(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        text = "Let me shout."
        tool_calls = [{ name = "shout", arguments = { text = "hello" } }]

        [[steps]]
        text = "Shouted: HELLO!"

        [[steps]]
        expect = "again"
        text = "Welcome back."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            await conn.prompt(session_id=sid, prompt=text("Shout hello"))
        async with served(profile) as (conn, client, _):
            reply = await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replayed = client.seen(sid)
            again = await conn.prompt(session_id=sid, prompt=text("Hello again"))
            with pytest.raises(acp.RequestError) as missing:
                await conn.load_session(cwd=str(tmp_path), session_id="ses_missing", mcp_servers=[])
    assert replayed == [
        ("user_message_chunk", "Shout hello"),
        ("agent_message_chunk", "Let me shout."),
        ("tool_call", "call_1_1", "shout", "pending"),
        ("tool_call_update", "call_1_1", "completed", "HELLO!"),
        ("agent_message_chunk", "Shouted: HELLO!"),
    ]
    assert again.stop_reason == "end_turn"
    assert client.seen(sid)[len(replayed) :] == [("agent_message_chunk", "Welcome back.")]
    assert missing.value.code == -32002
    assert "SESSION_NOT_FOUND" in str(missing.value)
    assert reply.agent_capabilities is not None


async def test_closing_stdin_leaves_the_running_turn_and_exits(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        tool_calls = [{ name = "shout", arguments = { text = "hello" } }]

        [[steps]]
        delay = 30
        text = "Too late."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: conn.prompt(session_id=sid, prompt=text("Wait")))
                # Its first step is stored (with turn/start); the second one waits 30 s.
                while not [e for e in await events(profile, sid) if isinstance(e, TurnStarted)]:
                    await anyio.sleep(0.01)
                group.cancel_scope.cancel()
        # Leaving `served` closed standard input; the process exited on its own (a process
        # terminated after the grace period would have a negative status).
    assert process.returncode == 0
    stored = await events(profile, sid)
    assert [(e.turn, e.stop_reason) for e in stored if isinstance(e, TurnEnded)] == [(1, "aborted")]
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


# ------------------------------------------------------------------------ the command line


def test_an_unknown_agent_fails_before_serving(tmp_path):
    profile = make_profile(tmp_path, "")
    result = CliRunner().invoke(cli, ["acp", "--profile", str(profile), "--agent", "nobody"])
    assert result.exit_code == 2
    assert result.stderr.startswith("ERROR: ")
    assert result.stderr.rstrip().endswith("[UNKNOWN_AGENT]")
    assert result.stdout == ""


def test_without_tether_acp_the_command_says_how_to_install_it(tmp_path, monkeypatch):
    profile = make_profile(tmp_path, "")
    monkeypatch.setitem(sys.modules, "tether_acp._server", None)  # as if not installed
    result = CliRunner().invoke(cli, ["acp", "--profile", str(profile)])
    assert result.exit_code == 2
    assert result.stderr == (
        "ERROR: tether acp needs the tether-acp distribution, which is not installed; "
        "uv add tether-acp [PLUGIN_NOT_INSTALLED]\n"
    )


# ------------------------------------------------------------------------ in-process


@asynccontextmanager
async def in_process(profile: Path) -> AsyncIterator[tuple[TetherAcpAgent, Recorder]]:
    runtime = make_runtime(profile)
    store = profile_store(runtime.kernel)
    client = Recorder()
    try:
        async with anyio.create_task_group() as host:
            server = TetherAcpAgent(Runtime(runtime.kernel, store), host=host)
            server.on_connect(client)
            try:
                yield server, client
            finally:
                server.release_all()
    finally:
        await store.aclose()


async def test_a_prompt_cancelled_before_its_turn_began_never_runs(tmp_path):
    # The agent is busy with a turn no prompt started (as a notice from a child would give):
    # a prompt's message waits in the inbox when the cancel comes.
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        delay = 30
        text = "Too late."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with in_process(profile) as (server, client):
            sid = (await server.new_session(cwd=str(tmp_path))).session_id
            agent = server._sessions[sid].agent  # pyright: ignore[reportPrivateUsage]  (white-box)
            await agent.followup("a notice")
            while agent.inbox.pending:  # until its turn runs
                await anyio.sleep(0.01)
            replies: list[Any] = []

            async def prompt() -> None:
                replies.append(await server.prompt(text("Hello"), sid))

            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                while agent.inbox.pending == 0:
                    await anyio.sleep(0.01)
                await server.cancel(sid)
    assert replies[0].stop_reason == "cancelled"
    assert client.seen() == []
    stored = await events(profile, sid)
    hello = next(e for e in stored if isinstance(e, InboxAccepted) and e.content == "Hello")
    assert InboxDiscarded(message_id=hello.message_id) in stored
    assert [e.content for e in stored if isinstance(e, UserMessage)] == ["a notice"]


async def test_a_failed_turn_is_a_json_rpc_error_and_the_session_goes_on(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        expect = "second"
        text = "The second one worked."
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with in_process(profile) as (server, client):
            sid = (await server.new_session(cwd=str(tmp_path))).session_id
            with pytest.raises(acp.RequestError) as failed:
                await server.prompt(text("first"), sid)
            reply = await server.prompt(text("second"), sid)
    assert failed.value.code == -32603
    assert "SCRIPT_MISMATCH" in str(failed.value)
    assert failed.value.data == {"stopReason": "error", "sessionId": sid, "turn": 1}
    assert reply.stop_reason == "end_turn"
    assert client.seen() == [("agent_message_chunk", "The second one worked.")]


async def test_prompts_to_unknown_sessions_and_other_content_are_refused(tmp_path):
    profile = make_profile(tmp_path, "")
    with anyio.fail_after(TIMEOUT):
        async with in_process(profile) as (server, _):
            with pytest.raises(acp.RequestError) as unknown:
                await server.prompt(text("hi"), "ses_nope")
            sid = (await server.new_session(cwd=str(tmp_path))).session_id
            with pytest.raises(acp.RequestError) as image:
                await server.prompt([acp.image_block("AAAA", "image/png")], sid)
            await server.cancel("ses_nope")  # a notification: nothing to answer
    assert unknown.value.code == -32002
    assert image.value.code == -32602


def test_stop_reasons_map_to_acp():
    def stop(reason: Any, steps: int = 1) -> str:
        return stop_reason("ses_x", 3, TurnEnded(turn=1, stop_reason=reason, steps=steps))

    assert stop("completed") == "end_turn"
    assert stop("max-tokens") == "max_tokens"
    assert stop("max-tokens", steps=3) == "max_turn_requests"
    assert stop("refusal") == "refusal"
    assert stop("aborted") == "cancelled"
    with pytest.raises(acp.RequestError):
        stop("error")


# ------------------------------------------------------------------------ tether to tether


async def test_a_tether_profile_delegates_to_tether_acp_of_another_profile(tmp_path):

    child_profile = make_profile(
        tmp_path / "child",
        """
        [[steps]]
        expect = "count the notes"
        text = "There are 3 notes."
        """,
    )
    parent_profile = write_profile(
        tmp_path / "parent",
        f"""
        [tether]
        plugins = ["acp", "subagent"]
        store = "sqlite:.tether/sessions.db"

        [[plugin.acp.agents]]
        name = "helper"
        command = "{TETHER}"
        args = ["acp", "--profile", "{child_profile}"]

        [plugin.subagent]
        provider = "helper"
        max_depth = "provider-managed"

        [agent.main]
        """,
    )

    def parent_model(request: ModelRequest) -> ModelResponse | str:
        last = request.messages[-1]
        if last.role == "tool":
            return f"The helper says: {last.content}"
        arguments = {"description": "count", "prompt": "Please count the notes."}
        call = ToolCall(id="d1", name="subagent", arguments=arguments)
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")

    runtime = make_runtime(
        parent_profile, {"acp": tether_acp, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )
    store = profile_store(runtime.kernel)
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(parent_model))
            async with parent:
                assert await parent.run("How many notes are there?") == "completed"
    finally:
        await store.aclose()
    assert parent.messages[-1].content == "The helper says: There are 3 notes."
    # The child ran in the other profile's store, as a session of its own.
    child_store = SQLiteStore(child_profile.parent / ".tether" / "sessions.db")
    try:
        (header,) = await child_store.sessions()
        stored = [s.event for s in await child_store.events(header.id)]
    finally:
        await child_store.aclose()
    assert [e.stop_reason for e in stored if isinstance(e, TurnEnded)] == ["completed"]
