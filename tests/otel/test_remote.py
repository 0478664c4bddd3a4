"""Remote children in traces and stats: a child whose model is another agent (a served tether
over A2A, or over ACP, each a process of its own) is the conventions' client span of a remote
agent, ``invoke_agent {remote}``, its turn is named after that agent, usage it did not report is
left out (not 0), and the usage it did report is recorded in the mirror's log and shown by
``tether sessions stats`` as remote, apart from what tether sent over the wire.

Every span tether makes also carries the attributes the GenAI conventions require of its kind
(``gen_ai.operation.name``; ``gen_ai.provider.name`` on inference and agent spans)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

import tether_a2a
import tether_acp
import tether_otel
import tether_subagent_tools
from tether.models import Usage
from tether.runtime import compose_agent
from tether.store import AssistantMessage, SQLiteStore
from tether.testing import make_runtime, scaled, write_profile

from ..a2a.test_provider import agent_table
from ..a2a.test_serve import Server, free_port
from ..acp.test_provider import delegating, mirror_events, tool_results
from ..processes import plugin_env
from .conftest import Recorded
from .remote_peer import USAGE

pytestmark = pytest.mark.anyio

#: An A2A agent that reports usage as the ADK does, run as a process of its own.
ADK_SHAPED = Path(__file__).parent / "adk_shaped_agent.py"


class AdkShapedAgent:
    """:data:`ADK_SHAPED` serving on a free port; ``url`` once it serves."""

    def __init__(self, folder: Path) -> None:
        port_file = folder / "adk-port"
        self.process = subprocess.Popen(
            [sys.executable, str(ADK_SHAPED), str(port_file)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + scaled(60)
        while not (port_file.exists() and port_file.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the ADK-shaped agent did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=scaled(10))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=scaled(10))


TETHER = Path(sys.executable).parent / "tether"
PLUGINS = {
    "a2a": tether_a2a,
    "acp": tether_acp,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
    "otel": tether_otel.OtelPlugin,
}
#: The attributes the GenAI conventions require, by operation (gen-ai-spans.md,
#: gen-ai-agent-spans.md): inference and agent spans name their provider.
REQUIRED = {
    "chat": ("gen_ai.operation.name", "gen_ai.provider.name"),
    "invoke_agent": ("gen_ai.operation.name", "gen_ai.provider.name"),
    "execute_tool": ("gen_ai.operation.name",),
}
USAGE_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def check_required(spans: list[ReadableSpan]) -> None:
    """Every span has its kind's required attributes, and an operation it should have."""
    assert spans
    for span in spans:
        if span.instrumentation_scope is None or span.instrumentation_scope.name != "tether":
            continue  # another library's (the ACP SDK's own)
        found = attributes(span)
        operation = found["gen_ai.operation.name"]
        assert span.name.split()[0] == operation
        missing = [key for key in REQUIRED[operation] if not found.get(key)]
        assert not missing, f"{span.name} lacks {missing}"


def parent_profile(folder: Path, plugin: str, agents: str, name: str = "remote") -> Path:
    """A parent whose ``subagent`` tool delegates to the agent ``name`` of ``plugin``."""
    return write_profile(
        folder,
        f'[tether]\nplugins = ["{plugin}", "subagent", "otel"]\n'
        'store = "sqlite:sessions.db"\n'
        f"{agents}"
        f'[plugin.subagent]\nprovider = "{name}"\nmax_depth = "provider-managed"\n'
        '[plugin.otel]\nexporter = "none"\n[agent.main]\n',
    )


async def delegate(profile: Path, folder: Path) -> tuple[Any, Any, list[Any]]:
    """Run the parent once (it delegates ``look it up``); the parent, the mirror's header
    and the mirror's log."""
    runtime = make_runtime(profile, PLUGINS)
    store = SQLiteStore(folder / "sessions.db")
    try:
        parent = await compose_agent(runtime, store, model=delegating("look it up"))
        async with parent:
            with anyio.fail_after(scaled(60)):
                assert await parent.run("go") == "completed"
        child, events = await mirror_events(store, parent)
    finally:
        await store.aclose()
    return parent, child, events


async def stats(profile: Path, session_id: str) -> tuple[Any, str]:
    """``tether sessions stats --tree`` of ``session_id``, run as a user runs it (plugins found
    by their entry points): its JSON, and its table."""
    environment = plugin_env()
    base = [str(TETHER), "sessions", "stats", session_id, "--tree", "--profile", str(profile)]
    said: list[str] = []
    for command in ([*base, "--json"], base):
        with anyio.fail_after(scaled(60)):
            done = await anyio.run_process(
                command, cwd=profile.parent, env=environment, check=False
            )
        assert done.returncode == 0, done.stderr.decode()
        said.append(done.stdout.decode())
    return json.loads(said[0]), said[1]


def check_remote_spans(recorded: Recorded, name: str, provider: str) -> ReadableSpan:
    """The child's spans: its turn and its request named after the remote agent, the request
    a CLIENT span with the usage the agent reported, the turn without usage (it has none)."""
    spans = recorded.spans()
    check_required(spans)
    (call,) = recorded.named("execute_tool subagent")
    turn, request = sorted(recorded.named(f"invoke_agent {name}"), key=lambda s: s.kind.value)
    assert turn.kind == SpanKind.INTERNAL
    assert request.kind == SpanKind.CLIENT
    assert turn.parent is not None
    assert call.context is not None
    assert turn.parent.span_id == call.context.span_id
    assert request.parent is not None
    assert turn.context is not None
    assert request.parent.span_id == turn.context.span_id
    found = attributes(request)
    assert found["gen_ai.operation.name"] == "invoke_agent"
    assert found["gen_ai.provider.name"] == provider
    assert found["gen_ai.agent.name"] == name
    assert "gen_ai.request.model" not in found  # the remote agent's models are its own
    assert found["gen_ai.usage.input_tokens"] == USAGE.input_tokens
    assert found["gen_ai.usage.output_tokens"] == USAGE.output_tokens
    assert found["gen_ai.usage.cache_read.input_tokens"] == USAGE.cached_input_tokens
    on_turn = attributes(turn)
    assert on_turn["gen_ai.agent.name"] == name
    assert on_turn["gen_ai.provider.name"] == provider
    assert not [key for key in USAGE_KEYS if key in on_turn]  # unknown: left out, not 0
    # The parent's own turn and request: named after it, no usage (its model reported none).
    (main,) = recorded.named("invoke_agent main")
    assert not [key for key in USAGE_KEYS if key in attributes(main)]
    for chat in recorded.named("chat"):
        assert not [key for key in USAGE_KEYS if key in attributes(chat)]
    return request


def check_remote_usage(events: list[Any], document: Any, table: str, child_id: str) -> None:
    """The mirror's log keeps what the agent reported apart from what tether was billed
    (nothing), and stats shows it as remote, per request and in the tree's totals."""
    (answer,) = [e for e in events if isinstance(e, AssistantMessage)]
    assert answer.remote_usage == USAGE
    assert answer.usage == Usage()  # tether was billed nothing
    root, child = document["sessions"]
    assert child["session"] == child_id
    (row,) = child["requests"]
    assert row["input_tokens"] is None  # tether was billed nothing for it
    assert row["total_tokens"] > 0  # what went over the wire, estimated
    assert row["remote_input_tokens"] == USAGE.input_tokens
    assert row["remote_output_tokens"] == USAGE.output_tokens
    assert row["remote_cached_tokens"] == USAGE.cached_input_tokens
    assert root["totals"]["remote_requests"] == 0
    totals = document["totals"]
    assert totals["remote_requests"] == 1
    assert totals["remote_input_tokens"] == USAGE.input_tokens
    assert totals["remote_output_tokens"] == USAGE.output_tokens
    assert totals["input_tokens"] == 0  # the remote's tokens are not mixed in
    assert "remote in/out" in table
    assert f"{USAGE.input_tokens}/{USAGE.output_tokens}" in table
    assert (
        f"remote agents reported {USAGE.input_tokens} input and {USAGE.output_tokens} output"
        f" tokens (1 request(s), not counted above)"
    ) in table.splitlines()[-1]


async def test_an_a2a_child_is_a_client_span_of_the_remote_agent_with_the_usage_it_reported(
    tmp_path: Path, recorded: Recorded
):
    """A served tether over A2A reports its turn's usage in the task's metadata."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "served.toml").write_text(
        '[tether]\nstore = "sqlite:served.db"\n'
        '[agent.main]\nmodel = "function:tests.otel.remote_peer:brain"\n'
    )
    server = Server(served / "served.toml", free_port())
    try:
        profile = parent_profile(
            tmp_path, "a2a", "[plugin.a2a]\n" + agent_table("remote", server.url)
        )
        parent, child, events = await delegate(profile, tmp_path)
    finally:
        assert server.stop() == 0
    assert tool_results(parent) == ["done: look it up"]
    request = check_remote_spans(recorded, "remote", "tether.a2a")
    found = attributes(request)
    assert found["tether.remote.protocol"] == "a2a"
    assert found["server.address"] == "127.0.0.1"
    assert found["server.port"] == int(server.url.rsplit(":", 1)[1].split("/")[0])
    document, table = await stats(profile, parent.session_id)
    check_remote_usage(events, document, table, child.id)


async def test_an_acp_child_is_a_client_span_of_the_remote_agent_with_the_usage_it_reported(
    tmp_path: Path, recorded: Recorded
):
    """A served tether over ACP reports its turn's usage in the prompt's answer."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "served.toml").write_text(
        '[tether]\nstore = "sqlite:served.db"\n'
        '[agent.main]\nmodel = "function:tests.otel.remote_peer:brain"\n'
    )
    root = Path(__file__).parents[2]
    agents = (
        '[[plugin.acp.agents]]\nname = "remote"\n'
        f"command = {json.dumps(str(TETHER))}\n"
        f'args = ["acp", "--profile", {json.dumps(str(served / "served.toml"))}]\n'
        f'env = {{ TETHER_DISABLE_PLUGIN_AUTOLOAD = "0", PYTHONPATH = {json.dumps(str(root))} }}\n'
        f"cwd = {json.dumps(str(served))}\n"
    )
    profile = parent_profile(tmp_path, "acp", agents)
    parent, child, events = await delegate(profile, tmp_path)
    assert tool_results(parent) == ["done: look it up"]
    request = check_remote_spans(recorded, "remote", "tether.acp")
    found = attributes(request)
    assert found["tether.remote.protocol"] == "acp"
    assert "server.address" not in found  # a local process
    document, table = await stats(profile, parent.session_id)
    check_remote_usage(events, document, table, child.id)


@pytest.mark.parametrize("streaming", [True, False])
async def test_usage_an_adk_agent_puts_on_its_events_is_summed_once_per_model_call(
    tmp_path: Path, recorded: Recorded, streaming: bool
):
    """The ADK's per-event usage: each artifact counted once, at its latest chunk (the whole
    answer after the partial ones), whether the events stream or come as the final task."""
    peer = AdkShapedAgent(tmp_path)
    try:
        agents = "[plugin.a2a]\n" + agent_table("adk", peer.url, streaming=streaming)
        profile = parent_profile(tmp_path, "a2a", agents, name="adk")
        parent, _, events = await delegate(profile, tmp_path)
    finally:
        peer.stop()
    assert tool_results(parent) == ["Hello world\n\nDone."]
    expected = Usage(input_tokens=2200, output_tokens=80, cached_input_tokens=512)
    (answer,) = [e for e in events if isinstance(e, AssistantMessage)]
    assert answer.remote_usage == expected
    (request,) = [s for s in recorded.named("invoke_agent adk") if s.kind == SpanKind.CLIENT]
    found = attributes(request)
    assert found["gen_ai.usage.input_tokens"] == 2200
    assert found["gen_ai.usage.output_tokens"] == 80
    assert found["gen_ai.usage.cache_read.input_tokens"] == 512
