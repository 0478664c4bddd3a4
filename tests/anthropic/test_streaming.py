"""Streaming over real HTTP: recorded server-sent events (text, thinking with its signature,
tool input in ``input_json_delta`` pieces, pings) into deltas and the same answer a whole
response gives; thinking sent back with its tool calls; an error event or a cut stream."""

from __future__ import annotations

import json

import pytest

from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelDelta, ModelRequest, ModelResponse, ToolCall, Usage
from tether_anthropic import MessagesModel

from .conftest import RECORDED

pytestmark = pytest.mark.anyio

HI = ModelRequest(messages=(Message(role="user", content="When is the launch?"),))


def model_for(server, **options) -> MessagesModel:
    return MessagesModel(
        "anthropic:claude-sonnet-4-5",
        "claude-sonnet-4-5",
        base_url=server.url,
        api_key="sk-ant-test",
        **options,
    )


async def streamed(model: MessagesModel, request: ModelRequest):
    deltas: list[ModelDelta] = []
    answer: ModelResponse | None = None
    async for item in model.stream(request):
        if isinstance(item, ModelDelta):
            deltas.append(item)
        else:
            answer = item
    return deltas, answer


async def test_text_arrives_in_pieces_and_the_answer_has_the_usage(server):
    server.queue("text.sse")
    model = model_for(server)
    try:
        deltas, answer = await streamed(model, HI)
    finally:
        await model.aclose()
    assert [(d.kind, d.text) for d in deltas] == [
        ("text", "The launch is on "),
        ("text", "Thursday 10 December."),
    ]
    assert answer == ModelResponse(
        text="The launch is on Thursday 10 December.",
        usage=Usage(input_tokens=9 + 1570, output_tokens=12, cached_input_tokens=1570),
    )
    assert server.bodies()[0]["stream"] is True


async def test_thinking_text_and_tool_input_pieces_then_the_call(server):
    server.queue("thinking_tool_use.sse")
    model = model_for(server, thinking_budget=2048)
    try:
        deltas, answer = await streamed(model, HI)
    finally:
        await model.aclose()
    assert [(d.kind, d.text, d.index, d.name) for d in deltas] == [
        ("reasoning", "The user asks about the launch. ", 0, None),
        ("reasoning", "I should read launch.md.", 0, None),
        ("text", "Let me check.", 0, None),
        ("tool_call", "", 0, "read_note"),
        ("tool_call", '{"name": "lau', 0, None),
        ("tool_call", 'nch.md"}', 0, None),
    ]
    assert answer is not None
    assert answer.text == "Let me check."
    assert answer.finish_reason == "tool_calls"
    assert answer.tool_calls == (
        ToolCall(
            id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="read_note", arguments={"name": "launch.md"}
        ),
    )
    assert answer.usage == Usage(
        input_tokens=14 + 312 + 1530,
        output_tokens=89,
        cached_input_tokens=1530,
        cache_write_input_tokens=312,
    )
    sent = server.bodies()[0]
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["max_tokens"] == 4096


@pytest.mark.parametrize(
    ("max_tokens", "thinking"),
    [(4096, 2048), (3072, 2048), (2500, 1476), (2048, 1024), (2000, None)],
)
async def test_thinking_leaves_room_for_the_answer_within_max_tokens(server, max_tokens, thinking):
    server.queue("text.json")
    model = model_for(server, thinking_budget=2048, max_tokens=max_tokens)
    try:
        await model.request(HI)
    finally:
        await model.aclose()
    (sent,) = server.bodies()
    assert sent["max_tokens"] == max_tokens
    assert sent.get("thinking", {}).get("budget_tokens") == thinking


async def test_the_thinking_of_a_tool_step_goes_back_with_its_calls(server):
    """With thinking on, the API wants the thinking blocks (signature intact) back in the
    answer that called tools when the request goes on from its results."""
    server.queue("thinking_tool_use.sse")
    server.queue("text.sse")
    model = model_for(server, thinking_budget=2048)
    try:
        _, answer = await streamed(model, HI)
        assert answer is not None
        after = ModelRequest(
            messages=(
                *HI.messages,
                Message(role="assistant", content=answer.text, tool_calls=answer.tool_calls),
                Message(role="tool", tool_call_id=answer.tool_calls[0].id, content="Thursday"),
            )
        )
        await streamed(model, after)
    finally:
        await model.aclose()
    second = server.bodies()[1]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user asks about the launch. I should read launch.md.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
    }


async def test_a_model_made_again_goes_on_from_tool_calls_without_thinking(server):
    """After a restart the thinking of the last tool step is gone: that request is sent
    without thinking rather than refused by the API."""
    server.queue("text.json")
    request = ModelRequest(
        messages=(
            *HI.messages,
            Message(role="assistant", tool_calls=(ToolCall(id="toolu_9", name="read_note"),)),
            Message(role="tool", tool_call_id="toolu_9", content="Thursday"),
        )
    )
    model = model_for(server, thinking_budget=2048)
    try:
        await model.request(request)
    finally:
        await model.aclose()
    assert "thinking" not in server.bodies()[0]


async def test_whole_and_streamed_answers_are_the_same(server):
    """The same message, as JSON and as the events that stream it, reads the same."""
    from .simulated import message_events, sse

    message = json.loads((RECORDED / "tool_use.json").read_text())
    server.queue("tool_use.json")
    server.answers.append(type(server.answers[0])(body=sse(message_events(message))))
    model = model_for(server)
    try:
        whole = await model.request(HI)
        _, piecewise = await streamed(model, HI)
    finally:
        await model.aclose()
    assert piecewise == whole


async def test_an_overloaded_error_inside_the_stream_is_recoverable(server):
    server.queue("overloaded_midstream.sse")
    model = model_for(server)
    try:
        with pytest.raises(ModelError) as info:
            await streamed(model, HI)
    finally:
        await model.aclose()
    error = info.value
    assert (error.code, error.recoverable) == (ErrorCode.MODEL_REQUEST_FAILED, True)
    assert "failed mid-stream: overloaded_error: Overloaded" in error.message


async def test_a_stream_cut_before_message_stop_is_recoverable(server):
    server.queue("cut_midstream.sse")
    model = model_for(server)
    try:
        with pytest.raises(ModelError) as info:
            await streamed(model, HI)
    finally:
        await model.aclose()
    assert info.value.recoverable is True
    assert "ended before the answer did" in info.value.message
