"""A step's request has an overall deadline, retries included: a hung or trickling server ends
the turn in about ``deadline`` seconds, not 9 x ``read_timeout``. And a 200 answer that is not a
chat completion (an HTML page, JSON of another shape) is one error, not retried, that says what
came back and where."""

from __future__ import annotations

import time

import anyio
import pytest

from tether.agents import Agent, AgentLimits, new_header
from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelRequest
from tether.store import MemoryStore
from tether.testing import scaled
from tether_openai import ChatCompletionsModel, Settings

from .conftest import Answer

pytestmark = pytest.mark.anyio

ASK = ModelRequest(messages=(Message(role="user", content="hi"),))
HTML = b"<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body></body></html>"


async def run_turn(model: ChatCompletionsModel, *, stream: bool = False) -> tuple[str, str]:
    """One turn of an agent on ``model``: its stop reason and the error it stopped with."""
    store = MemoryStore()
    agent = Agent(
        header=await store.create(new_header(agent="main")),
        store=store,
        model=model,
        limits=AgentLimits(retry_backoff=0),
    )
    if stream:
        agent.listen_deltas(lambda delta: None)
    async with agent:
        stop = await agent.run("hi")
    return stop, agent.loop.last_error or ""


async def test_a_hung_server_ends_the_turn_at_the_deadline_not_after_nine_timeouts(server):
    for _ in range(12):
        server.hang()
    model = ChatCompletionsModel(
        "local:m", "m", base_url=server.url, read_timeout=0.5, deadline=1.2
    )
    started = time.monotonic()
    try:
        stop, error = await run_turn(model)
    finally:
        await model.aclose()
    took = time.monotonic() - started
    assert stop == "error"
    assert "within its deadline of 1.2 s" in error
    # Without the deadline: 1 + 8 retries of 0.5 s each. With it: the attempts that fit.
    assert len(server.requests) <= 4
    assert took < scaled(20)


async def test_one_attempt_is_cut_at_the_deadline_even_with_a_long_read_timeout(server):
    server.hang()
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, read_timeout=60, deadline=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(ModelError) as info:
            await model.request(ASK)
        # The connection is closed before the error propagates, as for a timeout.
        assert server.disconnected.wait(scaled(10))
    finally:
        await model.aclose()
    assert time.monotonic() - started < scaled(20)
    error = info.value
    assert (error.code, error.recoverable) == (ErrorCode.MODEL_REQUEST_FAILED, False)
    assert server.url in error.message
    assert "deadline" in (error.remedy or "")
    assert "sent again" not in (error.remedy or "")


async def test_a_stream_of_keep_alives_is_cut_at_the_stream_deadline(server):
    server.trickle()
    model = ChatCompletionsModel(
        "local:m", "m", base_url=server.url, read_timeout=60, stream_deadline=0.8
    )
    started = time.monotonic()
    try:
        with pytest.raises(ModelError) as info:
            async for _ in model.stream(ASK):
                pass
        assert server.disconnected.wait(scaled(10))
    finally:
        await model.aclose()
    assert time.monotonic() - started < scaled(20)
    assert info.value.recoverable is False
    assert "within its deadline of 0.8 s" in info.value.message


async def test_a_retry_after_longer_than_the_time_left_is_not_retried(server):
    server.queue("rate_limited_429.json", 429, headers={"Retry-After": "30"})
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, deadline=5)
    try:
        with pytest.raises(ModelError) as info:
            await model.request(ASK)
    finally:
        await model.aclose()
    assert info.value.recoverable is False
    assert "asked to wait 30 s" in info.value.message


async def test_the_deadline_starts_again_for_a_new_request(server):
    server.queue("deepseek_text.json")
    server.queue("deepseek_text.json")
    model = ChatCompletionsModel("local:m", "m", base_url=server.url, deadline=0.5)
    try:
        await model.request(ASK)
        await anyio.sleep(0.6)  # behaviour under test: longer than the deadline between steps
        other = ModelRequest(messages=(Message(role="user", content="again"),))
        assert (await model.request(other)).text == "The launch is on Thursday 10 December."
    finally:
        await model.aclose()


def test_the_deadlines_are_settings():
    settings = Settings.model_validate(
        {"deadline": 300, "endpoints": {"lab": {"base_url": "http://h/v1", "stream_deadline": 90}}}
    )
    options = settings.endpoints["lab"].options(settings)
    assert (options["deadline"], options["stream_deadline"]) == (300, 90)
    defaults = Settings().endpoints.get("x")
    assert defaults is None
    assert {
        k: v for k, v in Settings.model_validate({}).model_dump().items() if "deadline" in k
    } == {
        "deadline": None,
        "stream_deadline": None,
    }


@pytest.mark.parametrize("stream", [False, True])
async def test_an_html_page_is_one_error_that_shows_it_and_is_not_retried(server, stream):
    server.answers.append(Answer(200, HTML, {"Content-Type": "text/html; charset=utf-8"}))
    server.answers.append(Answer(200, HTML, {"Content-Type": "text/html; charset=utf-8"}))
    model = ChatCompletionsModel("local:m", "m", base_url=server.url)
    try:
        stop, error = await run_turn(model, stream=stream)
    finally:
        await model.aclose()
    assert stop == "error"
    assert len(server.requests) == 1  # not retried
    assert f"{server.url}/chat/completions" in error
    assert "<!DOCTYPE html>" in error  # what came back
    assert "text/html" in error
    assert "does it end with /v1?" in error


async def test_json_of_another_shape_is_not_retried_and_shows_its_start(server):
    server.queue_body({"object": "list", "data": [{"id": "m", "object": "model"}]})
    model = ChatCompletionsModel("local:m", "m", base_url=server.url)
    try:
        with pytest.raises(ModelError) as info:
            await model.request(ASK)
    finally:
        await model.aclose()
    error = info.value
    assert error.recoverable is False
    assert "it has no choices" in error.message
    assert '{"object": "list"' in error.message
    assert "does it end with /v1?" in (error.remedy or "")
