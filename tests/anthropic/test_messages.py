"""``tether-anthropic`` over real HTTP: the request body (system, tools, tool results, images,
breakpoints), recorded whole answers read back (text, tool use, stop reasons, cache usage)."""

from __future__ import annotations

import pytest

from tether.models import ImagePart, Message, ModelRequest, ToolCall, ToolSchema, Usage
from tether_anthropic import MessagesModel

pytestmark = pytest.mark.anyio

EPHEMERAL = {"type": "ephemeral"}
PNG = "iVBORw0KGgo="


def model_for(server, **options) -> MessagesModel:
    options.setdefault("api_key", "sk-ant-test")
    return MessagesModel(
        "anthropic:claude-sonnet-4-5", "claude-sonnet-4-5", base_url=server.url, **options
    )


async def ask(server, request: ModelRequest, **options):
    model = model_for(server, **options)
    try:
        return await model.request(request)
    finally:
        await model.aclose()


ASKED = ModelRequest(
    system=("You keep notes.", "Today is Monday."),
    tools=(
        ToolSchema(
            name="read_note",
            description="Read a note.",
            parameters={"type": "object", "properties": {"name": {"type": "string"}}},
        ),
        ToolSchema(name="list_notes"),
    ),
    messages=(
        Message(role="user", content="What is in launch.md?"),
        Message(
            role="assistant",
            content="Reading it.",
            tool_calls=(
                ToolCall(id="toolu_1", name="read_note", arguments={"name": "launch.md"}),
                ToolCall(id="toolu_2", name="list_notes"),
            ),
        ),
        Message(role="tool", tool_call_id="toolu_1", name="read_note", content="Thursday"),
        Message(
            role="tool", tool_call_id="toolu_2", name="list_notes", content="no", is_error=True
        ),
    ),
    max_output_tokens=1000,
)


async def test_the_body_follows_the_messages_api_with_breakpoints(server):
    server.queue("text.json")
    await ask(server, ASKED)
    (sent,) = server.requests
    assert sent["path"] == "/v1/messages"
    assert sent["x-api-key"] == "sk-ant-test"
    assert sent["anthropic-version"] == "2023-06-01"
    assert sent["body"] == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": [
            {"type": "text", "text": "You keep notes."},
            {"type": "text", "text": "Today is Monday.", "cache_control": EPHEMERAL},
        ],
        "tools": [
            {
                "name": "read_note",
                "description": "Read a note.",
                "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            {
                "name": "list_notes",
                "description": "",
                "input_schema": {"type": "object", "properties": {}},
            },
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in launch.md?", "cache_control": EPHEMERAL}
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading it."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read_note",
                        "input": {"name": "launch.md"},
                    },
                    {"type": "tool_use", "id": "toolu_2", "name": "list_notes", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Thursday"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "no",
                        "is_error": True,
                        "cache_control": EPHEMERAL,
                    },
                ],
            },
        ],
    }


async def test_a_text_answer_counts_the_cache_in_its_input(server):
    server.queue("text.json")
    answer = await ask(server, ModelRequest(messages=(Message(role="user", content="hi"),)))
    assert answer.text == "You have two notes: launch.md and team.md."
    assert answer.finish_reason == "stop"
    assert answer.usage == Usage(
        input_tokens=21 + 1530,
        output_tokens=14,
        cached_input_tokens=0,
        cache_write_input_tokens=1530,
    )


async def test_tool_use_blocks_are_the_calls(server):
    server.queue("tool_use.json")
    answer = await ask(server, ASKED)
    assert answer.finish_reason == "tool_calls"
    assert answer.text == "I'll read both notes."
    assert answer.tool_calls == (
        ToolCall(
            id="toolu_01A09q90qw90lq917835lq9", name="read_note", arguments={"name": "launch.md"}
        ),
        ToolCall(id="toolu_01B18r81rx81mr826724mr8", name="list_notes"),
    )
    assert answer.usage == Usage(
        input_tokens=12 + 40 + 1530,
        output_tokens=71,
        cached_input_tokens=1530,
        cache_write_input_tokens=40,
    )


@pytest.mark.parametrize(
    ("recorded", "finish"), [("max_tokens.json", "length"), ("refusal.json", "refusal")]
)
async def test_stop_reasons_map_to_tethers(server, recorded, finish):
    server.queue(recorded)
    answer = await ask(server, ModelRequest(messages=(Message(role="user", content="hi"),)))
    assert answer.finish_reason == finish


async def test_images_go_as_image_blocks_in_tool_results_and_user_messages(server):
    server.queue("text.json")
    image = ImagePart(mime_type="image/png", data=PNG)
    request = ModelRequest(
        messages=(
            Message(role="user", content="Look:", images=(image,)),
            Message(role="assistant", tool_calls=(ToolCall(id="t1", name="shot"),)),
            Message(
                role="tool", tool_call_id="t1", name="shot", content="a screenshot", images=(image,)
            ),
        )
    )
    await ask(server, request)
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    messages = server.bodies()[0]["messages"]
    # The block before the last answer ends the previous request: marked as it was then.
    assert messages[0]["content"] == [
        {"type": "text", "text": "Look:"},
        {**block, "cache_control": EPHEMERAL},
    ]
    assert messages[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "a screenshot"}, block],
            "cache_control": EPHEMERAL,
        }
    ]


async def test_empty_answers_are_left_out_and_same_role_messages_join(server):
    """The API refuses empty text blocks and wants tool results first in their message."""
    server.queue("text.json")
    request = ModelRequest(
        messages=(
            Message(role="user", content="one"),
            Message(role="assistant", content=""),
            Message(role="user", content="two"),
            Message(role="assistant", tool_calls=(ToolCall(id="t1", name="look"),)),
            Message(role="tool", tool_call_id="t1", name="look", content=""),
            Message(role="user", content="[context] it is late"),
        )
    )
    await ask(server, request, cache=False)
    assert server.bodies()[0]["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "look", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1"},
                {"type": "text", "text": "[context] it is late"},
            ],
        },
    ]


async def test_max_tokens_is_the_smaller_of_the_setting_and_the_budget(server):
    server.queue("text.json")
    server.queue("text.json")
    hi = (Message(role="user", content="hi"),)
    await ask(server, ModelRequest(messages=hi), max_tokens=300)
    await ask(server, ModelRequest(messages=hi, max_output_tokens=5000), max_tokens=300)
    assert [body["max_tokens"] for body in server.bodies()] == [300, 300]


async def test_no_key_sends_none(server):
    server.queue("text.json")
    await ask(server, ModelRequest(messages=(Message(role="user", content="hi"),)), api_key=None)
    assert server.requests[0]["x-api-key"] is None


async def test_probe_lists_the_models(server):
    model = model_for(server)
    try:
        line = await model.probe()
    finally:
        await model.aclose()
    assert line == (
        f"model anthropic:claude-sonnet-4-5: {server.url}/v1/models answers, 1 model(s) listed; "
        "'claude-sonnet-4-5' is not among them (claude-sonnet-4-5-20250929)"
    )
