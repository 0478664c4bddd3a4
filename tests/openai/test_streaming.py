"""``tether-openai`` streaming over real HTTP: recorded server-sent chunks from a local server
(the conftest's), into deltas and the same ``ModelResponse`` a whole answer gives; a stream cut
mid-way, and an error sent inside the stream, are recoverable failures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.errors import ErrorCode, ModelError
from tether.models import ModelDelta, ModelRequest, ModelResponse, ToolSchema
from tether_openai import ChatCompletionsModel

from .conftest import Answer

pytestmark = pytest.mark.anyio


def sse(*chunks: Any, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return ": keep-alive\n\n".join(lines).encode()


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


USAGE = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "choices": [],
    "usage": {
        "prompt_tokens": 12,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 8},
    },
}


async def streamed(model: ChatCompletionsModel, request: ModelRequest):
    deltas: list[ModelDelta] = []
    answer: ModelResponse | None = None
    async for item in model.stream(request):
        if isinstance(item, ModelDelta):
            deltas.append(item)
        else:
            answer = item
    return deltas, answer


async def test_text_and_reasoning_arrive_in_pieces_and_the_answer_has_the_usage(server):
    server.answers.append(
        Answer(
            body=sse(
                chunk({"role": "assistant", "reasoning_content": "The user "}),
                chunk({"reasoning_content": "greets me."}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo!"}),
                chunk({}, finish="stop"),
                USAGE,
            )
        )
    )
    model = ChatCompletionsModel("deepseek:deepseek-chat", "deepseek-chat", base_url=server.url)
    try:
        deltas, answer = await streamed(model, ModelRequest(system=("Be brief.",)))
    finally:
        await model.aclose()
    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "The user "),
        ("reasoning", "greets me."),
        ("text", "Hel"),
        ("text", "lo!"),
    ]
    assert answer is not None
    assert answer.text == "Hello!"
    assert answer.finish_reason == "stop"
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (12, 5)
    assert answer.usage.cached_input_tokens == 8
    (sent,) = server.bodies()
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}


async def test_tool_call_arguments_arrive_in_pieces_and_parse_whole(server):
    server.answers.append(
        Answer(
            body=sse(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "search", "arguments": '{"que'},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ry": "tea"}'}}]}),
                chunk({}, finish="tool_calls"),
            )
        )
    )
    model = ChatCompletionsModel("openai:gpt-4.1", "gpt-4.1", base_url=server.url)
    request = ModelRequest(tools=(ToolSchema(name="search"),))
    try:
        deltas, answer = await streamed(model, request)
    finally:
        await model.aclose()
    assert [(d.kind, d.text, d.index, d.name) for d in deltas] == [
        ("tool_call", '{"que', 0, "search"),
        ("tool_call", 'ry": "tea"}', 0, None),
    ]
    assert answer is not None
    (call,) = answer.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "search", {"query": "tea"})
    assert answer.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (sse(chunk({"content": "Hal"}), done=False), "ended before the answer did"),
        (
            sse(chunk({"content": "Hal"}), {"error": {"message": "overloaded"}}),
            "the server failed mid-stream: overloaded",
        ),
    ],
    ids=["cut-mid-way", "error-mid-stream"],
)
async def test_a_broken_stream_is_a_recoverable_failure_after_what_arrived(server, body, said):
    server.answers.append(Answer(body=body))
    model = ChatCompletionsModel("openai:gpt-4.1", "gpt-4.1", base_url=server.url)
    deltas: list[ModelDelta] = []

    async def read() -> None:
        async for item in model.stream(ModelRequest()):
            if isinstance(item, ModelDelta):
                deltas.append(item)

    try:
        with pytest.raises(ModelError) as caught:
            await read()
    finally:
        await model.aclose()
    assert [d.text for d in deltas] == ["Hal"]
    assert caught.value.code is ErrorCode.MODEL_REQUEST_FAILED
    assert caught.value.recoverable
    assert said in caught.value.message


async def test_a_context_overflow_mid_stream_is_not_retried_but_compacted_for(server):
    error = {"error": {"message": "maximum context length is 8192 tokens", "code": None}}
    server.answers.append(Answer(body=sse(error)))
    model = ChatCompletionsModel("openai:gpt-4.1", "gpt-4.1", base_url=server.url)
    try:
        with pytest.raises(ModelError) as caught:
            async for _ in model.stream(ModelRequest()):
                pass
    finally:
        await model.aclose()
    # An agent whose compaction is auto compacts on this code and asks again.
    assert caught.value.code is ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert not caught.value.recoverable


async def test_an_http_error_before_the_stream_is_the_same_error_as_without_it(server):
    server.answers.append(Answer(status=429, body=b'{"error": {"message": "slow down"}}'))
    model = ChatCompletionsModel("openai:gpt-4.1", "gpt-4.1", base_url=server.url)
    try:
        with pytest.raises(ModelError) as caught:
            await streamed(model, ModelRequest())
    finally:
        await model.aclose()
    assert "HTTP 429" in caught.value.message
    assert caught.value.recoverable
