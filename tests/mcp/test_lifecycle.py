"""Server processes over a runtime's life: shared by agents, stopped with the runtime, restarted
after a crash, bounded by ``timeout``, cut short by a cancelled turn, refused at compose when
they cannot start, and started per request on a bare runtime. The processes are the real ones:
found among this test process's children in /proc, killed with SIGKILL."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from tether.agents import ToolError
from tether.errors import AgentError, ErrorCode
from tether.loading import Kernel
from tether.runtime import Runtime
from tether.store import SessionStore
from tether_mcp_client import SERVERS, connections

from .conftest import (
    call,
    calls,
    chars_read,
    child_pids,
    gone,
    load,
    only_child,
    says,
    script,
    server_tables,
    stdio,
    tool_messages,
    wait_until,
    write_profile,
)

pytestmark = pytest.mark.anyio

EVERYTHING = "server-everything"  # in the server's command line
LONG = "everything__trigger-long-running-operation"


def counted(argv: list[str], starts: Path) -> list[str]:
    """``argv`` started through ``sh``, which first appends its process id to ``starts``: the
    file counts how often the server was started."""
    return ["sh", "-c", f'echo $$ >> "{starts}"; exec "$@"', "sh", *argv]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@asynccontextmanager
async def runtime_for(kernel: Kernel, store: SessionStore, hosted: bool) -> AsyncIterator[Runtime]:
    """An open runtime (servers live in it), or a bare one (a server per request)."""
    if hosted:
        async with Runtime.open(kernel, store) as runtime:
            yield runtime
    else:
        yield Runtime(kernel, store)


# ---------------------------------------------------------------------------- sharing, stopping


async def test_one_server_process_is_shared_by_two_agents_of_one_runtime(
    tmp_path: Path, everything: list[str]
):
    """Two agents, each with its own entry (its own filter) for the same command: one
    connection, one process, started once, used by both at the same time."""
    echo = stdio("everything", everything, include=["echo"])
    add = stdio("everything", everything, include=["get-sum"])
    profile = tmp_path / "tether.toml"
    profile.write_text(
        '[tether]\nplugins = []\nstore = "memory"\n\n'
        '[agent.a]\nplugins = ["mcp"]\n\n'
        f"{server_tables([echo], 'agent.a.plugin.mcp')}\n\n"
        '[agent.b]\nplugins = ["mcp"]\n\n'
        f"{server_tables([add], 'agent.b.plugin.mcp')}\n"
    )
    kernel, store = load(profile)
    async with Runtime.open(kernel, store) as runtime:
        a = await runtime.compose(
            agent="a", model=script(calls(call("everything__echo", message="from a")), says("a"))
        )
        b = await runtime.compose(
            agent="b", model=script(calls(call("everything__get-sum", a=4, b=5)), says("b"))
        )
        assert a.tools.names() == ["everything__echo"]
        assert b.tools.names() == ["everything__get-sum"]
        (connection,) = connections(runtime)
        pid = only_child(EVERYTHING)
        async with anyio.create_task_group() as group:
            group.start_soon(runtime.run_session, a, ["echo"])
            group.start_soon(runtime.run_session, b, ["add"])
        assert (connection.starts, connection.state) == (1, "ready")
        assert child_pids(EVERYTHING) == [pid]
    assert gone(pid)  # stopped (and reaped) when the runtime closed
    assert [m.content for m in tool_messages(a)] == ["Echo: from a"]
    assert [m.content for m in tool_messages(b)] == ["The sum of 4 and 5 is 9."]


async def test_an_eager_server_starts_with_the_runtime_and_stops_when_it_closes(
    tmp_path: Path, everything: list[str]
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything, start="eager")]))
    async with Runtime.open(kernel, store) as runtime:
        # Nobody composed an agent: the runtime started the server on its own.
        pid = await wait_until(lambda: child_pids(EVERYTHING), "the eager server to start")
        (connection,) = connections(runtime)
        await wait_until(lambda: connection.state == "ready", "the eager server to be ready")
        agent = await runtime.compose(agent="main", model=script())
        assert "everything__echo" in agent.tools.names()
        assert connection.starts == 1
    assert all(gone(p) for p in pid)
    assert child_pids(EVERYTHING) == []


async def test_a_connection_reads_closed_after_its_runtime_closes(
    tmp_path: Path, everything: list[str]
):
    """Closing the runtime stops the server on purpose: the connection says it was closed,
    not that the server exited (which reads as a crash, with its stderr quoted)."""
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    async with Runtime.open(kernel, store) as runtime:
        await runtime.compose(agent="main", model=script())
        (connection,) = connections(runtime)
        assert connection.state == "ready"
    assert connection.state == "closed"
    assert connection.failure is None
    # An agent that outlives its runtime does not start a server per call behind its back.
    with pytest.raises(ToolError, match='"everything" was stopped with its runtime'):
        await connection.call("echo", {"message": "late"})
    assert child_pids(EVERYTHING) == []


async def test_a_server_that_exited_before_its_runtime_closed_is_not_started_again_after(
    tmp_path: Path, everything: list[str]
):
    """The connections are the runtime's state (``Runtime.state``), closed with it: one whose
    server had exited reads closed too, and a late call starts no process of its own."""
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    async with Runtime.open(kernel, store) as runtime:
        await runtime.compose(agent="main", model=script())
        (connection,) = connections(runtime)
        assert list(runtime.state(SERVERS).connections.values()) == [connection]
        os.kill(only_child(EVERYTHING), signal.SIGKILL)
        await wait_until(lambda: connection.state == "exited", "the exit to be noticed")
    assert connection.state == "closed"
    with pytest.raises(ToolError, match='"everything" was stopped with its runtime'):
        await connection.call("echo", {"message": "late"})
    assert child_pids(EVERYTHING) == []


async def test_a_closed_runtime_with_mcp_servers_is_freed(tmp_path: Path, everything: list[str]):
    """The plugin keeps its connections per runtime without keeping the runtime alive."""
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=script())
        await runtime.run_session(agent, [])
    gone_runtime = weakref.ref(runtime)
    del runtime, agent
    gc.collect()
    assert gone_runtime() is None


# ---------------------------------------------------------------------------- crashes


async def test_a_server_killed_between_calls_is_restarted_for_the_next_call(
    tmp_path: Path, everything: list[str]
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    model = script(
        calls(call("everything__echo", message="one")),
        says("first"),
        calls(call("everything__echo", message="two")),
        says("second"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        (connection,) = connections(runtime)
        async with agent:
            await agent.run("echo one")
            first = only_child(EVERYTHING)
            os.kill(first, signal.SIGKILL)
            await wait_until(lambda: connection.state == "exited", "the exit to be noticed")
            assert connection.failure is not None
            assert connection.failure.startswith("it exited")
            assert await agent.run("echo two") == "completed"
        assert (connection.starts, connection.state) == (2, "ready")
        second = only_child(EVERYTHING)
        assert second != first
        assert gone(first)
    assert [(m.content, m.is_error) for m in tool_messages(agent)] == [
        ("Echo: one", False),
        ("Echo: two", False),
    ]


async def test_a_server_killed_during_a_call_fails_that_call_and_the_next_one_works(
    tmp_path: Path, everything: list[str]
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    model = script(
        calls(call(LONG, duration=30, steps=3)),
        says("it broke"),
        calls(call("everything__echo", message="after")),
        says("fine again"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        (connection,) = connections(runtime)
        pid = only_child(EVERYTHING)
        idle = chars_read(pid)
        async with agent:
            await agent.followup("run the long job")
            # The server read the request: the call is in flight.
            await wait_until(lambda: chars_read(pid) > idle, "the call to reach the server")
            killed = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            await agent.when_idle()
            assert time.monotonic() - killed < 20  # not the 30 s the operation would take
            await agent.run("echo after")
        assert connection.starts == 2
        assert only_child(EVERYTHING) != pid
    failed, after = tool_messages(agent)
    assert failed.is_error
    assert failed.name == LONG
    assert failed.content == (
        'error: the MCP server "everything" closed the connection during the call to '
        "trigger-long-running-operation (it exited or was stopped); the call may or may not "
        "have happened; the server is started again for the next call"
    )
    assert (after.content, after.is_error) == ("Echo: after", False)


# ---------------------------------------------------------------------------- time limits


async def test_a_call_that_outlasts_timeout_fails_and_the_server_stays_usable(
    tmp_path: Path, everything: list[str]
):
    entry = stdio("everything", everything, timeout=1)
    kernel, store = load(write_profile(tmp_path, [entry]))
    model = script(
        calls(call(LONG, duration=30, steps=3)),
        calls(call("everything__echo", message="still here")),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        started = time.monotonic()
        await runtime.run_session(agent, ["run the long job"])
        assert time.monotonic() - started < 20  # 1 s and the rest, not 30 s
        (connection,) = connections(runtime)
        assert (connection.starts, connection.state) == (1, "ready")
    hung, echo = tool_messages(agent)
    assert hung.is_error
    assert hung.content == (
        'error: the MCP server "everything" did not answer trigger-long-running-operation '
        "within 1 s (its timeout setting); the request was cancelled"
    )
    assert (echo.content, echo.is_error) == ("Echo: still here", False)


async def test_a_turn_cancelled_during_a_call_returns_promptly_and_the_server_stays_usable(
    tmp_path: Path, everything: list[str]
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(
            agent="main", model=script(calls(call(LONG, duration=30, steps=3)))
        )
        (connection,) = connections(runtime)
        pid = only_child(EVERYTHING)
        idle = chars_read(pid)
        stop = anyio.CancelScope()
        stopped: list[str] = []

        async def session() -> None:
            stopped.append(await runtime.run_session(agent, ["run the long job"], stop=stop))

        async with anyio.create_task_group() as group:
            group.start_soon(session)
            # The turn has asked for the call (what the server read before that may be the end
            # of the handshake, written after compose returned), then the server reads it.
            await wait_until(
                lambda: any(m.role == "assistant" and m.tool_calls for m in agent.messages),
                "the model's call",
            )
            await wait_until(lambda: chars_read(pid) > idle, "the call to reach the server")
            cancelled = time.monotonic()
            stop.cancel()
        assert time.monotonic() - cancelled < 10
        assert stopped == ["aborted"]
        (answer,) = tool_messages(agent)
        assert answer.name == LONG
        assert answer.is_error

        # The same server answers the next agent at once.
        again = await runtime.compose(
            agent="main", model=script(calls(call("everything__echo", message="hi")), says("ok"))
        )
        await runtime.run_session(again, ["echo"])
        assert [m.content for m in tool_messages(again)] == ["Echo: hi"]
        assert (connection.starts, child_pids(EVERYTHING)) == (1, [pid])


# ---------------------------------------------------------------------------- failing starts


@pytest.mark.parametrize("hosted", [True, False], ids=["open-runtime", "bare-runtime"])
async def test_a_command_that_does_not_exist_fails_the_compose(tmp_path: Path, hosted: bool):
    entry = {"name": "ghost", "command": "tether-test-no-such-server", "args": ["--serve"]}
    kernel, store = load(write_profile(tmp_path, [entry]))
    async with runtime_for(kernel, store, hosted) as runtime:
        with pytest.raises(AgentError) as caught:
            await runtime.compose(agent="main", model=script())
    error = caught.value
    assert error.code is ErrorCode.TOOL_SOURCE_FAILED
    assert error.message.startswith(
        'the MCP server "ghost" (`tether-test-no-such-server --serve`) could not start: '
    )
    assert "tether-test-no-such-server (command not found?)" in error.message
    assert await store.sessions() == []


@pytest.mark.parametrize("hosted", [True, False], ids=["open-runtime", "bare-runtime"])
async def test_a_server_that_exits_at_once_fails_the_compose_with_its_stderr(
    tmp_path: Path, hosted: bool
):
    complaint = "cannot open the database /nope/tools.db: permission denied"
    code = f"import sys; print({complaint!r}, file=sys.stderr); sys.exit(3)"
    kernel, store = load(write_profile(tmp_path, [stdio("broken", [sys.executable, "-c", code])]))
    async with runtime_for(kernel, store, hosted) as runtime:
        with pytest.raises(AgentError) as caught:
            await runtime.compose(agent="main", model=script())
    error = caught.value
    assert error.code is ErrorCode.TOOL_SOURCE_FAILED
    assert error.message.startswith('the MCP server "broken" (')
    assert "could not start" in error.message
    assert error.message.endswith(f"; its stderr ended: {complaint}")
    assert await store.sessions() == []


# ---------------------------------------------------------------------------- bare runtime


async def test_a_bare_runtime_lists_and_calls_with_one_process_per_request(
    tmp_path: Path, everything: list[str]
):
    starts = tmp_path / "starts"
    entry = stdio("everything", counted(everything, starts))
    kernel, store = load(write_profile(tmp_path, [entry], store="sqlite:sessions.db"))
    runtime = Runtime(kernel, store)  # no task group: nothing can host a server
    model = script(
        calls(call("everything__echo", message="bare"), call("everything__get-sum", a=1, b=2)),
        says("ok"),
    )
    agent = await runtime.compose(agent="main", model=model)
    assert "everything__echo" in agent.tools.names()
    assert len(lines(starts)) == 1  # listed by a server started for the listing
    assert child_pids(EVERYTHING) == []  # and stopped again
    assert await runtime.run_session(agent, ["echo and add"]) == "completed"
    # Both are read-only (safe): they ran side by side, each stored when it finished.
    assert sorted((m.content, m.is_error) for m in tool_messages(agent)) == [
        ("Echo: bare", False),
        ("The sum of 1 and 2 is 3.", False),
    ]
    assert len(lines(starts)) == 3  # one more per call
    assert len(set(lines(starts))) == 3
    assert child_pids(EVERYTHING) == []
    (connection,) = connections(runtime)
    assert not connection.hosted
    assert connection.starts == 0
    await store.aclose()
