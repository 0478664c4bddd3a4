"""Streaming: a model's deltas reach the agent's delta listeners as they arrive; the log keeps
one event per message (no store write per delta); a model that cannot stream gives its answer
as one piece; a stream cut before its answer is retried, announced with a ``retry`` delta."""

from __future__ import annotations

import logging

import pytest

from tether.agents import Agent, AgentLimits, new_header
from tether.errors import ErrorCode, ModelError
from tether.models import FunctionModel, ModelDelta, ModelRequest, ModelResponse
from tether.store import AssistantMessage, SQLiteStore

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


async def streaming(request: ModelRequest):
    yield ModelDelta("reasoning", "Thinking")
    for piece in ("Hel", "lo", "!"):
        yield ModelDelta("text", piece)
    yield ModelResponse(text="Hello!")


async def agent_on(store, model, **limits) -> Agent:
    header = new_header(agent=None)
    await store.create(header)
    return Agent(header=header, store=store, model=model, limits=AgentLimits(**limits))


async def stored(store, agent) -> list[str]:
    return [s.event.type for s in await store.events(agent.session_id)]


async def test_deltas_reach_the_listeners_in_order_and_only_the_answer_is_stored(store):
    agent = await agent_on(store, FunctionModel(streaming))
    heard: list[ModelDelta] = []
    agent.listen_deltas(heard.append)
    async with agent:
        await agent.run("hi")
    assert [(d.kind, d.text) for d in heard] == [
        ("reasoning", "Thinking"),
        ("text", "Hel"),
        ("text", "lo"),
        ("text", "!"),
    ]
    events = [s.event for s in await store.events(agent.session_id)]
    (answer,) = [e for e in events if isinstance(e, AssistantMessage)]
    assert answer.content == "Hello!"
    # The same log as without a listener: nothing per delta.
    quiet = await agent_on(store, FunctionModel(streaming))
    async with quiet:
        await quiet.run("hi")
    assert await stored(store, agent) == await stored(store, quiet)


async def test_a_model_that_cannot_stream_gives_its_answer_as_one_piece(store):
    class Plain:
        name = "plain"

        async def request(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text="whole")

    agent = await agent_on(store, Plain())
    heard: list[ModelDelta] = []
    agent.listen_deltas(heard.append)
    async with agent:
        await agent.run("hi")
    assert heard == []
    assert agent.messages[-1].content == "whole"


async def test_a_stream_cut_before_its_answer_is_retried_and_says_so(store):
    attempts: list[int] = []

    async def flaky(request: ModelRequest):
        attempts.append(1)
        yield ModelDelta("text", "Par")
        if len(attempts) == 1:
            raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "connection reset", recoverable=True)
        yield ModelDelta("text", "tial")
        yield ModelResponse(text="Partial")

    agent = await agent_on(store, FunctionModel(flaky), retry_backoff=0.001)
    heard: list[ModelDelta] = []
    agent.listen_deltas(heard.append)
    async with agent:
        await agent.run("hi")
    assert [(d.kind, d.text) for d in heard] == [
        ("text", "Par"),
        ("retry", ""),
        ("text", "Par"),
        ("text", "tial"),
    ]
    assert agent.messages[-1].content == "Partial"


async def test_a_stream_without_an_answer_is_a_model_error(store):
    async def endless(request: ModelRequest):
        yield ModelDelta("text", "never done")

    agent = await agent_on(store, FunctionModel(endless), model_retries=0)
    async with agent:
        stop = await agent.run("hi")
    assert stop == "error"


async def test_a_failing_listener_does_not_break_the_answer(store, caplog):
    agent = await agent_on(store, FunctionModel(streaming))

    def broken(delta: ModelDelta) -> None:
        raise RuntimeError("display bug")

    heard: list[ModelDelta] = []
    agent.listen_deltas(broken)
    agent.listen_deltas(heard.append)
    with caplog.at_level(logging.ERROR, logger="tether.agents"):
        async with agent:
            await agent.run("hi")
    assert agent.messages[-1].content == "Hello!"
    assert len(heard) == 4
    assert "a delta listener" in caplog.text


async def test_without_a_listener_a_streaming_function_model_still_answers(store):
    agent = await agent_on(store, FunctionModel(streaming))
    async with agent:
        await agent.run("hi")
    assert agent.messages[-1].content == "Hello!"
