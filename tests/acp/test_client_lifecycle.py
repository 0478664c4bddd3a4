"""An ACP child's process and requests under interruption, errors and timeouts: nothing is left
running or unretrieved, and nothing the agent said is lost. Real processes (tests/acp/peers),
real SQLite stores."""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tether.runtime import compose_agent
from tether.store import DescriptorEvent, SQLiteStore, TurnEnded
from tether.subagents import SubagentStartRequest
from tether.testing import scaled

from ..processes import needs_sigint, plugin_env
from .test_provider import PEERS, agent_table, alive, build, delegating, prompt_in_flight

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


async def wait_for_file(path: Path, seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while not path.exists():
            await anyio.sleep(0.02)


def descriptors(events: list[Any], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if isinstance(e, DescriptorEvent) and e.kind == kind]


# ------------------------------------------------------------------ no loose tasks


async def test_cancelling_a_child_still_in_initialize_leaves_no_task_behind(tmp_path, store):
    marker, pids = tmp_path / "initialize", tmp_path / "pids.json"
    runtime = build(
        tmp_path,
        agent_table("echo", "slow.py", "--stall-initialize", str(marker), "--pid-file", str(pids)),
    )
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        parent = await compose_agent(runtime, store, model=delegating("x"))
        async with parent:
            run = await runtime.subagents.start("echo", SubagentStartRequest("hi", parent))
            await wait_for_file(marker)
            await run.dispose()  # cancels the child while initialize is in flight
            result = await run.result()
        gc.collect()  # an orphaned task reports its exception when it is collected
        await anyio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert result.stop_reason == "aborted"
    assert [c.get("message") for c in reported] == []
    assert not alive(json.loads(pids.read_text())["pid"])


@needs_sigint
def test_ctrl_c_while_a_child_is_in_initialize_exits_cleanly(tmp_path):
    marker, pids = tmp_path / "initialize", tmp_path / "pids.json"
    peer = [str(PEERS / "slow.py"), "--stall-initialize", str(marker), "--pid-file", str(pids)]
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["acp", "subagent"]\n'
        "[[plugin.acp.agents]]\n"
        'name = "staller"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps(peer)}\n"
        '[plugin.subagent]\nprovider = "staller"\nmax_depth = "provider-managed"\n'
        '[agent.main]\nmodel = "scripted:script.toml"\n'
    )
    (tmp_path / "script.toml").write_text(
        "[[steps]]\n"
        'tool_calls = [{ name = "subagent", arguments = { description = "d", prompt = "p" } }]\n'
    )
    env = plugin_env()
    tether = str(Path(sys.executable).parent / "tether")
    process = subprocess.Popen(
        [tether, "run", "go"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    try:
        anyio.run(wait_for_file, marker, 60.0)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=scaled(60))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = stderr.decode(errors="replace")
    assert process.returncode == 130, text + stdout.decode(errors="replace")
    assert "never retrieved" not in text
    assert "Traceback" not in text
    assert not alive(json.loads(pids.read_text())["pid"])


# ------------------------------------------------------------------ nothing said is lost


async def test_text_streamed_before_a_cancel_is_kept_in_the_childs_log(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "slow.py"))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("take your time", parent))
        with anyio.fail_after(scaled(30)):  # the agent has said "working" and waits for more
            await prompt_in_flight(run)
        await run.dispose()
        result = await run.result()
    events = [s.event for s in await store.events(run.id)]
    assert result.stop_reason == "aborted"
    assert descriptors(events, "acp/partial") == [{"text": "working", "reason": "cancelled"}]


async def test_text_streamed_before_a_timeout_is_kept_in_the_childs_log(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "slow.py", prompt_timeout=1.5))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("take forever", parent))
        with anyio.fail_after(scaled(30)):
            result = await run.result()
        await run.dispose()
    events = [s.event for s in await store.events(run.id)]
    assert result.stop_reason == "error"
    assert descriptors(events, "acp/partial") == [{"text": "working", "reason": "timeout"}]


async def test_an_agents_error_data_is_in_the_diagnostic_and_its_text_kept(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "tools.py"))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start(
            "echo", SubagentStartRequest("explode:disk quota exceeded", parent)
        )
        with anyio.fail_after(scaled(30)):
            result = await run.result()
        await run.dispose()
    events = [s.event for s in await store.events(run.id)]
    assert result.stop_reason == "error"
    assert "session/prompt failed: Internal error (-32603): disk quota exceeded" in (
        result.diagnostic or ""
    )
    assert descriptors(events, "acp/partial") == [{"text": "partial", "reason": "error"}]
    (end,) = [e for e in events if isinstance(e, TurnEnded)]
    assert "disk quota exceeded" in (end.error or "")


async def test_a_crash_keeps_the_text_streamed_before_it(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "crash.py"))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("do it", parent))
        with anyio.fail_after(scaled(30)):
            result = await run.result()
        await run.dispose()
    events = [s.event for s in await store.events(run.id)]
    assert result.stop_reason == "error"
    assert "exit status 3" in (result.diagnostic or "")
    assert "boom: simulated crash" in (result.diagnostic or "")
    assert descriptors(events, "acp/partial") == [{"text": "about to crash", "reason": "error"}]
