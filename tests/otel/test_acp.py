"""A trace crosses ACP: tether delegating to a ``tether acp`` process sends the trace context of
its request in the prompt's ``_meta`` (W3C ``traceparent``, the ACP convention), and the served
tether keeps it with the message, so the turn it runs continues the caller's trace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from opentelemetry.trace import SpanKind

import tether_acp
import tether_otel
import tether_subagent_tools
from tether.runtime import Runtime
from tether.store import InboxAccepted, SQLiteStore
from tether.testing import make_kernel, scaled, write_profile

from .conftest import Recorded

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"

PARENT_SCRIPT = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "Check", prompt = "go" } }]

[[steps]]
text = "checked"
"""


async def test_the_prompt_carries_the_callers_trace_to_the_served_tether(
    tmp_path: Path, recorded: Recorded
):
    child = tmp_path / "child"
    child.mkdir()
    write_profile(child, '[[steps]]\ntext = "all good"\n', "script.toml")
    served = write_profile(
        child,
        '[tether]\nstore = "sqlite:.tether/sessions.db"\n\n'
        '[agent.main]\nmodel = "scripted:script.toml"\n',
    )
    parent = tmp_path / "parent"
    parent.mkdir()
    write_profile(parent, PARENT_SCRIPT, "script.toml")
    profile = write_profile(
        parent,
        f"""
[tether]
plugins = ["acp", "subagent", "otel"]
store = "sqlite:sessions.db"

[[plugin.acp.agents]]
name = "tether-child"
command = {json.dumps(str(TETHER))}
args = ["acp", "--profile", {json.dumps(str(served))}]
env = {{ TETHER_DISABLE_PLUGIN_AUTOLOAD = "0" }}

[plugin.subagent]
provider = "tether-child"
max_depth = "provider-managed"
run_in_background = false

[plugin.otel]
exporter = "none"

[agent.main]
model = "scripted:script.toml"
""",
    )
    kernel = make_kernel(
        profile,
        {
            "acp": tether_acp,
            "subagent": tether_subagent_tools.SubagentToolsPlugin,
            "otel": tether_otel.OtelPlugin,
        },
    )
    async with Runtime.open(kernel, SQLiteStore(parent / "sessions.db")) as runtime:
        agent = await runtime.compose()
        async with agent:
            with anyio.fail_after(scaled(60)):
                assert await agent.run("check it") == "completed"
    spans = recorded.spans()
    (call,) = recorded.named("execute_tool subagent")
    assert call.context is not None
    # The served process logged the message with the trace context it was sent.
    store = SQLiteStore(child / ".tether" / "sessions.db")
    try:
        (header,) = await store.sessions()
        (accepted,) = [
            s.event for s in await store.events(header.id) if isinstance(s.event, InboxAccepted)
        ]
    finally:
        await store.aclose()
    assert accepted.trace is not None
    version, trace_id, span_id, _ = accepted.trace["traceparent"].split("-")
    assert version == "00"
    assert int(trace_id, 16) == call.context.trace_id  # the caller's trace
    # Its parent is the request the caller made to the ACP agent: the client span of the
    # remote agent, inside the call's child turn (the child's model is the ACP agent).
    (sender,) = [
        s for s in spans if s.context is not None and s.context.span_id == int(span_id, 16)
    ]
    assert sender.name == "invoke_agent tether-child"
    assert sender.kind == SpanKind.CLIENT
    assert dict(sender.attributes or {})["gen_ai.provider.name"] == "tether.acp"


async def test_an_a2a_childs_request_carries_the_trace_in_http_headers(
    tmp_path: Path, recorded: Recorded
):
    """tether-a2a sends the trace context of the child's request (its ``invoke_agent``
    client span) as the W3C ``traceparent`` header; the sample agent answers with the header
    it got."""
    import tether_a2a
    from tests.a2a.test_provider import Agent, agent_table
    from tests.acp.test_provider import delegating, tool_results
    from tether.runtime import compose_agent
    from tether.testing import make_runtime

    sample = Agent(tmp_path)
    try:
        profile = write_profile(
            tmp_path,
            '[tether]\nplugins = ["a2a", "subagent", "otel"]\n[plugin.a2a]\n'
            + agent_table("remote", sample.url)
            + '[plugin.subagent]\nprovider = "remote"\nmax_depth = "provider-managed"\n'
            + '[plugin.otel]\nexporter = "none"\n[agent.main]\n',
        )
        runtime = make_runtime(
            profile,
            {
                "a2a": tether_a2a,
                "subagent": tether_subagent_tools.SubagentToolsPlugin,
                "otel": tether_otel.OtelPlugin,
            },
        )
        store = SQLiteStore(tmp_path / "sessions.db")
        try:
            parent = await compose_agent(runtime, store, model=delegating("headers"))
            async with parent:
                with anyio.fail_after(scaled(60)):
                    await parent.run("go")
        finally:
            await store.aclose()
    finally:
        sample.stop()
    (answer,) = tool_results(parent)
    authorization, traceparent = answer.split(" ")
    assert authorization == "-"
    _, trace_id, span_id, _ = traceparent.split("-")
    (call,) = recorded.named("execute_tool subagent")
    assert call.context is not None
    assert int(trace_id, 16) == call.context.trace_id
    (sender,) = [
        s
        for s in recorded.spans()
        if s.context is not None and s.context.span_id == int(span_id, 16)
    ]
    assert sender.name == "invoke_agent remote"
    assert sender.kind == SpanKind.CLIENT
    assert dict(sender.attributes or {})["gen_ai.provider.name"] == "tether.a2a"
    # The sample agent reports no usage: none is on the span (not zeros).
    assert "gen_ai.usage.input_tokens" not in dict(sender.attributes or {})
