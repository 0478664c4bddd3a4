"""What flows beside a tool's answer: progress (it keeps a call alive, up to a cap, and shows in
the live view), the server's log (into tether's, at its levels), tasks (a tool that must run as
one) and an HTTP server's restart as real servers announce it.

Against server-everything (stdio and streamable HTTP, pinned), ``flow_server.py`` (the Python SDK:
progress and logs), ``task_server.py`` (tasks, every request it reads written down) and
``http_server.py``."""

from __future__ import annotations

import logging
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tether.agents import Agent
from tether.loading import Kernel
from tether.models import ModelDelta
from tether.runtime import Runtime
from tether.store import SessionStore
from tether.testing import scaled
from tether_mcp_client import LOG_LEVELS, connections

from . import servers
from .conftest import (
    FLOW_SERVER,
    PATIENCE,
    TASK_SERVER,
    call,
    calls,
    load,
    says,
    script,
    stdio,
    tool_messages,
    wait_until,
    write_profile,
)

pytestmark = pytest.mark.anyio

#: The wait for a sign of life these tests give a call (the ``timeout`` setting).
WAIT = scaled(1.0)
LONG = "everything__trigger-long-running-operation"
RESEARCH = "everything__simulate-research-query"


def flow(**settings: object) -> dict[str, object]:
    return stdio("flow", [sys.executable, str(FLOW_SERVER)], **settings)


def tasks_entry(record: Path, **settings: object) -> dict[str, object]:
    return stdio("tasks", [sys.executable, str(TASK_SERVER), str(record)], **settings)


def progress_of(agent: Agent) -> list[ModelDelta]:
    """The ``tool_progress`` deltas the agent tells its listeners from now on."""
    heard: list[ModelDelta] = []
    agent.listen_deltas(
        lambda delta: heard.append(delta) if delta.kind == "tool_progress" else None
    )
    return heard


def recorded(record: Path) -> list[str]:
    return record.read_text(encoding="utf-8").splitlines() if record.exists() else []


# ---------------------------------------------------------------------------- progress


async def test_progress_keeps_a_call_alive_past_timeout_and_shows_in_the_live_view(
    tmp_path: Path,
):
    """Five steps of 0.4 s each: 2 s in all, twice the wait, but never 1 s without progress."""
    kernel, store = load(write_profile(tmp_path, [flow(timeout=WAIT)]))
    model = script(
        calls(call("flow__steady", steps=5, every=0.4 * WAIT)),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        assert await runtime.run_session(agent, ["work"]) == "completed"
    (result,) = tool_messages(agent)
    assert (result.content, result.is_error) == ("done after 5 steps", False)
    texts = [delta.text for delta in heard]
    assert texts[0] == "1/5 step 1"
    assert texts[-1] == "5/5 step 5"
    assert {(delta.name, delta.call_id) for delta in heard} == {
        ("flow__steady", result.tool_call_id)
    }


async def test_a_call_without_progress_fails_at_timeout(tmp_path: Path):
    kernel, store = load(write_profile(tmp_path, [flow(timeout=WAIT)]))
    model = script(calls(call("flow__quiet", seconds=5 * WAIT)), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["work"])
    (result,) = tool_messages(agent)
    assert result.is_error
    assert result.content == (
        f'error: the MCP server "flow" did not answer quiet within {WAIT:g} s (its timeout '
        "setting); the request was cancelled"
    )


async def test_no_clock_runs_while_a_person_is_asked(tmp_path: Path):
    """A call quiet for three times its wait succeeds when a person is asked meanwhile (what
    an elicitation on the server's behalf does)."""
    kernel, store = load(write_profile(tmp_path, [flow(timeout=WAIT, max_call_seconds=WAIT)]))
    model = script(calls(call("flow__quiet", seconds=3 * WAIT)), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        (connection,) = connections(runtime)
        async with anyio.create_task_group() as group:
            group.start_soon(runtime.run_session, agent, ["work"])
            await wait_until(lambda: connection.running_calls, "the call")
            with connection.waiting_on_a_person():
                await wait_until(lambda: tool_messages(agent), "the answer")
    (result,) = tool_messages(agent)
    assert (result.content, result.is_error) == ("done quietly", False)


async def test_progress_does_not_keep_a_call_alive_past_max_call_seconds(tmp_path: Path):
    cap = 2 * WAIT
    kernel, store = load(write_profile(tmp_path, [flow(timeout=WAIT, max_call_seconds=cap)]))
    model = script(
        calls(call("flow__steady", steps=100, every=0.3 * WAIT)),
        calls(call("flow__steady", steps=1, every=0)),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        await runtime.run_session(agent, ["work"])
    capped, after = tool_messages(agent)
    assert capped.is_error
    assert capped.content == (
        f'error: the MCP server "flow" did not finish steady within {cap:g} s (its '
        "max_call_seconds setting); the request was cancelled"
    )
    assert heard  # it did report progress
    assert (after.content, after.is_error) == ("done after 1 steps", False)


async def test_everything_reports_progress_over_stdio(tmp_path: Path, everything: list[str]):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    model = script(calls(call(LONG, duration=1, steps=3)), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        assert await runtime.run_session(agent, ["work"]) == "completed"
    (result,) = tool_messages(agent)
    assert result.content.startswith("Long running operation completed.")
    assert [delta.text for delta in heard] == ["1/3", "2/3", "3/3"]


# ---------------------------------------------------------------------------- logging


async def test_a_servers_log_messages_reach_tethers_log_at_their_levels(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG, logger="tether.mcp.flow")
    kernel, store = load(write_profile(tmp_path, [flow()]))
    model = script(calls(call("flow__chatty")), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["talk"])

        def logged() -> list[tuple[int, str]]:
            return [
                (record.levelno, record.getMessage())
                for record in caplog.records
                if record.name == "tether.mcp.flow"
            ]

        await wait_until(lambda: len(logged()) == 4, "four log records")
    assert logged() == [
        (logging.DEBUG, "flow.work: a debug message"),
        (logging.INFO, "flow.work: a notice message"),
        (logging.WARNING, "flow.work: a warning message"),
        (logging.ERROR, "flow.work: a error message"),
    ]
    assert [m.content for m in tool_messages(agent)] == ["said"]


async def test_everything_logs_at_the_level_asked_for(
    tmp_path: Path, everything: list[str], caplog: pytest.LogCaptureFixture
):
    """``log_level = "debug"`` asks for every message (``logging/setLevel``); the server sends
    one at once when its simulated logging is switched on, at a random level."""
    caplog.set_level(logging.DEBUG, logger="tether.mcp.everything")
    entry = stdio("everything", everything, log_level="debug")
    kernel, store = load(write_profile(tmp_path, [entry]))
    model = script(calls(call("everything__toggle-simulated-logging")), says("on"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["log"])
        record = await wait_until(
            lambda: next((r for r in caplog.records if r.name == "tether.mcp.everything"), None),
            "a log record of the server",
        )
    assert record is not None
    # One of eight ("Debug-level message", ..., "Alert level-message", sic), at its level.
    said = record.getMessage().split()[0].split("-")[0].lower()
    assert said in LOG_LEVELS
    assert record.levelno == LOG_LEVELS[said]


# ---------------------------------------------------------------------------- tasks


async def test_a_tool_that_requires_a_task_runs_as_one_and_optional_ones_plainly(
    tmp_path: Path,
):
    record = tmp_path / "requests.txt"
    kernel, store = load(write_profile(tmp_path, [tasks_entry(record)]))
    model = script(
        calls(call("tasks__research", topic="otters", steps=2)),
        calls(call("tasks__plain")),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        assert await runtime.run_session(agent, ["research"]) == "completed"
    research, plain = tool_messages(agent)
    assert (research.content, research.is_error) == ("report on otters", False)
    assert (plain.content, plain.is_error) == ("plain ran", False)
    assert [delta.text for delta in heard] == ["step 0", "step 1", "step 2"]
    assert [line for line in recorded(record) if line != "tools/list"] == [
        "initialize",
        "tools/call research task",
        "tasks/get t1",
        "tasks/get t1",
        "tasks/get t1",
        "tasks/result t1",
        "tools/call plain",
    ]


async def test_a_cancelled_turn_cancels_its_task(tmp_path: Path):
    record = tmp_path / "requests.txt"
    kernel, store = load(write_profile(tmp_path, [tasks_entry(record)]))
    model = script(calls(call("tasks__research", topic="otters", steps=0)))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        stop = anyio.CancelScope()
        stopped: list[str] = []

        async def session() -> None:
            stopped.append(await runtime.run_session(agent, ["research"], stop=stop))

        async with anyio.create_task_group() as group:
            group.start_soon(session)
            await wait_until(lambda: "tasks/get t1" in recorded(record), "a poll of the task")
            stop.cancel()
        assert stopped == ["aborted"]
    assert heard
    assert recorded(record)[-1] == "tasks/cancel t1"


async def test_a_task_that_outlasts_max_call_seconds_is_cancelled(tmp_path: Path):
    record = tmp_path / "requests.txt"
    entry = tasks_entry(record, timeout=WAIT, max_call_seconds=WAIT)
    kernel, store = load(write_profile(tmp_path, [entry]))
    model = script(calls(call("tasks__research", topic="otters", steps=0)), says("gave up"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["research"])
    (result,) = tool_messages(agent)
    assert result.content == (
        f'error: the MCP server "tasks" did not finish research within {WAIT:g} s (its '
        "max_call_seconds setting); the request was cancelled"
    )
    assert recorded(record)[-1] == "tasks/cancel t1"


async def test_everythings_research_query_runs_as_a_task_over_stdio(
    tmp_path: Path, everything: list[str]
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    await _research(kernel, store)


# ---------------------------------------------------------------------------- HTTP


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Everything:
    """server-everything in streamable-HTTP mode on one port, started (and started again)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        process = self.process = subprocess.Popen(
            self.argv,
            env={**os.environ, "PORT": str(self.port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        line = ""
        deadline = time.monotonic() + PATIENCE
        with selectors.DefaultSelector() as selector:
            selector.register(process.stderr, selectors.EVENT_READ)
            while "listening" not in line and time.monotonic() < deadline:
                if process.poll() is not None:
                    break
                if selector.select(timeout=0.5):
                    line = process.stderr.readline()
        if "listening" not in line:
            self.stop()
            pytest.fail(f"server-everything did not listen on {self.port}: {line!r}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.communicate(timeout=scaled(10))
            self.process = None


@pytest.fixture
def everything_http() -> Iterator[Everything]:
    server = Everything(servers.everything_http_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_everything_over_http_reports_progress_and_runs_its_task(
    tmp_path: Path, everything_http: Everything
):
    kernel, store = load(
        write_profile(tmp_path, [{"name": "everything", "url": everything_http.url}])
    )
    model = script(calls(call(LONG, duration=1, steps=2)), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        assert await runtime.run_session(agent, ["work"]) == "completed"
    assert [delta.text for delta in heard] == ["1/2", "2/2"]
    await _research(kernel, store)


async def test_a_restarted_everything_answering_400_is_reached_again(
    tmp_path: Path, everything_http: Everything
):
    """server-everything answers a session it does not know with 400 "No valid session ID"
    (the spec says 404): tether connects again and sends the call once more."""
    kernel, store = load(
        write_profile(tmp_path, [{"name": "everything", "url": everything_http.url}])
    )
    model = script(
        calls(call("everything__echo", message="one")),
        says("first"),
        calls(call("everything__echo", message="two")),
        says("second"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        async with agent:
            assert await agent.run("one") == "completed"
            everything_http.stop()
            everything_http.start()  # the same port, a new process that knows no session
            assert await agent.run("two") == "completed"
        (connection,) = connections(runtime)
        assert (connection.starts, connection.state) == (2, "ready")
    first, second = tool_messages(agent)
    assert (first.content, second.content, second.is_error) == ("Echo: one", "Echo: two", False)


async def test_a_call_cut_by_an_http_servers_restart_is_reported_not_sent_again(
    tmp_path: Path, everything_http: Everything
):
    """The call reached the server (it reported progress) when the server went away: sending
    it again could run it twice, so the model reads that it may or may not have run; the
    next call reaches the restarted server."""
    kernel, store = load(
        write_profile(tmp_path, [{"name": "everything", "url": everything_http.url}])
    )
    model = script(
        calls(call(LONG, duration=30, steps=30)),
        calls(call("everything__echo", message="after")),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        async with anyio.create_task_group() as group:
            group.start_soon(runtime.run_session, agent, ["work"])
            await wait_until(lambda: heard, "the call's first progress")
            everything_http.stop()
            everything_http.start()
    cut, after = tool_messages(agent)
    assert cut.is_error
    assert "the call may or may not have happened" in cut.content, cut.content
    assert (after.content, after.is_error) == ("Echo: after", False)


async def _research(kernel: Kernel, store: SessionStore) -> None:
    """server-everything's research query (its task tool) answers a report; its status
    messages are the call's progress."""
    model = script(calls(call(RESEARCH, topic="otters")), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        heard = progress_of(agent)
        assert await runtime.run_session(agent, ["research"]) == "completed"
    (result,) = tool_messages(agent)
    assert not result.is_error, result.content
    assert "# Research Report: otters" in result.content
    assert heard[0].text == "Gathering sources..."


def test_tether_run_prints_a_calls_progress_on_standard_error(tmp_path: Path):
    """The live view: each progress of a running call is a line on standard error (never the
    answer on standard output)."""
    (tmp_path / "s.toml").write_text(
        "[[steps]]\n"
        'tool_calls = [{ name = "flow__steady", arguments = { steps = 2, every = 0.3 } }]\n'
        "[[steps]]\n"
        'text = "done"\n',
        encoding="utf-8",
    )
    write_profile(tmp_path, [flow()], extra='model = "scripted:s.toml"\n')
    drop = ("TETHER_DEBUG", "TETHER_DISABLE_PLUGIN_AUTOLOAD")
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "work"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env={k: v for k, v in os.environ.items() if k not in drop},
    )
    assert result.returncode == 0, result.stderr
    progress = [line for line in result.stderr.splitlines() if line.startswith("[flow__")]
    assert progress == ["[flow__steady: 1/2 step 1]", "[flow__steady: 2/2 step 2]"]
    assert "step 1" not in result.stdout
    assert "done" in result.stdout.splitlines()
