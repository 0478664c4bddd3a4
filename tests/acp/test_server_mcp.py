"""``tether acp`` gives a session's agent the MCP servers its client names (``mcpServers`` of
``session/new`` and ``session/load``), through tether-mcp-client.

The server runs as a real process (the console script) driven by the ACP SDK's client side (the
helpers of test_server.py); the MCP server is the real ``mcp-server-time`` (PyPI), started by
tether-mcp-client in the served process. The profile does not load the mcp plugin: the client's
servers need no profile setting.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import acp
import anyio
import pytest
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio, SseMcpServer

from tether.store import SQLiteStore, ToolResult
from tether_acp._mcp import client_tool_sources  # pyright: ignore[reportPrivateUsage]  (white-box)

from ..mcp.servers import time_server
from .test_server import TETHER, TIMEOUT, Recorder, events, make_profile, text

pytestmark = pytest.mark.anyio

# The model asks the client's "time" server for the time, then reads the answer: `expect` makes
# the scripted model fail unless the tool result it is given holds the server's JSON.
CLOCK_SCRIPT = """
[[steps]]
text = "Let me look at the clock."
tool_calls = [{ name = "time__get_current_time", arguments = { timezone = "UTC" } }]

[[steps]]
expect = '"timezone": "UTC"'
text = "Got the time."
"""


def time_entry(name: str = "time") -> McpServerStdio:
    argv = time_server()
    return McpServerStdio(
        name=name,
        command=argv[0],
        args=argv[1:],
        env=[EnvVariable(name="TETHER_TEST_MARK", value="acp")],
    )


@asynccontextmanager
async def served(profile: Path) -> AsyncIterator[tuple[acp.ClientSideConnection, Recorder, Any]]:
    """``tether acp --profile PROFILE`` with a client on it (test_server.py's ``served``, but
    given TIMEOUT seconds to exit once its input is closed: it stops its MCP servers first,
    which may take the MCP SDK's own grace period of 2 s on a busy machine)."""
    client = Recorder()
    with (profile.parent / "stderr.log").open("ab") as stderr:
        async with acp.spawn_agent_process(
            cast(acp.Client, client),
            str(TETHER),
            "acp",
            "--profile",
            str(profile),
            env=dict(os.environ),
            cwd=profile.parent,
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": TIMEOUT},
        ) as (conn, process):
            yield conn, client, process


def stderr_of(profile: Path) -> str:
    return (profile.parent / "stderr.log").read_text(errors="replace")


async def session_count(profile: Path) -> int:
    store = SQLiteStore(profile.parent / ".tether" / "sessions.db")
    try:
        return len(await store.sessions())
    finally:
        await store.aclose()


async def test_a_client_mcp_server_gives_the_session_its_tools(tmp_path):
    profile = make_profile(tmp_path, CLOCK_SCRIPT)
    servers: list[Any] = [
        time_entry(),
        SseMcpServer(type="sse", name="legacy", url="http://127.0.0.1:9/sse", headers=[]),
    ]
    with anyio.fail_after(TIMEOUT * 2):
        async with served(profile) as (conn, client, process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=servers)
            reply = await conn.prompt(session_id=session.session_id, prompt=text("What time?"))
    assert reply.stop_reason == "end_turn"
    seen = client.seen()
    assert [row[0] for row in seen] == [
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert seen[1][2:] == ("time__get_current_time", "pending")
    assert seen[2] == ("tool_call_update", seen[1][1], "in_progress", "")
    _, call_id, status, result = seen[3]
    assert (call_id, status) == (seen[1][1], "completed")
    assert '"timezone": "UTC"' in result
    assert '"datetime": "' in result
    assert seen[4] == ("agent_message_chunk", "Got the time.")
    assert process.returncode == 0
    # The model was given the server's answer (the scripted step's `expect` checked it too).
    stored = await events(profile, session.session_id)
    results = [e for e in stored if isinstance(e, ToolResult)]
    assert [(r.name, r.is_error) for r in results] == [("time__get_current_time", False)]
    assert results[0].content == result
    # The SSE entry was skipped, and said so.
    log = stderr_of(profile)
    assert (
        'MCP server "legacy" is skipped: tether-mcp-client does not speak the SSE transport' in log
    )
    assert "Traceback" not in log


async def test_session_load_takes_the_clients_mcp_servers_under_a_tether_name(tmp_path):
    # The session is made without servers, then loaded in another process with a server named
    # "My Clock!", which tether names "My-Clock": the model calls its tool by that name.
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        text = "Hello."

        [[steps]]
        tool_calls = [{ name = "My-Clock__get_current_time", arguments = { timezone = "UTC" } }]

        [[steps]]
        expect = '"timezone": "UTC"'
        text = "Got the time."
        """,
    )
    with anyio.fail_after(TIMEOUT * 2):
        async with served(profile) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=text("Hi"))
        async with served(profile) as (conn, client, process):
            await conn.initialize(protocol_version=1)
            await conn.load_session(
                cwd=str(tmp_path),
                session_id=session.session_id,
                mcp_servers=[time_entry("My Clock!")],
            )
            replayed = len(client.updates)
            reply = await conn.prompt(session_id=session.session_id, prompt=text("Time?"))
    assert reply.stop_reason == "end_turn"
    assert process.returncode == 0
    fresh = client.seen()[replayed:]
    assert [row[0] for row in fresh] == [
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert fresh[0][2] == "My-Clock__get_current_time"
    assert [row[2] for row in fresh[1:3]] == ["in_progress", "completed"]
    assert '"timezone": "UTC"' in fresh[2][3]


async def test_a_client_mcp_server_that_does_not_start_fails_session_new(tmp_path):
    profile = make_profile(tmp_path, "")
    missing = tmp_path / "no-such-mcp-server"
    ghost = McpServerStdio(name="ghost", command=str(missing), args=["--stdio"], env=[])
    with anyio.fail_after(TIMEOUT * 2):
        async with served(profile) as (conn, _, process):
            await conn.initialize(protocol_version=1)
            with pytest.raises(acp.RequestError) as failed:
                await conn.new_session(cwd=str(tmp_path), mcp_servers=[ghost])
            # The connection goes on: a session without the server opens.
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert failed.value.code == -32603
    message = str(failed.value)
    assert 'the MCP server "ghost"' in message
    assert str(missing) in message
    assert 'plugin "acp client", server "ghost"' in message
    assert failed.value.data == {"tetherCode": "TOOL_SOURCE_FAILED"}
    assert process.returncode == 0
    assert session.session_id.startswith("ses_")
    assert await session_count(profile) == 1  # the failed session/new left no session


async def test_mcp_server_entries_tether_cannot_name_are_invalid_params(tmp_path):
    profile = make_profile(tmp_path, "")
    clock = time_entry("my clock")
    cases: list[tuple[list[Any], str]] = [
        (
            [McpServerStdio(name="!!!", command="unused", args=[], env=[])],
            'MCP server name "!!!" has no letter or digit',
        ),
        (
            [clock, time_entry("my-clock")],
            'MCP server names "my clock" and "my-clock" both name the server "my-clock"',
        ),
        (
            [HttpMcpServer(type="http", name="web", url="ftp://example.invalid/mcp", headers=[])],
            "url 'ftp://example.invalid/mcp' must start with http:// or https://",
        ),
    ]
    with anyio.fail_after(TIMEOUT * 2):
        async with served(profile) as (conn, _, process):
            await conn.initialize(protocol_version=1)
            errors: list[acp.RequestError] = []
            for servers, _ in cases:
                with pytest.raises(acp.RequestError) as refused:
                    await conn.new_session(cwd=str(tmp_path), mcp_servers=servers)
                errors.append(refused.value)
    assert process.returncode == 0
    for error, (_, expected) in zip(errors, cases, strict=True):
        assert error.code == -32602
        assert expected in str(error)
    assert await session_count(profile) == 0
    assert "Traceback" not in stderr_of(profile)


async def test_empty_mcp_servers_open_a_session_as_before(tmp_path):
    profile = make_profile(
        tmp_path,
        """
        [[steps]]
        expect = "Hello"
        text = "Hi!"
        """,
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, process):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            reply = await conn.prompt(session_id=session.session_id, prompt=text("Hello"))
    assert reply.stop_reason == "end_turn"
    assert client.seen() == [("agent_message_chunk", "Hi!")]
    assert process.returncode == 0


def test_empty_mcp_servers_do_not_import_tether_mcp(tmp_path):
    # A fresh interpreter: the suite's own process has imported tether_mcp_client long ago.
    probe = textwrap.dedent(
        """
        import sys
        from pathlib import Path

        from tether_acp._server import TetherAcpAgent
        from tether_acp._mcp import client_tool_sources

        assert client_tool_sources([], Path.cwd()) == []
        assert client_tool_sources(None, Path.cwd()) == []
        assert "tether_mcp_client" not in sys.modules, "tether_mcp_client was imported"
        assert "mcp" not in sys.modules, "the MCP SDK was imported"
        print("ok", TetherAcpAgent.__name__)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok TetherAcpAgent"


def test_without_tether_mcp_the_clients_servers_are_skipped_with_a_warning(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setitem(sys.modules, "tether_mcp_client", None)  # `import tether_mcp_client` fails
    with caplog.at_level(logging.WARNING, logger="tether.acp.mcp"):
        sources = client_tool_sources([time_entry()], tmp_path)
    assert sources == []
    assert [r.getMessage() for r in caplog.records] == [
        'the client offers 1 MCP server(s) ("time"); they are not used: tether-mcp-client is not'
        " installed (uv add tether-mcp-client)"
    ]


def test_client_entries_become_tether_mcp_sources(tmp_path, caplog):
    entries: list[Any] = [
        time_entry("GitHub (work)"),
        HttpMcpServer(
            type="http",
            name="docs",
            url="http://127.0.0.1:9/mcp",
            headers=[acp.schema.HttpHeader(name="Authorization", value="Bearer x")],
        ),
        SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[]),
        McpServerStdio(name="a" * 50 + "__b", command="unused", args=[], env=[]),
    ]
    with caplog.at_level(logging.INFO, logger="tether.acp.mcp"):
        sources = client_tool_sources(entries, tmp_path)
    # Nothing is started until an agent is composed: these are the sources only.
    assert [s.name for s in sources] == ["mcp:GitHub-work", "mcp:docs", f"mcp:{'a' * 40}"]
    assert not any(s.eager for s in sources)
    messages = [r.getMessage() for r in caplog.records]
    assert 'MCP server "GitHub (work)" is named GitHub-work here' in messages[0]
    assert any('MCP server "old" is skipped' in m for m in messages)
