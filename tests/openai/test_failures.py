"""Failures over real HTTP: which are retried, how long the server asked to wait, capped
messages with the full body kept, timeouts that drop their connection, context overflow."""

from __future__ import annotations

import email.utils
import logging

import anyio
import httpx
import pytest

from tether.agents import Agent, AgentLimits, new_header
from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelRequest
from tether.store import MemoryStore
from tether_openai import ChatCompletionsModel
from tether_openai._errors import MAX_ERROR_CHARS, retry_after

from .conftest import Answer

pytestmark = pytest.mark.anyio

ASK = ModelRequest(messages=(Message(role="user", content="hi"),))


async def failure(
    url: str, code: ErrorCode = ErrorCode.MODEL_REQUEST_FAILED, **options: object
) -> ModelError:
    model = ChatCompletionsModel("local:m", "m", base_url=url, **options)  # type: ignore[arg-type]
    try:
        with pytest.raises(ModelError) as info:
            await model.request(ASK)
    finally:
        await model.aclose()
    assert info.value.code is code
    return info.value


async def test_429_with_retry_after_seconds_is_recoverable_with_the_wait(server):
    server.queue("rate_limited_429.json", 429, headers={"Retry-After": "7"})
    error = await failure(server.url)
    assert (error.recoverable, error.retry_after) == (True, 7.0)
    assert "Rate limit reached" in error.message


async def test_retry_after_as_an_http_date(server):
    when = email.utils.formatdate(usegmt=True)  # now: the wait is about 0 seconds
    server.queue("rate_limited_429.json", 429, headers={"Retry-After": when})
    error = await failure(server.url)
    assert error.retry_after is not None
    assert 0 <= error.retry_after <= 2


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "1e9"}, 3600.0),
        ({}, None),
    ],
)
def test_retry_after_values(headers, wait):
    assert retry_after(httpx.Response(429, headers=headers)) == wait


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 520, 599])
async def test_retryable_statuses(server, status):
    server.queue("rate_limited_429.json", status)
    assert (await failure(server.url)).recoverable is True


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
async def test_client_errors_are_not_retried_and_carry_no_wait(server, status):
    server.queue("rate_limited_429.json", status, headers={"Retry-After": "5"})
    error = await failure(server.url)
    assert (error.recoverable, error.retry_after) == (False, None)


async def test_503_loading_model_is_recoverable(server):
    server.queue("llama_server_loading_503.json", 503)
    error = await failure(server.url)
    assert error.recoverable is True
    assert "HTTP 503" in error.message
    assert "Loading model" in error.message


async def test_a_long_server_message_is_capped_and_the_body_kept(server):
    server.queue("content_null_refused_500.json", 500)
    error = await failure(server.url)
    line = str(error)
    assert len(line) < MAX_ERROR_CHARS + 250
    assert "--debug shows the body" in line
    assert "\n" not in line
    body = error.body
    assert body is not None
    assert "Value is not callable" in body
    assert len(body) > 1500
    assert any("Value is not callable" in note for note in error.__notes__)


async def test_a_dropped_connection_is_recoverable(server):
    server.drop()
    error = await failure(server.url)
    assert error.recoverable is True
    assert "cannot reach" in error.message


async def test_a_hung_request_has_its_connection_closed_before_the_error(server):
    server.hang()
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, read_timeout=0.3)
    try:
        with pytest.raises(ModelError) as info:
            await model.request(ASK)
        # The client is still open: the server must already see the connection go, so a
        # retry never runs alongside the abandoned request.
        assert server.disconnected.wait(10)
    finally:
        await model.aclose()
    assert info.value.recoverable is True
    assert "ReadTimeout" in info.value.message
    assert "read_timeout" in (info.value.remedy or "")


async def test_the_turn_loop_retries_a_hang_on_a_fresh_connection(server):
    server.hang()
    server.queue("deepseek_text.json")
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, read_timeout=0.3)
    store = MemoryStore()
    agent = Agent(
        header=await store.create(new_header(agent="main")),
        store=store,
        model=model,
        limits=AgentLimits(retry_backoff=0),
    )
    async with agent:
        assert await agent.run("hi") == "completed"
    await model.aclose()
    # The server's thread sees the abandoned connection go on its own time (seen late at load).
    assert server.disconnected.wait(10)
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "fixture", ["openai_context_overflow_400.json", "llama_server_context_overflow_400.json"]
)
async def test_context_overflow_says_the_request_is_too_long(server, fixture):
    server.queue(fixture, 400)
    # An agent whose compaction is auto compacts on this code and asks again.
    error = await failure(server.url, ErrorCode.CONTEXT_WINDOW_EXCEEDED)
    assert error.recoverable is False
    assert "longer than the model's context" in (error.remedy or "")
    assert "compact" in str(error)


async def test_a_refused_connection_is_final_and_names_the_url():
    # Nothing listens there: sending the step again soon cannot help (test_dead_endpoints.py).
    error = await failure("http://127.0.0.1:9/v1", connect_timeout=2)
    assert error.recoverable is False
    assert "connection refused at http://127.0.0.1:9/v1" in error.message


async def test_a_200_that_is_not_json_keeps_the_body(server):
    server.answers.append(Answer(200, b"<html>hi</html>"))
    error = await failure(server.url)
    assert error.recoverable is False
    assert "not a chat completion" in error.message
    assert error.body == "<html>hi</html>"


async def test_the_whole_body_is_logged_at_debug_level(server, caplog):
    server.queue("content_null_refused_500.json", 500)
    with caplog.at_level(logging.DEBUG, logger="tether.openai"):
        await failure(server.url)
    (record,) = [r for r in caplog.records if r.name == "tether.openai"]
    assert "Value is not callable" in record.getMessage()
    assert len(record.getMessage()) > 1500


async def test_a_loading_model_is_retried_after_the_wait_the_server_asked_for(server):
    server.queue("llama_server_loading_503.json", 503, headers={"Retry-After": "0.3"})
    server.queue("deepseek_text.json")
    model = ChatCompletionsModel("local:m", "m", base_url=server.url)
    store = MemoryStore()
    agent = Agent(
        header=await store.create(new_header(agent="main")),
        store=store,
        model=model,
        limits=AgentLimits(retry_backoff=0),
    )
    started = anyio.current_time()
    async with agent:
        assert await agent.run("hi") == "completed"
    await model.aclose()
    assert anyio.current_time() - started >= 0.3
    assert len(server.requests) == 2
