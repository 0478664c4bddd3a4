"""Composing an agent from a profile: hooks, scopes, instructions, the prompt that only grows."""

from __future__ import annotations

import itertools

import pytest

import tether
from tether.agents import (
    PARALLEL_TOOLS_SECTION,
    AgentLimits,
    DynamicInstruction,
    PreStep,
    Tool,
    ToolFilter,
    ToolRegistry,
    build_preset,
)
from tether.errors import AgentError, ErrorCode, ModelError, PluginError, ProfileError
from tether.models import FunctionModel, Message, ModelProvider, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import MemoryStore

pytestmark = pytest.mark.anyio


def tool(name, result=None, safe=False):
    return Tool(name, f"the {name} tool", lambda args, ctx: result or name, safe=safe)


class Tools:
    def __init__(self, *tools):
        self.tools = tools

    @tether.hookimpl
    def tether_tools(self):
        return self.tools


class Clock:
    """A dynamic instruction whose value changes every second turn."""

    @tether.hookimpl
    def tether_instructions(self):
        return [
            DynamicInstruction("clock", lambda ctx: f"it is day {(ctx.turn + 1) // 2}"),
            DynamicInstruction("persona", lambda ctx: "be brief", when="session"),
        ]


class Catalog:
    """A pre-step hook that appends a message on the first step of each turn."""

    @tether.hookimpl
    def tether_pre_step(self):
        async def run(ctx):
            if ctx.step == 1:
                return [Message(role="user", content=f"catalog for turn {ctx.turn}")]
            return None

        return [PreStep("catalog", run)]


class Models:
    @tether.hookimpl
    def tether_model_providers(self):
        return [ModelProvider("echo", lambda name, base: FunctionModel(lambda r: name))]


PROFILE = """
[tether]
plugins = ["tools", "clock", "catalog", "models"]
[agent.main]
model = "echo:hello"
instructions = "main.md"
"""


@pytest.fixture
def kernel(tmp_path, tether_kernel):
    (tmp_path / "main.md").write_text("# Main\nYou help.\n")
    plugins = {
        "tools": Tools(tool("look", safe=True), tool("write")),
        "clock": Clock(),
        "catalog": Catalog(),
        "models": Models(),
    }
    return tether_kernel(PROFILE, plugins)


async def test_hook_tether_tools_reach_the_agent_in_profile_order(kernel):
    preset = build_preset(kernel, "main")
    assert preset.tools.names() == ["look", "write"]
    assert preset.system == ("# Main\nYou help.", PARALLEL_TOOLS_SECTION)


async def test_hook_tether_model_providers_resolve_the_agent_model(kernel):
    agent = await compose_agent(kernel, MemoryStore())
    async with agent:
        await agent.run("hi")
    assert agent.model.name.startswith("function:")
    assert agent.messages[-1].content == "hello"


async def test_hook_tether_instructions_are_appended_when_they_change(kernel):
    model = FunctionModel(lambda r: "ok")
    agent = await compose_agent(kernel, MemoryStore(), model=model)
    async with agent:
        for text in ("one", "two", "three"):
            await agent.run(text)
    rendered = [m.content for m in agent.messages if m.role == "system"]
    assert rendered == [
        '<instruction slug="clock">\nit is day 1\n</instruction>',
        '<instruction slug="persona">\nbe brief\n</instruction>',
        '<instruction slug="clock">\nit is day 2\n</instruction>',
    ]


async def test_hook_tether_pre_step_appends_context_messages(kernel):
    store = MemoryStore()
    agent = await compose_agent(kernel, store, model=FunctionModel(lambda r: "ok"))
    async with agent:
        await agent.run("hi")
    events = [s.event for s in await store.events(agent.session_id)]
    context = [e for e in events if e.type == "context/message"]
    assert [(e.content, e.origin) for e in context] == [("catalog for turn 1", "catalog")]


async def test_the_prompt_only_grows(kernel):
    """Every request is the previous one plus appended messages, across turns and steps."""

    def script(request):
        assistants = sum(1 for m in request.messages if m.role == "assistant")
        if assistants % 3 == 2:
            return "turn answer"
        calls = (
            ToolCall(id=f"a{assistants}", name="look", arguments={}),
            ToolCall(id=f"b{assistants}", name="write", arguments={}),
        )
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")

    model = FunctionModel(script)
    agent = await compose_agent(kernel, MemoryStore(), model=model)
    async with agent:
        for n in range(4):
            await agent.followup(f"request {n}")
            if n == 1:
                await agent.inject("an injected fact")
            await agent.when_idle()
            await agent.steer(f"steer after {n}")
            await agent.when_idle()
    requests = model.requests
    assert len(requests) >= 20
    for before, after in itertools.pairwise(requests):
        assert after.system == before.system
        assert after.tools == before.tools
        assert after.messages[: len(before.messages)] == before.messages
        assert len(after.messages) > len(before.messages)
    assert any(m.content == "an injected fact" for m in requests[-1].messages)


async def test_the_prompt_only_grows_but_for_one_reset_per_compaction(kernel):
    """With a small window the history is compacted several times: every request extends the
    previous one except exactly one per compaction, whose base prompt and tools are the same
    bytes and whose history starts with the summary."""

    def script(request):
        if request.purpose == "compaction":
            return "what happened so far"
        shown = sum(1 for m in request.messages if m.role == "assistant")
        answers = request.earlier_answers + shown
        if answers % 3 == 2:
            return "turn answer " * 30
        calls = (ToolCall(id=f"a{answers}", name="look", arguments={}),)
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")

    model = FunctionModel(script)
    store = MemoryStore()
    limits = AgentLimits(context_window=3_000)
    agent = await compose_agent(kernel, store, model=model, limits=limits)
    async with agent:
        for n in range(50):
            await agent.followup(f"request {n}")
            await agent.when_idle()
    compactions = [
        s.event for s in await store.events(agent.session_id) if s.event.type == "compaction"
    ]
    assert len(compactions) >= 3
    requests = [r for r in model.requests if r.purpose == "turn"]
    resets = 0
    for before, after in itertools.pairwise(requests):
        assert after.system == before.system
        assert after.tools == before.tools
        if after.messages[: len(before.messages)] != before.messages:
            resets += 1
            assert after.messages[0].content.startswith("<conversation_summary>")
        else:
            assert len(after.messages) > len(before.messages)
    assert resets == len(compactions)


async def test_nearest_layer_wins_a_tool_name(tether_kernel):
    kernel = tether_kernel(
        '[tether]\nplugins = ["g"]\n[agent.main]\nplugins = ["a"]\n',
        {
            "g": Tools(tool("look", "global"), tool("only-global")),
            "a": Tools(tool("look", "agent")),
        },
    )
    tools = build_preset(kernel, "main").tools
    assert tools.names() == ["look", "only-global"]
    assert tools.get("look").run({}, None) == "agent"  # type: ignore[union-attr, arg-type]


async def test_two_plugins_of_one_layer_claiming_a_tool_is_an_error(tether_kernel):
    kernel = tether_kernel(
        '[tether]\nplugins = ["a", "b"]\n', {"a": Tools(tool("look")), "b": Tools(tool("look"))}
    )
    with pytest.raises(AgentError) as info:
        build_preset(kernel, None)
    assert info.value.code is ErrorCode.TOOL_INVALID
    assert 'tool "look" is registered by both "a" and "b" in one layer' in str(info.value)


async def test_a_hook_returning_the_wrong_type_breaks_the_contract(tether_kernel):
    class Bad:
        @tether.hookimpl
        def tether_tools(self):
            return [{"name": "look"}]

    kernel = tether_kernel('[tether]\nplugins = ["bad"]\n', {"bad": Bad()})
    with pytest.raises(PluginError) as info:
        build_preset(kernel, None)
    assert info.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION


async def test_instructions_from_a_python_module_are_evaluated_once(tmp_path, tether_kernel):
    (tmp_path / "prompt.py").write_text(
        "COUNT = []\n"
        "def instructions():\n"
        "    COUNT.append(1)\n"
        "    return f'# Generated\\ncalls: {len(COUNT)}'\n"
    )
    kernel = tether_kernel('[agent.main]\ninstructions = "prompt.py"\nmodel = "x:y"\n')
    assert build_preset(kernel, "main").system == ("# Generated\ncalls: 1",)


async def test_missing_instructions_file_is_reported(tether_kernel):
    kernel = tether_kernel('[agent.main]\ninstructions = "nope.md"\n')
    with pytest.raises(AgentError) as info:
        build_preset(kernel, "main")
    assert info.value.code is ErrorCode.INSTRUCTIONS_INVALID
    assert "nope.md" in str(info.value)


async def test_hostile_instructions_files_are_refused_with_where_and_why(tmp_path, tether_kernel):
    import os

    os.mkfifo(tmp_path / "pipe.md")  # reading it would block forever
    (tmp_path / "folder.md").mkdir()
    (tmp_path / "latin.md").write_bytes(b"# Title\ncaf\xe9\n")
    (tmp_path / "bom.md").write_bytes(b"\xef\xbb\xbf# With a BOM\n")
    (tmp_path / "pipe.py").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "pipe.py")
    expected = {
        "pipe.md": "FIFO",
        "folder.md": "folder",
        "latin.md": "line 2, column 4",
        "pipe.py": "FIFO",
    }
    for name, words in expected.items():
        kernel = tether_kernel(f'[agent.main]\ninstructions = "{name}"\n')
        with pytest.raises(AgentError) as info:
            build_preset(kernel, "main")
        assert info.value.code is ErrorCode.INSTRUCTIONS_INVALID
        assert name in str(info.value)
        assert words in str(info.value)
    kernel = tether_kernel('[agent.main]\ninstructions = "bom.md"\n')
    assert build_preset(kernel, "main").system == ("# With a BOM",)


async def test_an_unknown_model_prefix_lists_the_known_ones(tether_kernel):
    kernel = tether_kernel('[agent.main]\nmodel = "martian:x"\n')
    with pytest.raises(ModelError) as info:
        await compose_agent(kernel, MemoryStore())
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN
    assert "; the prefixes this profile offers: function, scripted; plugins offer more: " in str(
        info.value
    )
    assert str(info.value).endswith("litellm (tether-litellm) [MODEL_SPEC_UNKNOWN]")


async def test_a_first_party_model_prefix_says_which_plugin_to_add(tether_kernel):
    kernel = tether_kernel('[agent.main]\nmodel = "deepseek:deepseek-chat"\n')
    with pytest.raises(ModelError, match=r'tether-openai is installed: add "openai" to \[tether\]'):
        await compose_agent(kernel, MemoryStore())


async def test_restrict_keeps_allowed_minus_denied():
    registry = ToolRegistry([tool("a"), tool("b"), tool("c")])
    assert registry.restrict(ToolFilter(allow=frozenset({"a", "b"}))).names() == ["a", "b"]
    assert registry.restrict(ToolFilter(deny=frozenset({"b"}))).names() == ["a", "c"]
    narrowed = registry.restrict(ToolFilter(allow=frozenset({"a", "b"}), deny=frozenset({"a"})))
    assert narrowed.names() == ["b"]
    assert registry.names() == ["a", "b", "c"]


async def test_a_conditional_tool_is_listed_and_found_only_while_available():
    switch = {"on": True}
    conditional = Tool("c", "d", lambda a, c: "", available=lambda agent: switch["on"])
    registry = ToolRegistry([tool("a"), conditional])
    agent = object()  # the predicate is handed the agent; this one ignores it
    with_it = registry.schemas(agent)  # type: ignore[arg-type]
    assert [s.name for s in with_it] == ["a", "c"]
    switch["on"] = False
    assert [s.name for s in registry.schemas(agent)] == ["a"]  # type: ignore[arg-type]
    assert registry.get("c", agent) is None  # type: ignore[arg-type]
    assert registry.names(agent) == ["a"]  # type: ignore[arg-type]
    assert registry.get("c") is conditional  # without an agent: every registered tool
    switch["on"] = True
    assert registry.schemas(agent) is with_it  # type: ignore[arg-type]
    kept = registry.restrict(ToolFilter(deny=frozenset({"a"})))
    assert [s.name for s in kept.schemas(agent)] == ["c"]  # type: ignore[arg-type]


async def test_an_empty_tool_filter_is_an_error():
    with pytest.raises(AgentError) as info:
        ToolFilter()
    assert info.value.code is ErrorCode.TOOL_FILTER_INVALID


async def test_a_filter_naming_an_unknown_tool_is_an_error():
    with pytest.raises(AgentError, match=r"unknown tool\(s\): zzz; available tools: a"):
        ToolRegistry([tool("a")]).restrict(ToolFilter(deny=frozenset({"zzz"})))


@pytest.mark.parametrize(
    ("name", "parameters", "message"),
    [
        ("bad name", {"type": "object"}, "is not valid"),
        ("ok", {"type": "array"}, 'must be a JSON Schema with "type": "object"'),
        ("ok", {"type": "object", "properties": 3}, "not a valid JSON Schema"),
    ],
)
async def test_invalid_tools_are_rejected(name, parameters, message):
    with pytest.raises(AgentError, match=message) as info:
        Tool(name, "d", lambda a, c: "", parameters)
    assert info.value.code is ErrorCode.TOOL_INVALID


async def test_continuing_a_session_restores_its_history(kernel):
    store = MemoryStore()
    model = FunctionModel(lambda r: "ok")
    first = await compose_agent(kernel, store, model=model)
    async with first:
        await first.run("one")
    again = await compose_agent(kernel, store, model=model, session_id=first.session_id)
    async with again:
        await again.run("two")
    assert (
        model.requests[1].messages[: len(model.requests[0].messages)] == model.requests[0].messages
    )


async def test_a_hook_returning_one_record_instead_of_an_iterable_breaks_the_contract(
    tether_kernel,
):
    class Single:
        @tether.hookimpl
        def tether_tools(self):
            return tool("look")

    kernel = tether_kernel('[tether]\nplugins = ["single"]\n', {"single": Single()})
    with pytest.raises(PluginError, match=r"got Tool .*\(one record, not an iterable\)"):
        build_preset(kernel, None)


async def test_a_continued_session_keeps_its_own_agent_and_model(tmp_path, tether_kernel):
    (tmp_path / "helper.toml").write_text('[[steps]]\ntext = "helper here"\n')
    (tmp_path / "main.toml").write_text('[[steps]]\ntext = "main here"\n')
    kernel = tether_kernel(
        '[agent.main]\nmodel = "scripted:main.toml"\n'
        '[agent.helper]\nmodel = "scripted:helper.toml"\n'
    )
    store = MemoryStore()
    first = await compose_agent(kernel, store, agent="helper")
    again = await compose_agent(kernel, store, session_id=first.session_id)
    async with again:
        await again.run("hi")
    assert again.name == "helper"
    assert again.messages[-1].content == "helper here"
    with pytest.raises(ProfileError, match=r"runs agent 'helper', not 'main'"):
        await compose_agent(kernel, store, agent="main", session_id=first.session_id)


async def test_a_scripted_model_path_resolves_against_the_file_that_wrote_it(
    tmp_path, tether_kernel
):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "script.toml").write_text('[[steps]]\ntext = "from shared"\n')
    (tmp_path / "shared" / "base.toml").write_text('[agent.main]\nmodel = "scripted:script.toml"\n')
    kernel = tether_kernel('extends = "shared/base.toml"\n')
    agent = await compose_agent(kernel, MemoryStore())
    async with agent:
        await agent.run("hi")
    assert agent.messages[-1].content == "from shared"


FLAT = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "d"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "loud": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["a", "b"]},
    },
    "required": ["text"],
    "additionalProperties": False,
}
#: What pydantic and the MCP SDKs generate: annotations (title, default, ...) on everything.
GENERATED = {
    "type": "object",
    "title": "toolArguments",
    "$comment": "generated",
    "properties": {
        "text": {"type": "string", "title": "Text", "examples": ["hi"]},
        "count": {"type": "integer", "title": "Count", "default": 1, "deprecated": False},
        "ratio": {"type": "number", "readOnly": False},
        "loud": {"type": "boolean", "default": False},
        "mode": {"type": "string", "enum": ["a", "b"], "writeOnly": False},
    },
    "required": ["text"],
    "additionalProperties": False,
}
NESTED = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "string"}}},
}


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": "x"},
        {"text": "x", "count": 2, "ratio": 0.5, "loud": True, "mode": "b"},
        {"text": "x", "count": 2.0},  # 2.0 is an integer to JSON Schema
        {"text": "x", "ratio": 3},
        {},
        {"text": 1},
        {"text": "x", "count": True},
        {"text": "x", "loud": 1},
        {"text": "x", "mode": "c"},
        {"text": "x", "extra": 1},
        {"text": None},
    ],
)
@pytest.mark.parametrize("schema", [FLAT, GENERATED, NESTED], ids=["flat", "generated", "nested"])
def test_argument_checks_agree_with_jsonschema(schema, arguments):
    import jsonschema

    expected = list(jsonschema.Draft202012Validator(schema).iter_errors(arguments))
    problems = Tool("t", "d", lambda a, c: "", schema).argument_errors(arguments)
    assert bool(problems) == bool(expected)
    assert len(problems) == len(expected)
