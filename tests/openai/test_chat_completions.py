"""tether-openai against recorded responses served over real HTTP on localhost."""

from __future__ import annotations

import json

import pytest

from tether.agents import AgentLimits, Tool
from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelRequest, ToolCall, ToolSchema
from tether.runtime import compose_agent
from tether.store import MemoryStore
from tether.testing import make_kernel, write_profile
from tether_openai import ChatCompletionsModel
from tether_openai._model import parse_response

from .conftest import RECORDED

pytestmark = pytest.mark.anyio


REQUEST = ModelRequest(
    system=("You help.", "# Tools\nparallel"),
    messages=(
        Message(role="user", content="When is the launch?"),
        Message(
            role="assistant",
            content="",
            tool_calls=(ToolCall(id="c1", name="read_note", arguments={"name": "launch.md"}),),
        ),
        Message(role="tool", content="Launch: Thursday", tool_call_id="c1", name="read_note"),
    ),
    tools=(
        ToolSchema(
            name="read_note",
            description="Read a note",
            parameters={"type": "object", "properties": {"name": {"type": "string"}}},
        ),
    ),
    max_output_tokens=256,
)


async def test_request_body_follows_the_chat_completions_shape(server):
    server.queue("deepseek_text.json")
    model = ChatCompletionsModel(
        "deepseek:deepseek-chat", "deepseek-chat", base_url=server.url, api_key="sk-test"
    )
    await model.request(REQUEST)
    await model.aclose()
    (sent,) = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["authorization"] == "Bearer sk-test"
    assert sent["body"] == {
        "model": "deepseek-chat",
        "messages": [
            {"role": "system", "content": "You help."},
            {"role": "system", "content": "# Tools\nparallel"},
            {"role": "user", "content": "When is the launch?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_note", "arguments": '{"name": "launch.md"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Launch: Thursday"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_note",
                    "description": "Read a note",
                    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
                },
            }
        ],
        "tool_choice": "auto",
        "max_tokens": 256,
    }


async def test_tool_calls_and_deepseek_cache_usage_are_mapped(server):
    server.queue("deepseek_tool_calls.json")
    model = ChatCompletionsModel("deepseek:x", "x", base_url=server.url)
    response = await model.request(REQUEST)
    await model.aclose()
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == (
        ToolCall(id="call_0_4c1f", name="read_note", arguments={"name": "launch.md"}),
        ToolCall(id="call_1_9a2b", name="list_notes", arguments={}),
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (412, 38)
    assert response.usage.cached_input_tokens == 384


def test_deepseek_cache_hit_field_is_read_without_openai_details():
    data = json.loads((RECORDED / "deepseek_text.json").read_text())
    assert parse_response(data).usage.cached_input_tokens == 448


async def test_openai_length_finish_and_cached_tokens(server):
    server.queue("openai_length.json")
    model = ChatCompletionsModel("openai:gpt-4.1", "gpt-4.1", base_url=server.url)
    response = await model.request(REQUEST)
    await model.aclose()
    assert (response.text, response.finish_reason) == ("The notes say", "length")
    assert response.usage.cached_input_tokens == 1152


async def test_a_rejected_key_is_a_non_recoverable_error_with_the_server_message(server):
    server.queue("openai_401.json", status=401)
    model = ChatCompletionsModel("openai:gpt-4.1", "gpt-4.1", base_url=server.url)
    with pytest.raises(ModelError) as info:
        await model.request(REQUEST)
    await model.aclose()
    assert info.value.code is ErrorCode.MODEL_REQUEST_FAILED
    assert info.value.recoverable is False
    assert "HTTP 401" in str(info.value)
    assert "Incorrect API key provided" in str(info.value)


async def test_rate_limits_are_recoverable(server):
    server.queue("rate_limited_429.json", status=429)
    model = ChatCompletionsModel("openai:x", "x", base_url=server.url)
    with pytest.raises(ModelError) as info:
        await model.request(REQUEST)
    await model.aclose()
    assert info.value.recoverable is True


async def test_a_timeout_is_recoverable(server):
    server.hang()
    model = ChatCompletionsModel("deepseek:x", "x", base_url=server.url, timeout=0.2)
    with pytest.raises(ModelError, match=r"no answer from .* in time") as info:
        await model.request(REQUEST)
    await model.aclose()
    assert info.value.recoverable is True


async def test_an_unreachable_server_is_reported():
    model = ChatCompletionsModel("local:x", "x", base_url="http://127.0.0.1:9/v1", timeout=2)
    with pytest.raises(ModelError, match=r"connection refused at http://127.0.0.1:9/v1"):
        await model.request(REQUEST)
    await model.aclose()


def test_a_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(ModelError) as info:
        ChatCompletionsModel.from_endpoint(
            "deepseek:deepseek-chat",
            "deepseek-chat",
            base_url="https://api.deepseek.com",
            api_key_env="DEEPSEEK_API_KEY",
            timeout=5,
        )
    assert info.value.code is ErrorCode.MODEL_CONFIG_MISSING
    assert str(info.value) == (
        "model deepseek:deepseek-chat needs an API key in the environment variable "
        "DEEPSEEK_API_KEY, which is not set; export DEEPSEEK_API_KEY=... (or use the scripted "
        "model offline) [MODEL_CONFIG_MISSING]"
    )


async def test_a_turn_end_to_end_through_the_plugin_with_a_retry(server, tmp_path):
    """A profile endpoint, a rate limit then a tool call then an answer, over real HTTP."""
    import tether_openai

    server.queue("rate_limited_429.json", status=429)
    server.queue("deepseek_tool_calls.json")
    server.queue("deepseek_text.json")
    profile = write_profile(
        tmp_path,
        f"""
        [tether]
        plugins = ["openai", "notes"]
        [plugin.openai.endpoints.local]
        base_url = "{server.url}"
        [agent.main]
        model = "local:deepseek-chat"
        """,
    )
    read = Tool(
        "read_note",
        "read",
        lambda args, ctx: "Launch date: Thursday 10 December",
        {"type": "object", "properties": {"name": {"type": "string"}}},
    )
    listing = Tool("list_notes", "list", lambda args, ctx: "launch.md")

    class Notes:
        import tether as _t

        @_t.hookimpl
        def tether_tools(self):
            return [read, listing]

    kernel = make_kernel(profile, {"openai": tether_openai, "notes": Notes()})
    agent = await compose_agent(kernel, MemoryStore(), limits=AgentLimits(retry_backoff=0))
    async with agent:
        assert await agent.run("When is the launch?") == "completed"
    await agent.model.aclose()  # type: ignore[attr-defined]
    assert agent.messages[-1].content == "The launch is on Thursday 10 December."
    assert len(server.requests) == 3
    first, retried, second = (r["body"]["messages"] for r in server.requests)
    assert first == retried
    assert second[: len(first)] == first
    assert second[-2:] == [
        {
            "role": "tool",
            "tool_call_id": "call_0_4c1f",
            "content": "Launch date: Thursday 10 December",
        },
        {"role": "tool", "tool_call_id": "call_1_9a2b", "content": "launch.md"},
    ]


async def test_images_of_tool_results_follow_the_steps_tool_messages(server):
    from tether.models import ImagePart

    server.queue("deepseek_text.json")
    calls = (
        ToolCall(id="c1", name="chart", arguments={}),
        ToolCall(id="c2", name="read_note", arguments={}),
    )
    request = ModelRequest(
        messages=(
            Message(role="user", content="Show the chart"),
            Message(role="assistant", content="", tool_calls=calls),
            Message(
                role="tool",
                content="[image: image/png, 3 bytes]",
                tool_call_id="c1",
                name="chart",
                images=(ImagePart(mime_type="image/png", data="AAAA"),),
            ),
            Message(role="tool", content="a note", tool_call_id="c2", name="read_note"),
            Message(role="user", content="And?"),
        )
    )
    model = ChatCompletionsModel(
        "openai:gpt-4o", "gpt-4o", base_url=server.url, api_key="sk-test", images=True
    )
    assert model.accepts_images
    await model.request(request)
    await model.aclose()
    (sent,) = server.requests
    roles = [m["role"] for m in sent["body"]["messages"]]
    # The tool messages stay together after their assistant message; the images come after.
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    assert sent["body"]["messages"][4] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "The images of chart:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
    assert sent["body"]["messages"][2]["content"] == "[image: image/png, 3 bytes]"
