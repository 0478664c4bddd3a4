"""What real servers send and accept: missing ids, object arguments, content, tool_choice,
calls written as text, and invalid arguments sent back as written."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.models import Message, ModelRequest, ToolCall, ToolSchema
from tether_openai import ChatCompletionsModel
from tether_openai._text_calls import parse_text_calls
from tether_openai._wire import NotAChatCompletion, parse_response

from .conftest import RECORDED

pytestmark = pytest.mark.anyio

TOOLS = (
    ToolSchema(
        name="read_note",
        description="Read a note",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
    ),
    ToolSchema(name="list_notes", description="List notes"),
)
ASK = ModelRequest(messages=(Message(role="user", content="When is the launch?"),), tools=TOOLS)


def model(url: str, **options: object) -> ChatCompletionsModel:
    return ChatCompletionsModel("local:m", "m", base_url=url, **options)  # type: ignore[arg-type]


async def test_calls_without_ids_and_with_object_arguments_are_accepted(server):
    server.queue("llama_server_tool_calls.json")
    m = model(server.url)
    response = await m.request(ASK)
    await m.aclose()
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall(
            id="call_chatcmpl-Xq3ZbVhVZ3PZbUu9r0BGEhSx8Kp1dkGi_0",
            name="read_note",
            arguments={"name": "launch.md"},
        ),
        ToolCall(id="call_chatcmpl-Xq3ZbVhVZ3PZbUu9r0BGEhSx8Kp1dkGi_1", name="list_notes"),
    )


def test_generated_ids_are_stable_and_differ_between_responses_without_an_id():
    data = json.loads((RECORDED / "llama_server_tool_calls.json").read_text())
    del data["id"]
    first = parse_response(data).tool_calls
    assert first == parse_response(json.loads(json.dumps(data))).tool_calls
    data["created"] += 1
    second = parse_response(data).tool_calls
    assert {c.id for c in first}.isdisjoint(c.id for c in second)
    assert len({c.id for c in first}) == 2


@pytest.mark.parametrize(
    ("arguments", "invalid"),
    [
        ('{"name": "ci', '{"name": "ci'),
        ("[1, 2]", "[1, 2]"),
        ([1, 2], "[1, 2]"),
        (7, "7"),
    ],
)
def test_arguments_that_are_not_an_object_keep_what_the_model_wrote(arguments, invalid):
    data = {
        "id": "r1",
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "function": {"name": "read_note", "arguments": arguments}}
                    ],
                }
            }
        ],
    }
    (call,) = parse_response(data).tool_calls
    assert (call.arguments, call.invalid_arguments) == ({}, invalid)


async def test_invalid_arguments_are_sent_back_exactly_as_the_model_wrote_them(server):
    server.queue("deepseek_text.json")
    history = (
        Message(role="user", content="read it"),
        Message(
            role="assistant",
            tool_calls=(ToolCall(id="c1", name="read_note", invalid_arguments='{"name": "ci'),),
        ),
        Message(
            role="tool",
            content="error: the arguments are not a JSON object",
            tool_call_id="c1",
            name="read_note",
            is_error=True,
        ),
    )
    m = model(server.url)
    await m.request(ModelRequest(messages=history, tools=TOOLS))
    await m.aclose()
    (sent,) = server.bodies()
    assert sent["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"name": "ci'


@pytest.mark.parametrize(("setting", "sent"), [("empty", ""), ("null", None)])
async def test_tool_call_content_follows_the_endpoint_setting(server, setting, sent):
    server.queue("deepseek_text.json")
    history = (
        Message(role="user", content="hi"),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="list_notes"),)),
        Message(role="tool", content="a.md", tool_call_id="c1", name="list_notes"),
    )
    m = model(server.url, tool_call_content=setting)
    await m.request(ModelRequest(messages=history, tools=TOOLS))
    await m.aclose()
    assert server.bodies()[0]["messages"][1]["content"] == sent


async def test_tool_choice_is_sent_only_with_tools_and_can_be_left_out(server):
    for _ in range(3):
        server.queue("deepseek_text.json")
    default, omitted = model(server.url), model(server.url, tool_choice=None)
    await default.request(ASK)
    await default.request(ModelRequest(messages=ASK.messages))
    await omitted.request(ASK)
    await default.aclose()
    await omitted.aclose()
    with_tools, without_tools, left_out = server.bodies()
    assert with_tools["tool_choice"] == "auto"
    assert "tool_choice" not in without_tools
    assert "tools" not in without_tools
    assert "tool_choice" not in left_out
    assert len(left_out["tools"]) == 2


@pytest.mark.parametrize(
    ("endpoint_max", "budget", "sent"),
    [(4096, None, 4096), (4096, 256, 256), (100, 256, 100), (None, None, None)],
)
async def test_max_tokens_is_the_smaller_of_the_endpoint_cap_and_the_budget(
    server, endpoint_max, budget, sent
):
    server.queue("deepseek_text.json")
    m = model(server.url, max_tokens=endpoint_max)
    await m.request(ModelRequest(messages=ASK.messages, max_output_tokens=budget))
    await m.aclose()
    assert server.bodies()[0].get("max_tokens") == sent


async def test_a_json_call_in_text_is_parsed_when_the_endpoint_opts_in(server):
    server.queue("ollama_text_json_call.json")
    server.queue("ollama_text_json_call.json")
    off, on = model(server.url), model(server.url, tool_calls_in_text="json")
    plain = await off.request(ASK)
    parsed = await on.request(ASK)
    await off.aclose()
    await on.aclose()
    assert (plain.tool_calls, plain.finish_reason) == ((), "stop")
    assert parsed.finish_reason == "tool_calls"
    assert parsed.tool_calls == (
        ToolCall(id="call_chatcmpl-417_text_0", name="read_note", arguments={"name": "launch.md"}),
    )
    assert parsed.text == plain.text
    assert "```json" in parsed.text


async def test_xml_calls_in_text_are_parsed_in_both_tag_styles(server):
    server.queue("vllm_text_xml_call.json")
    m = model(server.url, tool_calls_in_text="xml")
    response = await m.request(ASK)
    await m.aclose()
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("read_note", {"name": "launch.md"}),
        ("list_notes", {}),
    ]
    assert response.text.startswith("<tool_call>")


def test_text_calls_for_unknown_tools_are_left_as_text():
    data = json.loads((RECORDED / "ollama_text_json_call.json").read_text())
    response = parse_response(data, text_calls="json", tool_names=["list_notes"])
    assert (response.tool_calls, response.finish_reason) == ((), "stop")


def test_function_tags_decode_json_values_and_keep_other_text():
    text = (
        "<function=search>\n<parameter=query>\nlaunch date\n</parameter>\n"
        "<parameter=limit>\n3\n</parameter>\n</function>"
    )
    assert parse_text_calls(text, "xml") == [("search", {"query": "launch date", "limit": 3})]


@given(st.text())
def test_any_text_parses_without_raising(text):
    for form in ("json", "xml"):
        for name, arguments in parse_text_calls(text, form):  # type: ignore[arg-type]
            assert isinstance(name, str)
            assert isinstance(arguments, dict)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ([], "JSON list, not an object"),
        ({"id": "x"}, "no choices"),
        ({"choices": [{}]}, "choices[0] has no message"),
        ({"choices": [{"message": {"content": 3}}]}, "content is a JSON int"),
        ({"choices": [{"message": {"content": [1]}}]}, "content is a JSON list"),
        ({"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}, "has no function name"),
    ],
)
def test_a_body_that_is_not_a_chat_completion_names_the_missing_part(data, says):
    with pytest.raises(NotAChatCompletion, match=says.replace("[", r"\[").replace("]", r"\]")):
        parse_response(data)


def test_content_sent_as_a_list_of_text_parts_is_joined():
    data = {
        "id": "r",
        "choices": [
            {"message": {"content": [{"type": "text", "text": "The launch "}, {"text": "is on"}]}}
        ],
    }
    assert parse_response(data).text == "The launch is on"
