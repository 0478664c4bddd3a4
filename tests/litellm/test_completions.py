"""``tether-litellm`` over real HTTP: LiteLLM's ``openai/MODEL`` route against a local server
playing recorded chat-completions answers, whole and streamed; the request tether sends through
``litellm.acompletion``, and the answer, calls, usage and finish reasons it reads back."""

from __future__ import annotations

import pytest

from tether.models import Message, ModelDelta, ModelRequest, ToolCall, ToolSchema, Usage
from tether_litellm import LiteLLMModel

from .conftest import LITELLM_WARNINGS, Answer, chunk, sse, streamed

pytestmark = [pytest.mark.anyio, LITELLM_WARNINGS]

READ = ToolSchema(
    name="read_note",
    description="Read a note.",
    parameters={"type": "object", "properties": {"name": {"type": "string"}}},
)


def model(url: str, **options) -> LiteLLMModel:
    return LiteLLMModel(
        "litellm:openai/deepseek-chat",
        "openai/deepseek-chat",
        api_base=url,
        api_key="sk-test",
        **options,
    )


async def test_the_request_is_openai_shaped_and_carries_the_key(server):
    server.queue("deepseek_text.json")
    request = ModelRequest(
        system=("You are terse.", "Tools: read_note."),
        messages=(
            Message(role="user", content="When is the launch?"),
            Message(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="c1", name="read_note", arguments={"name": "a.md"}),),
            ),
            Message(role="tool", content="Thursday", tool_call_id="c1", name="read_note"),
        ),
        tools=(READ,),
        max_output_tokens=500,
    )
    await model(server.url).request(request)
    (sent,) = server.requests
    assert (sent["path"], sent["authorization"]) == ("/v1/chat/completions", "Bearer sk-test")
    body = sent["body"]
    assert body["model"] == "deepseek-chat"
    assert body["max_tokens"] == 500  # the turn's budget, smaller than the default 4,096
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Tools: read_note."},
        {"role": "user", "content": "When is the launch?"},
        {
            "role": "assistant",  # no text: LiteLLM leaves ``content`` out
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_note", "arguments": '{"name": "a.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Thursday"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_note",
                "description": "Read a note.",
                "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        }
    ]
    assert "stream" not in body


async def test_tool_calls_and_cached_tokens_are_read(server):
    server.queue("deepseek_tool_calls.json")
    answer = await model(server.url).request(ModelRequest(tools=(READ,)))
    assert answer.finish_reason == "tool_calls"
    assert answer.tool_calls == (
        ToolCall(id="call_0_4c1f", name="read_note", arguments={"name": "launch.md"}),
        ToolCall(id="call_1_9a2b", name="list_notes", arguments={}),
    )
    assert answer.usage == Usage(input_tokens=412, output_tokens=38, cached_input_tokens=384)


async def test_a_length_finish_and_openai_cached_tokens(server):
    server.queue("openai_length.json")
    answer = await model(server.url).request(ModelRequest())
    assert (answer.text, answer.finish_reason) == ("The notes say", "length")
    assert answer.usage == Usage(input_tokens=1290, output_tokens=4, cached_input_tokens=1152)


async def test_anthropic_cache_writes_reported_through_litellm_are_counted(server):
    """Anthropic's and Bedrock's usage, as LiteLLM reports it: the tokens read in
    ``prompt_tokens_details``, the tokens written in ``cache_creation_input_tokens``."""
    completion = {
        "id": "chatcmpl-a",
        "object": "chat.completion",
        "created": 1764460000,
        "model": "claude",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi."},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 2100,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 1800},
            "cache_creation_input_tokens": 250,
            "cache_read_input_tokens": 1800,
        },
    }
    server.queue_body(completion)
    answer = await model(server.url).request(ModelRequest())
    assert answer.usage == Usage(
        input_tokens=2100, output_tokens=3, cached_input_tokens=1800, cache_write_input_tokens=250
    )


async def test_text_and_tool_call_pieces_stream_then_the_answer_with_its_usage(server):
    server.answers.append(
        Answer(
            body=sse(
                chunk({"role": "assistant", "content": "Let me "}),
                chunk({"content": "look."}),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_7",
                                "type": "function",
                                "function": {"name": "read_note", "arguments": '{"na'},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'me": "a.md"}'}}]}),
                chunk({}, finish="tool_calls"),
                {
                    **chunk({}),
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 12,
                        "completion_tokens": 5,
                        "prompt_tokens_details": {"cached_tokens": 8},
                    },
                },
            )
        )
    )
    deltas, answer = await streamed(model(server.url), ModelRequest(tools=(READ,)))
    assert deltas == [
        ModelDelta("text", "Let me "),
        ModelDelta("text", "look."),
        ModelDelta("tool_call", '{"na', index=0, name="read_note"),
        ModelDelta("tool_call", 'me": "a.md"}', index=0),
    ]
    assert answer.text == "Let me look."
    assert answer.tool_calls == (
        ToolCall(id="call_7", name="read_note", arguments={"name": "a.md"}),
    )
    assert answer.finish_reason == "tool_calls"
    assert answer.usage == Usage(input_tokens=12, output_tokens=5, cached_input_tokens=8)
    body = server.requests[0]["body"]
    assert (body["stream"], body["stream_options"]) == (True, {"include_usage": True})


async def test_whole_and_streamed_answers_are_the_same(server):
    server.queue("deepseek_tool_calls.json")
    whole = await model(server.url).request(ModelRequest(tools=(READ,)))
    calls = [
        {"index": 0, "id": "call_0_4c1f", "type": "function",
         "function": {"name": "read_note", "arguments": '{"name": "launch.md"}'}},
        {"index": 1, "id": "call_1_9a2b", "type": "function",
         "function": {"name": "list_notes", "arguments": "{}"}},
    ]  # fmt: skip
    usage = {
        "prompt_tokens": 412,
        "completion_tokens": 38,
        "prompt_tokens_details": {"cached_tokens": 384},
    }
    server.answers.append(
        Answer(
            body=sse(
                chunk({"role": "assistant", "content": "", "tool_calls": calls}),
                chunk({}, finish="tool_calls"),
                {**chunk({}), "choices": [], "usage": usage},
            )
        )
    )
    _, answer = await streamed(model(server.url), ModelRequest(tools=(READ,)))
    assert answer == whole


async def test_images_of_tool_results_follow_the_steps_tool_messages(server):
    from tether.models import ImagePart

    server.queue("deepseek_text.json")
    request = ModelRequest(
        messages=(
            Message(role="user", content="Look."),
            Message(role="assistant", content="", tool_calls=(ToolCall(id="c1", name="shot"),)),
            Message(
                role="tool",
                content="a screenshot",
                tool_call_id="c1",
                name="shot",
                images=(ImagePart(mime_type="image/png", data="iVBORw0KGgo="),),
            ),
        )
    )
    await model(server.url, images=True).request(request)
    messages = server.requests[0]["body"]["messages"]
    assert messages[-2] == {"role": "tool", "tool_call_id": "c1", "content": "a screenshot"}
    assert messages[-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "The images of shot:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }
