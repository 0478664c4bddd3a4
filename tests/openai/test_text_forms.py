"""Small local models write their calls as text, in several forms: double braces, ``<tools>``,
``<tool_call>`` (Hermes, Qwen), fenced JSON, and a skill's name as if it were a tool. The
``auto`` reader, on by default for the local presets, reads them all (answers played over real
HTTP); the presets themselves: Gemini, Ollama, vLLM, LM Studio."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import tether_openai
from tether.cli import cli
from tether.errors import ErrorCode, ModelError
from tether.models import (
    Message,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSchema,
    resolve_model,
    window_for,
)
from tether_openai import ChatCompletionsModel, Settings
from tether_openai._text_calls import parse_text_calls

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).parents[2]

TOOLS = (
    ToolSchema(
        name="read_note",
        description="Read a note",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
    ),
    ToolSchema(name="list_notes", description="List notes"),
)
LOAD_SKILL = ToolSchema(
    name="load_skill",
    description="Load a skill",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}},
)
#: The catalog message tether-skill-tool appends (its format, abridged).
CATALOG = (
    "<system-reminder>\nThe following skills are available through the `load_skill` tool.\n\n"
    "<available_skills>\n- `citing-notes`: Cite the note an answer comes from.\n"
    "</available_skills>\n</system-reminder>"
)


def ask(*tools: ToolSchema, catalog: bool = False) -> ModelRequest:
    messages = [Message(role="user", content=CATALOG)] if catalog else []
    messages.append(Message(role="user", content="When is the launch?"))
    return ModelRequest(messages=tuple(messages), tools=tools or TOOLS)


async def answer(server, fixture: str, request: ModelRequest, reader: str | None = "auto"):
    server.queue(fixture)
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, tool_calls_in_text=reader)  # type: ignore[arg-type]
    try:
        return await model.request(request)
    finally:
        await model.aclose()


@pytest.mark.parametrize(
    ("fixture", "call"),
    [
        ("qwen_double_braces_call.json", ("list_notes", {})),
        ("qwen_tools_tag_call.json", ("read_note", {"name": "launch.md"})),
        ("hermes_tool_call_tag.json", ("read_note", {"name": "launch.md"})),
        ("ollama_text_json_call.json", ("read_note", {"name": "launch.md"})),
        ("vllm_text_xml_call.json", ("read_note", {"name": "launch.md"})),
    ],
)
async def test_the_auto_reader_reads_every_common_form(server, fixture, call):
    response = await answer(server, fixture, ask())
    assert response.finish_reason == "tool_calls"
    assert (response.tool_calls[0].name, response.tool_calls[0].arguments) == call
    assert response.text  # the text stays, so the history shows what the model wrote


@pytest.mark.parametrize("fixture", ["qwen_double_braces_call.json", "qwen_tools_tag_call.json"])
async def test_the_older_readers_miss_these_forms(server, fixture):
    # What the issue saw: with "json" (or "xml") the model's call stayed text.
    for reader in ("json", "xml"):
        assert (await answer(server, fixture, ask(), reader)).tool_calls == ()


async def test_a_streamed_answer_is_read_the_same_way(server):
    server.queue("qwen_tools_tag_stream.sse")
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, tool_calls_in_text="auto")
    try:
        items = [item async for item in model.stream(ask())]
    finally:
        await model.aclose()
    response = items[-1]
    assert isinstance(response, ModelResponse)
    assert (
        next(d.text for d in items[:-1] if isinstance(d, ModelDelta)) == '<tools>\n{"name": "read'
    )
    assert response.tool_calls == (
        ToolCall(
            id="call_chatcmpl-stream1_text_0", name="read_note", arguments={"name": "launch.md"}
        ),
    )


async def test_a_skill_written_as_a_tool_becomes_a_load_skill_call(server):
    response = await answer(
        server, "qwen_skill_as_tool.json", ask(*TOOLS, LOAD_SKILL, catalog=True)
    )
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("load_skill", {"name": "citing-notes"})
    ]


@pytest.mark.parametrize(
    ("tools", "catalog"),
    [
        (TOOLS, True),  # no load_skill tool: nothing could load it
        ((*TOOLS, LOAD_SKILL), False),  # not a skill the catalog lists
    ],
)
async def test_a_skill_name_stays_text_otherwise(server, tools, catalog):
    response = await answer(server, "qwen_skill_as_tool.json", ask(*tools, catalog=catalog))
    assert (response.tool_calls, response.finish_reason) == ((), "stop")


def test_calls_in_prose_and_nested_objects():
    text = (
        'Sure. {"note": {"name": "read_note", "arguments": {"name": "a.md"}}} and then '
        '[{"name": "list_notes", "arguments": {}}] and {"name": "x"'
    )
    known = frozenset({"read_note", "list_notes"})
    assert parse_text_calls(text, "auto", known) == [
        ("read_note", {"name": "a.md"}),
        ("list_notes", {}),
    ]
    doubled = '{{"name": "read_note", "arguments": {{"name": "b.md"}}}}'
    assert parse_text_calls(doubled, "auto", known) == [("read_note", {"name": "b.md"})]


@given(st.text(alphabet=st.sampled_from('{}[]":, namearguments<>/tool_call\n`')))
def test_any_text_parses_without_raising(text):
    for name, arguments in parse_text_calls(text, "auto"):
        assert isinstance(name, str)
        assert isinstance(arguments, dict)


# The presets.


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GEMINI_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)


def make(spec: str, settings: Settings | None = None) -> ChatCompletionsModel:
    model = resolve_model(spec, tether_openai.tether_model_providers(settings or Settings()))
    assert isinstance(model, ChatCompletionsModel)
    return model


@pytest.mark.parametrize(
    ("spec", "url"),
    [
        ("ollama:qwen2.5-coder:1.5b", "http://localhost:11434/v1"),
        ("vllm:Qwen/Qwen2.5-7B-Instruct", "http://localhost:8000/v1"),
        ("lmstudio:qwen2.5-7b-instruct", "http://localhost:1234/v1"),
    ],
)
async def test_local_presets_read_text_calls_and_need_no_key(spec, url):
    model = make(spec)
    assert (model.base_url, model.tool_calls_in_text) == (url, "auto")
    assert model.model == spec.split(":", 1)[1]
    assert "authorization" not in model._client.headers  # pyright: ignore[reportPrivateUsage]
    await model.aclose()


async def test_a_preset_takes_a_url_after_the_model():
    model = make("ollama:llama3.2:1b@http://gpu-box:11434/v1")
    assert (model.model, model.base_url) == ("llama3.2:1b", "http://gpu-box:11434/v1")
    await model.aclose()
    with pytest.raises(ModelError, match="'vllm:@http://h/v1' names no model") as info:
        make("vllm:@http://h/v1")
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("0.0.0.0", "http://0.0.0.0:11434/v1"),
        ("gpu-box:9999", "http://gpu-box:9999/v1"),
        ("https://ollama.example.com", "https://ollama.example.com:443/v1"),
        ("http://[::1]:11434/", "http://[::1]:11434/v1"),
        ("http://proxy.example/ollama", "http://proxy.example:11434/ollama/v1"),
    ],
)
async def test_ollama_host_moves_the_ollama_preset(monkeypatch, host, url):
    monkeypatch.setenv("OLLAMA_HOST", host)
    model = make("ollama:llama3.2")
    assert model.base_url == url
    await model.aclose()
    # A URL in the spec, or a profile endpoint named ollama, wins over the variable.
    model = make("ollama:llama3.2@http://h:1/v1")
    assert model.base_url == "http://h:1/v1"
    await model.aclose()
    settings = Settings.model_validate({"endpoints": {"ollama": {"base_url": "http://p/v1"}}})
    model = make("ollama:llama3.2", settings)
    assert (model.base_url, model.tool_calls_in_text) == ("http://p/v1", None)
    await model.aclose()


async def test_vllm_sends_its_key_when_set(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "token-abc123")
    model = make("vllm:m")
    assert model._client.headers["authorization"] == "Bearer token-abc123"  # pyright: ignore[reportPrivateUsage]
    await model.aclose()


async def test_gemini_needs_its_key(monkeypatch):
    with pytest.raises(ModelError, match="GEMINI_API_KEY") as info:
        make("gemini:gemini-2.5-flash")
    assert info.value.code is ErrorCode.MODEL_CONFIG_MISSING
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    model = make("gemini:gemini-2.5-flash")
    assert model.url == ("https://generativelanguage.googleapis.com/v1beta/openai/chat/completions")
    assert (model.accepts_images, model.tool_calls_in_text) == (True, None)
    await model.aclose()


@pytest.mark.parametrize(
    ("url", "reader"),
    [
        ("http://localhost:8080/v1", "auto"),
        ("http://127.0.0.1:8080/v1", "auto"),
        ("http://[::1]:8080/v1", "auto"),
        ("https://llm.example.com/v1", None),
        ("http://192.168.1.20:8080/v1", None),
    ],
)
async def test_openai_compatible_reads_text_calls_on_this_machine_only(url, reader):
    model = make(f"openai-compatible:m@{url}")
    assert model.tool_calls_in_text == reader
    await model.aclose()


async def test_a_profile_can_turn_the_reader_off():
    settings = Settings.model_validate(
        {
            "endpoints": {
                "openai-compatible": {"base_url": "http://x/v1", "tool_calls_in_text": "off"}
            }
        }
    )
    model = make("openai-compatible:m@http://localhost:8080/v1", settings)
    assert model.tool_calls_in_text is None
    await model.aclose()


@pytest.mark.parametrize(
    ("spec", "window"),
    [
        ("gemini:gemini-2.5-pro", (1_048_576, 65_536)),
        ("gemini:gemini-2.5-flash-lite", (1_048_576, 65_536)),
        ("gemini:gemini-2.0-flash", (1_048_576, 8_192)),
    ],
)
def test_gemini_windows_are_in_the_table(spec, window):
    found = window_for(spec, object(), None)
    assert found is not None
    assert (found.tokens, found.output, found.source) == (*window, "table")


def test_run_with_the_ollama_preset_reads_a_skill_and_a_tags_call(server, tmp_path, monkeypatch):
    """The quickstart through ``--model ollama:MODEL@URL`` with no setting: the model loads a
    skill by writing its name as a call (double braces), reads a note with a ``<tools>`` call,
    then answers."""
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    server.queue("qwen_skill_as_tool.json")
    server.queue("qwen_tools_tag_call.json")
    server.queue("qwen_answer_after_tools.json")
    profile = tmp_path / "examples" / "quickstart" / "tether.toml"
    spec = f"ollama:qwen2.5-coder:1.5b@{server.url}"
    result = CliRunner().invoke(
        cli, ["run", "--profile", str(profile), "--model", spec, "When is the launch?"]
    )
    assert result.exit_code == 0, result.output
    assert "The launch is on Thursday 10 December (launch.md)." in result.output
    first, second, third = server.bodies()
    assert first["model"] == "qwen2.5-coder:1.5b"
    skill_call = second["messages"][len(first["messages"])]
    assert skill_call["tool_calls"][0]["function"] == {
        "name": "load_skill",
        "arguments": '{"name": "citing-notes"}',
    }
    assert '<skill_content name="citing-notes">' in second["messages"][-1]["content"]
    note_call = third["messages"][len(second["messages"])]
    assert note_call["tool_calls"][0]["function"]["name"] == "read_note"
    assert "Thursday" in third["messages"][-1]["content"]
