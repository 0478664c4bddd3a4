"""The A2A subagent provider against an agent served by the a2a-sdk's own server, in a process
of its own (tests/a2a/peers/sample_agent.py): one-shot and continuable children, the answer's
pieces as they stream, input-required, a failed task, cancel, headers from the environment,
and ``tether check`` reading the card."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import tether_a2a
import tether_subagent_tools
from tether.errors import ErrorCode, PluginError
from tether.models import ModelDelta
from tether.runtime import compose_agent
from tether.store import DescriptorEvent, SQLiteStore, TurnEnded
from tether.testing import make_runtime, scaled, write_profile

from ..acp.test_provider import delegating, mirror_events, results, task_of, tool_results
from ..processes import plugin_env

pytestmark = pytest.mark.anyio

PEER = Path(__file__).parent / "peers" / "sample_agent.py"


class Agent:
    """A sample agent process; ``url`` once it serves."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.port_file = folder / f"port-{time.monotonic_ns()}"
        self.process = subprocess.Popen(
            [sys.executable, str(PEER), str(self.port_file), *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (self.port_file.exists() and self.port_file.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the sample agent did not start: {self.stderr()}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port_file.read_text()}"

    def started(self) -> list[str]:
        path = Path(f"{self.port_file}.started")
        return path.read_text().split("\n")[:-1] if path.exists() else []

    def cancels(self) -> list[str]:
        path = Path(f"{self.port_file}.cancels")
        return path.read_text().split("\n")[:-1] if path.exists() else []

    def stderr(self) -> str:
        if self.process.poll() is None:
            return ""
        return self.process.stderr.read() if self.process.stderr else ""

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=scaled(10))
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture
def sample(tmp_path) -> Iterator[Agent]:
    agent = Agent(tmp_path)
    try:
        yield agent
    finally:
        agent.stop()


def agent_table(name: str, url: str, **settings: Any) -> str:
    lines = ["[[plugin.a2a.agents]]", f'name = "{name}"', f"url = {json.dumps(url)}"]
    for key, value in settings.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def build(tmp_path: Path, *agents: str, subagent: str = "") -> Any:
    profile = (
        '[tether]\nplugins = ["a2a", "subagent"]\n[plugin.a2a]\n'
        + "".join(agents)
        + "[plugin.subagent]\n"
        + (subagent or 'provider = "remote"\nmax_depth = "provider-managed"\n')
        + "[agent.main]\n"
    )
    path = write_profile(tmp_path, profile)
    return make_runtime(
        path, {"a2a": tether_a2a, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


CONTINUABLE = 'provider = "remote"\nmax_depth = "provider-managed"\nbackground = "continuable"\n'


async def test_a_one_shot_child_answers_through_a2a_and_is_mirrored_in_storage(
    tmp_path, store, sample
):
    runtime = build(tmp_path, agent_table("remote", sample.url))
    parent = await compose_agent(runtime, store, model=delegating("echo hello there"))
    async with parent:
        with anyio.fail_after(scaled(60)):
            await parent.run("go")
    # The artifact's three pieces, then the second artifact (tether's note stays home).
    assert tool_results(parent) == ["echo: hello there\n\n(message 1 of context)"]
    child, events = await mirror_events(store, parent)
    assert (child.parent_session, child.origin) == (parent.session_id, "subagent")
    (context,) = [e for e in events if isinstance(e, DescriptorEvent) and e.kind == "a2a/context"]
    assert set(context.data) == {"context_id"}


async def test_the_answers_pieces_stream_as_they_come(tmp_path, store, sample):
    runtime = build(tmp_path, agent_table("remote", sample.url))
    heard: list[str] = []
    parent = await compose_agent(runtime, store, model=delegating("echo abcdef"))

    def hear(agent: Any, delta: ModelDelta) -> None:
        if agent.session_id != parent.session_id and delta.kind == "text":
            heard.append(delta.text)

    runtime.listen_deltas(hear)
    async with parent:
        with anyio.fail_after(scaled(60)):
            await parent.run("go")
    assert heard == ["echo: abc", "def", "(message 1 of context)"]


async def test_a_continuable_child_continues_its_context_after_a_restart(tmp_path, store, sample):
    runtime = build(tmp_path, agent_table("remote", sample.url), subagent=CONTINUABLE)
    parent = await compose_agent(runtime, store, model=delegating("echo one", background=True))
    manager = runtime.subagents.continuation
    async with parent:
        with anyio.fail_after(scaled(60)):
            await parent.run("go")
            child_id = task_of(tool_results(parent)[0])
            await manager.wait_quiet(parent)
            await manager.followup(parent, child_id, "echo two")
            await manager.wait_quiet(parent)
    assert results(parent) == [
        "echo: one\n\n(message 1 of context)",
        "echo: two\n\n(message 2 of context)",
    ]
    # Another runtime (a restart of the parent's process) restores the child from the store.
    again = build(tmp_path, agent_table("remote", sample.url), subagent=CONTINUABLE)
    restored = await compose_agent(
        again, store, session_id=parent.session_id, model=delegating("unused")
    )
    async with restored:
        with anyio.fail_after(scaled(60)):
            await again.subagents.continuation.followup(restored, child_id, "echo three")
            await again.subagents.continuation.wait_quiet(restored)
    assert results(restored)[-1] == "echo: three\n\n(message 3 of context)"
    events = [s.event for s in await store.events(child_id)]
    contexts = {e.data["context_id"] for e in events if getattr(e, "kind", "") == "a2a/context"}
    assert len(contexts) == 1


async def test_a_question_answers_the_turn_and_the_follow_up_answers_the_task(
    tmp_path, store, sample
):
    runtime = build(tmp_path, agent_table("remote", sample.url), subagent=CONTINUABLE)
    parent = await compose_agent(runtime, store, model=delegating("ask", background=True))
    manager = runtime.subagents.continuation
    async with parent:
        with anyio.fail_after(scaled(60)):
            await parent.run("go")
            child_id = task_of(tool_results(parent)[0])
            await manager.wait_quiet(parent)
            await manager.followup(parent, child_id, "blue")
            await manager.wait_quiet(parent)
    assert results(parent) == ["Which colour?", "you said: blue"]
    events = [s.event for s in await store.events(child_id)]
    recorded = [e.data for e in events if getattr(e, "kind", "") == "a2a/context"]
    assert "task_id" in recorded[0]  # the task waited for input...
    assert "task_id" not in recorded[-1]  # ...and no longer does


async def test_an_output_schema_is_asked_for_checked_and_asked_again(tmp_path, store, sample):
    schema = (
        '{ type = "object", required = ["owner", "date"], properties = '
        '{ owner = { type = "string" }, date = { type = "string" } } }'
    )
    extract = (
        'provider = "remote"\nmax_depth = "provider-managed"\n'
        "[[plugin.subagent.tools]]\n"
        'provider = "remote"\ntool_name = "extract"\nmax_depth = "provider-managed"\n'
        f"output_schema = {schema}\n"
    )
    runtime = build(tmp_path, agent_table("remote", sample.url), subagent=extract)
    parent = await compose_agent(runtime, store, model=delegating("facts", tool="extract"))
    async with parent:
        with anyio.fail_after(scaled(60)):
            await parent.run("go")
    (result,) = tool_results(parent)
    assert json.loads(result) == {"owner": "Priya", "date": "Thursday"}
    _, events = await mirror_events(store, parent)
    said = [e.content for e in events if type(e).__name__ in ("UserMessage", "AssistantMessage")]
    assert said[-4:-2] == ["facts", "Priya, on Thursday (schema seen)"]  # asked in the task...
    assert said[-2].startswith("Your final answer must be JSON")  # ...and asked again


async def test_a_failed_task_ends_the_childs_turn_with_the_agents_reason(tmp_path, store, sample):
    runtime = build(tmp_path, agent_table("remote", sample.url))
    parent = await compose_agent(runtime, store, model=delegating("fail"))
    async with parent:
        with anyio.fail_after(scaled(60)):
            await parent.run("go")
    _, events = await mirror_events(store, parent)
    (end,) = [e for e in events if isinstance(e, TurnEnded)]
    assert end.stop_reason == "error"
    assert "the task ended failed: the sample agent failed on purpose" in (end.error or "")


async def test_cancelling_the_childs_turn_cancels_the_remote_task(tmp_path, store, sample):
    runtime = build(tmp_path, agent_table("remote", sample.url))
    parent = await compose_agent(runtime, store, model=delegating("slow"))
    async with parent:
        async with anyio.create_task_group() as group:
            group.start_soon(parent.run, "go")
            with anyio.fail_after(scaled(60)):
                while not await store.sessions(parent=parent.session_id):
                    await anyio.sleep(0.05)
                while not sample.started():  # the task runs on the agent
                    await anyio.sleep(0.05)
            # ... and its first event (the task's id, which a cancel names) reaches the child.
            await anyio.sleep(scaled(0.5))
            await parent.cancel()
        with anyio.fail_after(scaled(30)):
            while not sample.cancels():
                await anyio.sleep(0.05)
    (line,) = sample.cancels()
    assert line.startswith("cancelled ")


async def test_headers_come_from_the_environment_and_the_trace_goes_along(
    tmp_path, store, monkeypatch
):
    monkeypatch.setenv("SAMPLE_AUTH", "Bearer s3cret")
    agent = Agent(tmp_path, "--token", "s3cret")
    try:
        table = agent_table("remote", agent.url, headers_env={"Authorization": "SAMPLE_AUTH"})
        runtime = build(tmp_path, table)
        parent = await compose_agent(runtime, store, model=delegating("headers"))
        async with parent:
            with anyio.fail_after(scaled(60)):
                await parent.run("go")
        assert tool_results(parent) == ["Bearer s3cret -"]  # no tracer: no traceparent
        # Without the variable the child's turn ends with an error that names it.
        monkeypatch.delenv("SAMPLE_AUTH")
        parent = await compose_agent(runtime, store, model=delegating("headers"))
        async with parent:
            with anyio.fail_after(scaled(60)):
                await parent.run("go")
        assert "$SAMPLE_AUTH, which is not set" in tool_results(parent)[0]
    finally:
        agent.stop()


def test_check_reads_the_card_and_fails_loud_when_it_cannot(tmp_path, sample):
    ok = build(tmp_path / "ok", agent_table("remote", sample.url))
    (provider,) = [p for p in ok.subagents.providers() if p.name == "remote"]
    provider.check()  # the card is there, with a JSON-RPC interface
    down = build(tmp_path / "down", agent_table("remote", "http://127.0.0.1:9/"))
    (provider,) = [p for p in down.subagents.providers() if p.name == "remote"]
    with pytest.raises(PluginError) as failed:
        provider.check()
    assert failed.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert "could not be read from http://127.0.0.1:9/" in str(failed.value)


def test_check_refuses_an_agent_without_a_json_rpc_interface(tmp_path):
    agent = Agent(tmp_path, "--no-jsonrpc")
    try:
        runtime = build(tmp_path, agent_table("remote", agent.url))
        (provider,) = [p for p in runtime.subagents.providers() if p.name == "remote"]
        with pytest.raises(PluginError, match=r"offers no JSON-RPC interface .*GRPC"):
            provider.check()
    finally:
        agent.stop()


def test_tether_run_delegates_to_the_remote_agent(tmp_path, sample):
    """What a user types: ``tether run`` on a profile whose subagent provider is an A2A agent."""
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["a2a", "subagent"]\nstore = "sqlite:s.db"\n[plugin.a2a]\n'
        + agent_table("remote", sample.url)
        + '[plugin.subagent]\nprovider = "remote"\nmax_depth = "provider-managed"\n'
        + '[agent.main]\nmodel = "scripted:s.toml"\n',
    )
    (tmp_path / "s.toml").write_text(
        '[[steps]]\ntool_calls = [{ name = "subagent", arguments = '
        '{ description = "Ask", prompt = "echo from the shell" } }]\n\n'
        '[[steps]]\nexpect = "echo: from the shell"\ntext = "the agent echoed"\n'
    )
    env = plugin_env()
    done = subprocess.run(
        [sys.executable, "-m", "tether", "run", "go", "--profile", str(profile)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the agent echoed" in done.stdout.splitlines()


def test_tether_check_on_a_profile_with_an_agent_that_is_down(tmp_path):
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["a2a", "subagent"]\n[plugin.a2a]\n'
        + agent_table("remote", "http://127.0.0.1:9")
        + '[plugin.subagent]\nprovider = "remote"\nmax_depth = "provider-managed"\n'
        + '[agent.main]\nmodel = "scripted:s.toml"\n',
    )
    (tmp_path / "s.toml").write_text('[[steps]]\ntext = "hi"\n')
    env = plugin_env()
    done = subprocess.run(
        [sys.executable, "-m", "tether", "check", "--profile", str(profile)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert done.returncode != 0
    assert "PLUGIN_SETTINGS_INVALID" in done.stderr
    assert "could not be read from http://127.0.0.1:9" in done.stderr


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('name = "remote"\nurl = "ftp://x"\n', "http or https URL"),
        ('name = "remote"\nurl = "http://x"\nheaders = { "a b" = "c" }\n', "not a valid HTTP"),
        ('name = "Remote"\nurl = "http://x"\n', "name"),
    ],
)
def test_bad_settings_fail_at_load_and_say_where(tmp_path, table, problem):
    with pytest.raises(PluginError) as failed:
        build(tmp_path, "[[plugin.a2a.agents]]\n" + table)
    assert failed.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert problem in str(failed.value)
