"""Servers that answer badly (``hostile_server.py`` over stdio, ``hostile_http_server.py`` over
streamable HTTP, real processes): a result far over ``max_message_bytes`` is refused as it
streams in, and a result that is not JSON-RPC (``null``, a bad escape, the wrong shape) is a
tool error at once, never a wait for the call's timeout; the server answers the next call; no
SDK traceback reaches the terminal (``tether run`` in a subprocess)."""

from __future__ import annotations

import resource
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.errors import PluginError
from tether.runtime import Runtime
from tether_mcp_client import connections

from ..processes import plugin_env
from .conftest import PATIENCE, call, calls, load, says, script, stdio, tool_messages, write_profile

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
HOSTILE = [sys.executable, str(HERE / "hostile_server.py")]
HOSTILE_HTTP = HERE / "hostile_http_server.py"
#: Each call's timeout: what a bad answer used to wait out. The tests ask for far less.
TIMEOUT = 90
#: "At once": well under TIMEOUT, generous for a busy machine.
PROMPT = 45.0
MIB = 1 << 20


async def one_call(profile: Path, tool: str, **arguments: object) -> tuple[str, float, str]:
    """Call ``bad__TOOL``, then ``bad__echo``: the first result's text, how long the first
    call's turn took, and the echo's text (the server still answers)."""
    kernel, store = load(profile)
    model = script(
        calls(call(f"bad__{tool}", **arguments)),
        calls(call("bad__echo", text="still here")),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        started = time.monotonic()
        await runtime.run_session(agent, ["go"])
        took = time.monotonic() - started
        (connection,) = connections(runtime)
        assert connection.starts == 1  # a bad answer does not cost the server
    first, echo = tool_messages(agent)
    assert first.is_error, first.content
    assert (echo.content, echo.is_error) == ("still here", False)
    return first.content, took, echo.content


# ---------------------------------------------------------------------------- stdio


@pytest.mark.parametrize(
    ("tool", "says_why"),
    [
        ("null", "sent a malformed answer to null: it is not a JSON-RPC message (result: "),
        ("bad_escape", "sent a malformed answer to bad_escape: it is not JSON (Invalid JSON: "),
        ("lone_surrogate", "sent a malformed answer to lone_surrogate: it is not JSON ("),
        ("wrong_shape", "sent a malformed result for wrong_shape: content: Input should be a"),
    ],
)
async def test_a_malformed_result_over_stdio_is_a_tool_error_at_once(
    tmp_path: Path, tool: str, says_why: str
):
    profile = write_profile(tmp_path, [stdio("bad", HOSTILE, timeout=TIMEOUT)])
    text, took, _ = await one_call(profile, tool)
    assert took < PROMPT, f"the bad answer waited {took:.0f} s"
    assert text.startswith(f'error: the MCP server "bad" {says_why}'), text
    assert "\n" not in text


@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
async def test_a_result_over_the_cap_over_stdio_is_refused_as_it_streams_in(
    tmp_path: Path, id_last: bool
):
    profile = write_profile(tmp_path, [stdio("bad", HOSTILE, timeout=TIMEOUT)])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text, took, _ = await one_call(profile, "huge", megabytes=300, id_last=id_last)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert took < PROMPT, f"the oversized answer took {took:.0f} s"
    assert text == (
        'error: the MCP server "bad" answered huge with a message larger than 16,777,216 bytes '
        "(its max_message_bytes setting): it was not read; raise max_message_bytes if results "
        "this large are expected"
    )
    # At most the cap (and what decoding it costs), not 300 MB. (The peak of this process
    # may already be higher from earlier tests: then this proves nothing, and costs nothing.)
    assert grown_mib < 100, f"the test process grew by {grown_mib:.0f} MiB"


async def test_the_cap_is_a_setting_and_a_result_under_it_is_read(tmp_path: Path):
    entry = stdio("bad", HOSTILE, timeout=TIMEOUT, max_message_bytes=2 * MIB)
    profile = write_profile(tmp_path, [entry])
    text, _, _ = await one_call(profile, "huge", megabytes=3)
    assert "larger than 2,097,152 bytes (its max_message_bytes setting)" in text

    kernel, store = load(write_profile(tmp_path, [stdio("bad", HOSTILE, timeout=TIMEOUT)]))
    model = script(calls(call("bad__huge", megabytes=3)), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["go"])
    (result,) = tool_messages(agent)
    assert not result.is_error
    assert "[cut: the result of bad__huge was 3,145,728 characters" in result.content


def test_the_cap_is_bounded_in_the_profile(tmp_path: Path):
    profile = write_profile(tmp_path, [stdio("bad", HOSTILE, max_message_bytes=1000)])
    with pytest.raises(PluginError, match=r"servers\[0\]\.max_message_bytes"):
        load(profile)


def test_tether_run_prints_no_sdk_traceback_for_bad_answers(tmp_path: Path):
    """The user's terminal: ``tether run`` with a scripted model calling each bad tool."""
    (tmp_path / "script.toml").write_text(
        "[[steps]]\n"
        'tool_calls = [{ name = "bad__null" }, { name = "bad__bad_escape" }, '
        '{ name = "bad__huge", arguments = { megabytes = 40 } }]\n\n'
        "[[steps]]\n"
        'text = "done"\n',
        encoding="utf-8",
    )
    write_profile(
        tmp_path,
        [stdio("bad", HOSTILE, timeout=TIMEOUT)],
        extra='model = "scripted:script.toml"\n',
    )
    env = plugin_env()
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "go"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 2,
    )
    assert time.monotonic() - started < TIMEOUT, "a bad answer waited out its timeout"
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert len(result.stderr.splitlines()) <= 3, result.stderr
    assert "done" in result.stdout


# ---------------------------------------------------------------------------- HTTP


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = subprocess.Popen(
        [sys.executable, str(HOSTILE_HTTP)],
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
            pytest.fail(f"hostile_http_server.py did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        server.kill()
        server.communicate(timeout=10)


@pytest.mark.parametrize(
    ("tool", "arguments", "says_why"),
    [
        ("huge", {"megabytes": 300}, "answered huge with a message larger than 16,777,216 bytes"),
        (
            "huge_event",
            {"megabytes": 40},
            "answered huge_event with a message larger than 16,777,216 bytes",
        ),
        ("null", {}, "sent a malformed answer to null: it is not a JSON-RPC message (result: "),
        ("bad_escape", {}, "sent a malformed answer to bad_escape: it is not JSON (Invalid JSON"),
    ],
)
async def test_a_bad_answer_over_http_is_a_tool_error_at_once(
    tmp_path: Path, endpoint: str, tool: str, arguments: dict[str, object], says_why: str
):
    profile = write_profile(tmp_path, [{"name": "bad", "url": endpoint, "timeout": TIMEOUT}])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text, took, _ = await one_call(profile, tool, **arguments)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert took < PROMPT, f"the bad answer took {took:.0f} s"
    assert text.startswith(f'error: the MCP server "bad" {says_why}'), text
    assert "\n" not in text
    assert grown_mib < 100, f"the test process grew by {grown_mib:.0f} MiB"
