"""tether-otel's spans and metrics, read back from the SDK's in-memory exporter and reader:
their names, kinds, parents and attributes follow the OpenTelemetry GenAI conventions, and a
delegated child's turns are spans of the call that started them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import tether
import tether_fork
import tether_otel
import tether_spawn
import tether_subagent_tools
from tether.agents import Tool, Tracer
from tether.errors import ErrorCode, TetherError
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.testing import RuntimeSessionHost, make_kernel, scaled

from .conftest import Recorded

DELEGATION_PLUGINS = {
    "spawn": tether_spawn,
    "fork": tether_fork,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
    "otel": tether_otel.OtelPlugin,
}

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[2]
#: What running an example in the checkout leaves behind (its store), not copied.
IGNORED = shutil.ignore_patterns(".tether")

PROFILE = """\
[tether]
plugins = ["otel", "notes"]

[plugin.otel]
exporter = "none"
{otel}

[agent.main]
model = "scripted:script.toml"
"""

SCRIPT = """\
[[steps]]
text = "Let me look."
tool_calls = [
  { name = "lookup", arguments = { word = "launch" } },
  { name = "broken", arguments = {} },
]
usage = { input_tokens = 120, output_tokens = 8, cached_input_tokens = 100, \
cache_write_input_tokens = 15 }

[[steps]]
text = "Thursday."
usage = { input_tokens = 150, output_tokens = 3 }
"""


def _lookup(arguments: dict[str, object], context: object) -> str:
    return f"{arguments['word']}: Thursday 10 December"


def _broken(arguments: dict[str, object], context: object) -> str:
    raise RuntimeError("the notes are gone")


class Notes:
    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        return [
            Tool(
                "lookup",
                "Look a word up in the notes.",
                _lookup,
                parameters={"type": "object", "properties": {"word": {"type": "string"}}},
            ),
            Tool("broken", "A tool that fails.", _broken),
        ]


async def _run(tether_kernel, tmp_path: Path, *prompts: str, otel: str = "", script: str = SCRIPT):
    (tmp_path / "script.toml").write_text(script)
    kernel = tether_kernel(
        PROFILE.format(otel=otel), {"otel": tether_otel.OtelPlugin, "notes": Notes()}
    )
    store = SQLiteStore(tmp_path / "sessions.db")
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose()
        async with agent:
            for prompt in prompts:
                await agent.run(prompt)
        return agent.session_id


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


async def test_a_turn_is_an_invoke_agent_span_holding_its_chats_and_tool_calls(
    tether_kernel, tmp_path, recorded: Recorded
):
    session = await _run(tether_kernel, tmp_path, "When do we launch?")
    spans = recorded.spans()
    (turn,) = recorded.named("invoke_agent")
    assert turn.name == "invoke_agent main"
    assert turn.kind is SpanKind.INTERNAL
    assert turn.parent is None  # the message carried no trace: a trace of its own
    attributes = dict(turn.attributes or {})
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "main"
    assert attributes["gen_ai.conversation.id"] == session
    assert attributes["gen_ai.request.model"] == "script.toml"
    assert attributes["tether.turn"] == 1
    assert attributes["tether.turn.stop_reason"] == "completed"
    assert attributes["tether.turn.steps"] == 2
    assert attributes["gen_ai.usage.input_tokens"] == 270
    assert attributes["gen_ai.usage.output_tokens"] == 11
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 15
    assert turn.status.status_code is StatusCode.UNSET

    chats = [s for s in _children(spans, turn) if s.name.startswith("chat")]
    assert [c.name for c in chats] == ["chat script.toml", "chat script.toml"]
    first = dict(chats[0].attributes or {})
    assert chats[0].kind is SpanKind.CLIENT
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "tether.scripted"
    assert first["gen_ai.request.model"] == "script.toml"
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first["gen_ai.usage.input_tokens"] == 120
    assert first["gen_ai.usage.cache_read.input_tokens"] == 100
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 15
    assert first["tether.step"] == 1
    assert dict(chats[1].attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)

    tools = [s for s in _children(spans, turn) if s.name.startswith("execute_tool")]
    assert sorted(t.name for t in tools) == ["execute_tool broken", "execute_tool lookup"]
    lookup = next(t for t in tools if t.name == "execute_tool lookup")
    attributes = dict(lookup.attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "lookup"
    assert attributes["gen_ai.tool.type"] == "function"
    assert str(attributes["gen_ai.tool.call.id"])
    assert lookup.status.status_code is StatusCode.UNSET
    broken = next(t for t in tools if t.name == "execute_tool broken")
    assert broken.status.status_code is StatusCode.ERROR
    assert dict(broken.attributes or {})["error.type"] == "tool_error"
    # The calls ran after the first answer and before the second request.
    assert chats[0].end_time <= lookup.start_time <= lookup.end_time <= chats[1].start_time  # type: ignore[operator]

    # Content is opt-in: none by default.
    for span in spans:
        keys = set(span.attributes or {})
        assert not keys & {
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        }, span.name


async def test_capture_content_records_messages_and_tool_arguments_and_results(
    tether_kernel, tmp_path, recorded: Recorded
):
    await _run(tether_kernel, tmp_path, "When do we launch?", otel="capture_content = true")
    chats = recorded.named("chat")
    first = dict(chats[0].attributes or {})
    messages = json.loads(str(first["gen_ai.input.messages"]))
    assert messages[-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "When do we launch?"}],
    }
    output = json.loads(str(first["gen_ai.output.messages"]))
    assert output[0]["parts"][1] == {
        "type": "tool_call",
        "id": output[0]["parts"][1]["id"],
        "name": "lookup",
        "arguments": {"word": "launch"},
    }
    definitions = json.loads(str(first["gen_ai.tool.definitions"]))
    assert {d["name"] for d in definitions} == {"lookup", "broken"}
    second = json.loads(str(dict(chats[1].attributes or {})["gen_ai.input.messages"]))
    assert second[-2]["parts"][0]["type"] == "tool_call_response"
    (lookup,) = recorded.named("execute_tool lookup")
    attributes = dict(lookup.attributes or {})
    assert json.loads(str(attributes["gen_ai.tool.call.arguments"])) == {"word": "launch"}
    assert attributes["gen_ai.tool.call.result"] == "launch: Thursday 10 December"


async def test_a_message_sent_inside_a_span_continues_that_trace(
    tether_kernel, tmp_path, recorded: Recorded
):
    """An application's request span is the parent of the turn its message starts, though
    the turn runs later, in the agent's own task."""
    tracer = trace.get_tracer("the application")
    with tracer.start_as_current_span("handle request") as request:
        await _run(tether_kernel, tmp_path, "When do we launch?")
    (turn,) = recorded.named("invoke_agent")
    assert turn.parent is not None
    assert turn.parent.span_id == request.get_span_context().span_id
    assert turn.context is not None
    assert turn.context.trace_id == request.get_span_context().trace_id


async def test_a_failed_turn_is_an_error_span(tether_kernel, tmp_path, recorded: Recorded):
    script = '[[steps]]\nexpect = "something else"\ntext = "no"\n'
    await _run(tether_kernel, tmp_path, "When do we launch?", script=script)
    (turn,) = recorded.named("invoke_agent")
    assert turn.status.status_code is StatusCode.ERROR
    assert dict(turn.attributes or {})["tether.turn.stop_reason"] == "error"
    (chat,) = recorded.named("chat")
    assert chat.status.status_code is StatusCode.ERROR
    assert dict(chat.attributes or {})["error.type"]


async def test_metrics_count_tokens_durations_turns_and_tool_calls(
    tether_kernel, tmp_path, recorded: Recorded
):
    await _run(tether_kernel, tmp_path, "When do we launch?")
    found = recorded.metrics()
    tokens = {
        point[0]["gen_ai.token.type"]: point[1] for point in found["gen_ai.client.token.usage"]
    }
    assert tokens == {"input": (2, 270), "output": (2, 11)}
    ((attributes, (count, _)),) = found["gen_ai.client.operation.duration"]
    assert count == 2
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "tether.scripted",
        "gen_ai.request.model": "script.toml",
    }
    assert found["tether.turns"] == [
        ({"gen_ai.agent.name": "main", "tether.turn.stop_reason": "completed"}, 1)
    ]
    calls = {
        (a["gen_ai.tool.name"], a["tether.tool.error"]): v for a, v in found["tether.tool_calls"]
    }
    assert calls == {("lookup", False): 1, ("broken", True): 1}


async def test_the_delegation_example_is_one_trace_per_root_turn(tmp_path, recorded: Recorded):
    """The delegation example with otel added: the second turn's three children (a spawned
    child, a fork, a child with an output schema) are turns inside the calls that started
    them, each with its own model requests: one trace holds the whole tree."""
    example = tmp_path / "delegation"
    shutil.copytree(ROOT / "examples" / "delegation", example, ignore=IGNORED)
    profile = example / "tether.toml"
    text = profile.read_text().replace('"subagent"]', '"subagent", "otel"]')
    text = text.replace(".tether/sessions.db", "sessions.db")
    profile.write_text(text + '\n[plugin.otel]\nexporter = "none"\n')
    kernel = make_kernel(profile, DELEGATION_PLUGINS)
    store = SQLiteStore(example / "sessions.db")
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose()
        async with agent:
            await agent.run("We launch on Thursday 10 December; Priya owns it.")
            await agent.run("Plan the launch announcement.")
    spans = recorded.spans()
    first, second = sorted(
        (s for s in spans if s.name.startswith("invoke_agent") and s.parent is None),
        key=lambda s: s.start_time or 0,
    )
    assert second.context is not None
    trace_id = second.context.trace_id
    session = dict(second.attributes or {})["gen_ai.conversation.id"]
    calls = {s.name: s for s in _children(spans, second) if s.name.startswith("execute_tool")}
    assert set(calls) == {"execute_tool subagent", "execute_tool fork", "execute_tool extract"}
    for name, call in calls.items():
        turns = [s for s in _children(spans, call) if s.name.startswith("invoke_agent")]
        assert len(turns) == 1, name
        child = turns[0]
        assert child.context is not None
        assert child.context.trace_id == trace_id
        attributes = dict(child.attributes or {})
        assert attributes["tether.session.parent"] == session
        assert attributes["tether.delegation.depth"] == 1
        assert attributes["tether.message.source"] == "subagent"
        # The child's own model request is inside its turn.
        assert [s.name for s in _children(spans, child)] == ["chat script.toml"]
    in_trace = [s for s in spans if s.context is not None and s.context.trace_id == trace_id]
    # The turn, its two chats, three calls, three child turns and their chats.
    assert len(in_trace) == 1 + 2 + 3 + 3 + 3
    assert all(s.context is not None and s.context.trace_id != trace_id for s in [first])


async def test_hosted_children_and_their_schema_retries_are_spans_of_the_calls(
    tmp_path, recorded: Recorded
):
    """Children on a child host (a second runtime on the same store, as a cluster's workers)
    run in another runtime's tasks: the trace reaches their turns through the store, and the
    retries sent to a child whose answers miss its output schema carry it too."""
    example = tmp_path / "delegation"
    shutil.copytree(ROOT / "examples" / "delegation", example, ignore=IGNORED)
    profile = example / "tether.toml"
    text = profile.read_text().replace('"subagent"]', '"subagent", "otel"]')
    profile.write_text(text + '\n[plugin.otel]\nexporter = "none"\n')
    script = example / "script.toml"
    facts = """{"owner": "Priya", "date": "Thursday 10 December"}"""
    script.write_text(script.read_text().replace(facts, '{"owner": "Priya"}'))  # no date
    kernel = make_kernel(profile, DELEGATION_PLUGINS)
    here, there = SQLiteStore(example / "sessions.db"), SQLiteStore(example / "sessions.db")
    async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
        runtime.child_host = RuntimeSessionHost(driver)
        agent = await runtime.compose()
        async with agent:
            with anyio.fail_after(scaled(30)):
                await agent.run("We launch on Thursday 10 December; Priya owns it.")
                await agent.run("Plan the launch announcement.")
    spans = recorded.spans()
    second = max(
        (s for s in spans if s.name.startswith("invoke_agent") and s.parent is None),
        key=lambda s: s.start_time or 0,
    )
    calls = {s.name: s for s in _children(spans, second) if s.name.startswith("execute_tool")}
    assert set(calls) == {"execute_tool subagent", "execute_tool fork", "execute_tool extract"}
    sources = {
        name: [
            dict(s.attributes or {})["tether.message.source"]
            for s in _children(spans, call)
            if s.name.startswith("invoke_agent")
        ]
        for name, call in calls.items()
    }
    assert sources == {
        "execute_tool subagent": ["subagent"],
        "execute_tool fork": ["subagent"],
        # the task, then the two retries the schema asked for
        "execute_tool extract": ["subagent", "followup", "followup"],
    }
    assert any("did not match the output schema" in m.content for m in agent.messages)


BACKGROUND = """\
[tether]
plugins = ["spawn", "subagent", "otel"]

[plugin.subagent]
provider = "spawn"

[plugin.otel]
exporter = "none"

[agent.main]
model = "scripted:script.toml"
"""

BACKGROUND_SCRIPT = """\
[[steps]]
[[steps.tool_calls]]
name = "subagent"
arguments = { description = "Count", prompt = "Count to three.", run_in_background = true }

[[steps]]
text = "Started; I will tell you."

[[steps]]
expect = "task_result"
text = "It counted to three."

[[tasks."Count".steps]]
delay = 0.3
text = "one two three"
"""


async def test_a_background_childs_result_starts_a_trace_linked_to_its_delegation(
    tether_kernel, tmp_path, recorded: Recorded
):
    """A background child outlives the turn that started it: its result comes back as a
    notice, whose turn is a trace of its own with a link to the delegating call."""
    (tmp_path / "script.toml").write_text(BACKGROUND_SCRIPT)
    kernel = tether_kernel(BACKGROUND, DELEGATION_PLUGINS)
    store = SQLiteStore(tmp_path / "sessions.db")
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose()
        async with agent:
            await agent.run("Count for me.")
            with anyio.fail_after(scaled(30)):
                while agent.turns < 2:
                    await anyio.sleep(0.02)
                await agent.when_idle()
    spans = recorded.spans()
    roots = sorted(
        (s for s in spans if s.name.startswith("invoke_agent") and s.parent is None),
        key=lambda s: s.start_time or 0,
    )
    assert [dict(s.attributes or {})["tether.message.source"] for s in roots] == [
        "user",
        "notice",
    ]
    first, notice = roots
    (call,) = [s for s in _children(spans, first) if s.name == "execute_tool subagent"]
    (child,) = [s for s in _children(spans, call) if s.name.startswith("invoke_agent")]
    assert child.end_time is not None
    assert call.end_time is not None
    assert child.end_time > call.end_time  # it ran on after the call returned
    assert notice.context is not None
    assert first.context is not None
    assert notice.context.trace_id != first.context.trace_id
    (link,) = notice.links
    assert link.context.span_id == call.context.span_id  # type: ignore[union-attr]
    assert dict(link.attributes or {}) == {"tether.link": "notice"}


def test_hook_tether_tracers_gives_every_agent_of_the_profile_the_tracer(tether_kernel, tmp_path):
    from tether.agents import build_preset

    kernel = tether_kernel(
        PROFILE.format(otel=""), {"otel": tether_otel.OtelPlugin, "notes": Notes()}
    )
    preset = build_preset(kernel, "main")
    assert isinstance(preset.tracer, Tracer)
    assert isinstance(preset.tracer, tether_otel.OtelTracer)
    assert build_preset(kernel, "main").tracer is preset.tracer  # one per process and settings


def test_hook_tether_tracers_none_without_the_plugin(tether_kernel):
    from tether.agents import build_preset

    kernel = tether_kernel(
        '[tether]\nplugins = ["notes"]\n\n[agent.main]\nmodel = "function:x"\n', {"notes": Notes()}
    )
    assert build_preset(kernel, "main").tracer is None


def test_hook_tether_tracers_checks_what_it_is_given(tether_kernel):
    from tether.agents import build_preset

    class Wrong:
        @tether.hookimpl
        def tether_tracers(self) -> list[object]:
            return ["not a tracer"]

    kernel = tether_kernel(
        '[tether]\nplugins = ["wrong"]\n\n[agent.main]\nmodel = "function:x"\n', {"wrong": Wrong()}
    )
    with pytest.raises(TetherError) as caught:
        build_preset(kernel, "main")
    assert caught.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION


def test_otel_sdk_disabled_turns_the_plugin_off(tether_kernel, monkeypatch):
    from tether.agents import build_preset

    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    kernel = tether_kernel(
        PROFILE.format(otel=""), {"otel": tether_otel.OtelPlugin, "notes": Notes()}
    )
    assert build_preset(kernel, "main").tracer is None


async def test_captured_messages_keep_the_latest_that_fit_as_valid_json(
    tether_kernel, tmp_path, recorded: Recorded
):
    """A long session's request is cut from its oldest end: the attribute stays valid JSON
    and ends with the message that was sent."""
    script = "".join(f'[[steps]]\ntext = "answer {n}"\n\n' for n in range(3))
    prompts = [f"{n}" + "x" * 30_000 for n in range(3)]
    await _run(tether_kernel, tmp_path, *prompts, otel="capture_content = true", script=script)
    chats = sorted(recorded.named("chat"), key=lambda s: s.start_time or 0)
    third = str(dict(chats[2].attributes or {})["gen_ai.input.messages"])
    assert len(third) <= 65536
    messages = json.loads(third)
    assert messages[-1]["parts"][0]["content"] == prompts[2]
    assert len(messages) < 5  # the oldest were left out
    first = json.loads(str(dict(chats[0].attributes or {})["gen_ai.input.messages"]))
    assert [m["role"] for m in first] == ["user"]


#: The script's model priced by the profile: $2 in, $0.20 cached, $2.50 written, $10 out.
PRICED = """
[prices."scripted:script.toml"]
input = 2.0
cached_input = 0.2
cache_write = 2.5
output = 10.0
"""


async def test_a_chat_span_says_what_its_request_cost_when_the_price_is_known(
    tether_kernel, tmp_path, recorded: Recorded
):
    await _run(tether_kernel, tmp_path, "When do we launch?", otel=PRICED)
    chats = recorded.named("chat")
    costs = [dict(chat.attributes or {})[tether_otel.COST_ATTRIBUTE] for chat in chats]
    # 5 plain, 100 cached, 15 written, 8 out; then 150 in, 3 out.
    first = (5 * 2.0 + 100 * 0.2 + 15 * 2.5 + 8 * 10.0) / 1e6
    second = (150 * 2.0 + 3 * 10.0) / 1e6
    assert costs == [pytest.approx(first), pytest.approx(second)]
    ((attributes, total),) = recorded.metrics()["tether.cost"]
    assert total == pytest.approx(first + second)
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "tether.scripted",
        "gen_ai.request.model": "script.toml",
    }


async def test_an_unknown_price_leaves_the_cost_out_rather_than_zero(
    tether_kernel, tmp_path, recorded: Recorded
):
    await _run(tether_kernel, tmp_path, "When do we launch?")
    chats = recorded.named("chat")
    assert len(chats) == 2
    for chat in chats:
        assert tether_otel.COST_ATTRIBUTE not in dict(chat.attributes or {})
    assert "tether.cost" not in recorded.metrics()
