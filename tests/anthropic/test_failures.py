"""Failures over real HTTP: recorded Anthropic errors (429 and 529 with ``retry-after``, 500,
401, a prompt too long), a server that is not there or drops the connection, a 200 that is no
message; and a whole turn through the plugin that rides out an overload and a rate limit."""

from __future__ import annotations

import pytest

from tether.agents import AgentLimits
from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelRequest
from tether.runtime import compose_agent
from tether.store import MemoryStore
from tether.testing import make_kernel, write_profile
from tether_anthropic import MessagesModel

from .conftest import Answer

pytestmark = pytest.mark.anyio

HI = ModelRequest(messages=(Message(role="user", content="hi"),))


async def failure(url: str, code: ErrorCode = ErrorCode.MODEL_REQUEST_FAILED) -> ModelError:
    model = MessagesModel("anthropic:claude-x", "claude-x", base_url=url, api_key="sk-ant-test")
    try:
        with pytest.raises(ModelError) as info:
            await model.request(HI)
    finally:
        await model.aclose()
    assert info.value.code is code
    return info.value


async def test_a_rate_limit_is_recoverable_with_the_wait_it_asked_for(server):
    server.queue("rate_limited_429.json", 429, headers={"retry-after": "7"})
    error = await failure(server.url)
    assert (error.recoverable, error.retry_after) == (True, 7.0)
    assert error.message.startswith(
        f"anthropic:claude-x: HTTP 429 from {server.url}/v1/messages: rate_limit_error: This "
        "request would exceed the rate limit"
    )


async def test_an_overloaded_api_529_is_recoverable_with_its_wait(server):
    server.queue("overloaded_529.json", 529, headers={"retry-after": "2"})
    error = await failure(server.url)
    assert (error.recoverable, error.retry_after) == (True, 2.0)
    assert "HTTP 529" in error.message
    assert "overloaded_error: Overloaded" in error.message
    assert error.remedy is not None
    assert "overloaded" in error.remedy


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "1e9"}, 3600.0),
        ({}, None),
    ],
)
async def test_retry_after_forms(server, headers, wait):
    server.queue("overloaded_529.json", 529, headers=headers)
    assert (await failure(server.url)).retry_after == wait


async def test_a_server_error_is_recoverable(server):
    server.queue("api_error_500.json", 500)
    assert (await failure(server.url)).recoverable is True


async def test_a_rejected_key_is_not_retried_and_says_what_to_check(server):
    server.queue("authentication_401.json", 401, headers={"retry-after": "5"})
    error = await failure(server.url)
    assert (error.recoverable, error.retry_after) == (False, None)
    assert "authentication_error: invalid x-api-key" in error.message
    assert error.remedy == "check the model name and the API key (ANTHROPIC_API_KEY)"
    assert error.body is not None
    assert '"authentication_error"' in error.body  # the whole body is kept


async def test_a_prompt_too_long_is_a_context_overflow(server):
    server.queue("prompt_too_long_400.json", 400)
    error = await failure(server.url, ErrorCode.CONTEXT_WINDOW_EXCEEDED)
    assert error.recoverable is False
    assert "prompt is too long: 215023 tokens > 200000 maximum" in error.message


async def test_a_page_that_is_not_a_message_is_not_retried(server):
    server.answers.append(Answer(body=b'{"hello": "world"}'))
    error = await failure(server.url)
    assert error.recoverable is False
    assert "is not a Messages API message: it has no content list" in error.message


async def test_a_dropped_connection_is_recoverable(server):
    server.drop()
    error = await failure(server.url)
    assert error.recoverable is True
    assert f"cannot reach {server.url}/v1/messages" in error.message


async def test_a_port_nobody_listens_on_is_recoverable_and_named():
    error = await failure("http://127.0.0.1:9")
    assert error.recoverable is True
    assert "cannot reach http://127.0.0.1:9/v1/messages" in error.message


async def test_a_turn_rides_out_an_overload_and_a_rate_limit(server, tmp_path):
    """529 then 429 (each with retry-after), then a tool call, then the answer: one turn,
    over real HTTP, through the profile's plugin."""
    import tether_anthropic
    from tether.agents import Tool

    server.queue("overloaded_529.json", 529, headers={"retry-after": "0.05"})
    server.queue("rate_limited_429.json", 429, headers={"retry-after": "0.05"})
    server.queue("tool_use.json")
    server.queue("text.json")
    profile = write_profile(
        tmp_path,
        f"""
        [tether]
        plugins = ["anthropic", "notes"]
        [agent.main]
        model = "anthropic:claude-sonnet-4-5@{server.url}"
        """,
    )
    read = Tool("read_note", "Read a note.", lambda args, ctx: "Thursday 10 December")
    listing = Tool("list_notes", "List the notes.", lambda args, ctx: "launch.md")

    class Notes:
        import tether as _t

        @_t.hookimpl
        def tether_tools(self):
            return [read, listing]

    kernel = make_kernel(profile, {"anthropic": tether_anthropic, "notes": Notes()})
    agent = await compose_agent(kernel, MemoryStore(), limits=AgentLimits(retry_backoff=0))
    async with agent:
        assert await agent.run("What notes do I have?") == "completed"
    await agent.model.aclose()  # type: ignore[attr-defined]
    assert agent.messages[-1].content == "You have two notes: launch.md and team.md."
    first, retried, again, second = (r["body"] for r in server.requests)
    assert first == retried == again
    results = second["messages"][-1]["content"]
    assert [(r["tool_use_id"], r["content"]) for r in results] == [
        ("toolu_01A09q90qw90lq917835lq9", "Thursday 10 December"),
        ("toolu_01B18r81rx81mr826724mr8", "launch.md"),
    ]
