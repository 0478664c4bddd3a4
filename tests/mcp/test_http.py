"""A streamable-HTTP MCP server (``http_server.py``, started here as a real process on a free port
of 127.0.0.1) reached through a profile's ``url``, with a bearer token the profile takes from
the environment (``headers = { Authorization = "Bearer ${TOKEN}" }``) and the server checks."""

from __future__ import annotations

import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.errors import AgentError, ErrorCode
from tether.runtime import Runtime
from tether.testing import scaled
from tether_mcp_client import connections

from .conftest import (
    HTTP_SERVER,
    PATIENCE,
    call,
    calls,
    load,
    says,
    script,
    tool_messages,
    write_profile,
)

pytestmark = pytest.mark.anyio

TOKEN = "tether-test-token-4711"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The server's URL; the server runs for this module's tests and is killed after them."""
    server = subprocess.Popen(
        [sys.executable, str(HTTP_SERVER), TOKEN],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(server.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + PATIENCE
            line = ""
            while not line and time.monotonic() < deadline and server.poll() is None:
                if selector.select(timeout=0.5):
                    line = server.stdout.readline()
        if not line.startswith("PORT "):
            server.kill()
            _, errors = server.communicate(timeout=scaled(10))
            pytest.fail(f"http_server.py did not start: {line!r}; stderr: {errors[-2000:]}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        server.kill()
        server.communicate(timeout=scaled(10))


def http_profile(folder: Path, url: str, **settings: object) -> Path:
    entry: dict[str, object] = {
        "name": "web",
        "url": url,
        "headers": {"Authorization": "Bearer ${TOKEN}"},
        **settings,
    }
    return write_profile(folder, [entry])


async def test_an_agent_calls_tools_over_http_with_the_header_from_the_environment(
    tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TOKEN", TOKEN)
    kernel, store = load(http_profile(tmp_path, endpoint))
    model = script(
        calls(call("web__whoami")),
        calls(call("web__add", a=20, b=22)),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        assert agent.tools.names() == ["web__whoami", "web__add"]
        add = agent.tools.get("web__add")
        assert add is not None
        assert add.safe
        await runtime.run_session(agent, ["who am I, and what is 20 + 22?"])
        (connection,) = connections(runtime)
        assert (connection.state, connection.starts) == ("ready", 1)
    whoami, added = tool_messages(agent)
    assert whoami.content.splitlines()[0] == f"authorization: Bearer {TOKEN}"
    assert added.content.splitlines()[0] == "20 + 22 = 42"
    assert not whoami.is_error
    assert not added.is_error
    first, _, third = model.requests
    assert [t.name for t in first.tools] == ["web__whoami", "web__add"]
    assert third.messages[-1].content == added.content


async def test_a_bare_runtime_reaches_the_http_server_per_request(
    tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TOKEN", TOKEN)
    kernel, store = load(http_profile(tmp_path, endpoint))
    runtime = Runtime(kernel, store)
    model = script(calls(call("web__add", a=1, b=1)), says("two"))
    agent = await runtime.compose(agent="main", model=model)
    await runtime.run_session(agent, ["1 + 1"])
    (added,) = tool_messages(agent)
    assert added.content.splitlines()[0] == "1 + 1 = 2"
    assert not added.is_error


async def test_a_wrong_token_fails_the_compose_naming_the_server(
    tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("TOKEN", "not-the-token")
    kernel, store = load(http_profile(tmp_path, endpoint, startup_timeout=scaled(20)))
    async with Runtime.open(kernel, store) as runtime:
        started = time.monotonic()
        with pytest.raises(AgentError) as caught:
            await runtime.compose(agent="main", model=script())
        assert time.monotonic() - started < scaled(15)  # refused, not waited out
    error = caught.value
    assert error.code is ErrorCode.TOOL_SOURCE_FAILED
    assert error.message.startswith(f'the MCP server "web" ({endpoint}) could not start: ')
    assert "401" in error.message
    assert await store.sessions() == []


async def test_a_header_naming_an_unset_variable_fails_the_compose_saying_which(
    tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("TOKEN", raising=False)
    kernel, store = load(http_profile(tmp_path, endpoint))
    async with Runtime.open(kernel, store) as runtime:
        with pytest.raises(AgentError) as caught:
            await runtime.compose(agent="main", model=script())
    error = caught.value
    assert error.code is ErrorCode.TOOL_SOURCE_FAILED
    assert "header Authorization uses ${TOKEN}, which is not set in the environment" in (
        error.message
    )


def start_server(port: int = 0) -> tuple[subprocess.Popen[str], int]:
    """http_server.py on ``port`` (0: any), once it listens."""
    server = subprocess.Popen(
        [sys.executable, str(HTTP_SERVER), TOKEN, str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    deadline = time.monotonic() + PATIENCE
    line = ""
    with selectors.DefaultSelector() as selector:
        selector.register(server.stdout, selectors.EVENT_READ)
        while not line and time.monotonic() < deadline and server.poll() is None:
            if selector.select(timeout=0.5):
                line = server.stdout.readline()
    if not line.startswith("PORT "):
        server.kill()
        server.communicate(timeout=scaled(10))
        pytest.fail(f"http_server.py did not start on port {port}: {line!r}")
    return server, int(line.split()[1])


def stop_server(server: subprocess.Popen[str]) -> None:
    server.kill()
    server.communicate(timeout=scaled(10))


async def test_an_http_server_that_restarted_is_reached_again_without_a_failed_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A restarted HTTP server no longer knows tether's session (404) and refuses before it
    runs anything: tether connects again and sends the call once more."""
    monkeypatch.setenv("TOKEN", TOKEN)
    server, port = start_server()
    try:
        kernel, store = load(http_profile(tmp_path, f"http://127.0.0.1:{port}/mcp"))
        model = script(
            calls(call("web__add", a=1, b=2)),
            says("first"),
            calls(call("web__add", a=3, b=4)),
            says("second"),
        )
        async with Runtime.open(kernel, store) as runtime:
            agent = await runtime.compose(agent="main", model=model)
            async with agent:
                assert await agent.run("1 + 2") == "completed"
                stop_server(server)
                server, _ = start_server(port)  # the same address, a new process
                assert await agent.run("3 + 4") == "completed"
            (connection,) = connections(runtime)
            assert (connection.starts, connection.state) == (2, "ready")
    finally:
        stop_server(server)
    first, second = tool_messages(agent)
    assert first.content.splitlines()[0] == "1 + 2 = 3"
    assert second.content.splitlines()[0] == "3 + 4 = 7"
    assert not second.is_error
