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
from tether.testing import scaled

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
        ("retry", "connection reset"),  # why the step is sent again
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


async def test_a_scripted_step_streams_its_reasoning_and_text_in_pieces(store):
    from tether.models import ScriptedModel, ScriptStep

    step = ScriptStep(
        reasoning="Let me think.",
        text="The answer is four.",
        chunks=3,
        tool_calls=[{"name": "note", "arguments": {"x": 1}}],  # type: ignore[list-item]
    )
    agent = await agent_on(store, ScriptedModel([step, ScriptStep(text="done")]))
    heard: list[ModelDelta] = []
    agent.listen_deltas(heard.append)
    async with agent:
        await agent.run("2+2?")
    reasoning = [d.text for d in heard if d.kind == "reasoning"]
    text = [d.text for d in heard if d.kind == "text"]
    assert (len(reasoning), "".join(reasoning)) == (3, "Let me think.")
    assert text[3:] == ["done"]  # the next step's answer
    assert "".join(text[:3]) == "The answer is four."
    (call,) = [d for d in heard if d.kind == "tool_call"]
    assert (call.name, call.text) == ("note", '{"x": 1}')


async def test_every_agent_of_a_runtime_reaches_its_delta_listeners(tmp_path, store):
    from tether.loading import load_kernel
    from tether.runtime import Runtime

    profile = tmp_path / "tether.toml"
    profile.write_text('[agent.main]\nmodel = "function:runtime_delta_stub:answer"\n')
    (tmp_path / "runtime_delta_stub.py").write_text(
        "from tether.models import ModelDelta\n"
        "async def answer(request):\n"
        "    yield ModelDelta('text', 'hi')\n"
        "    yield 'hi'\n"
    )
    kernel = load_kernel(profile)
    async with Runtime.open(kernel, store) as runtime:
        heard: list[tuple[str, str]] = []
        stop = runtime.listen_deltas(lambda a, delta: heard.append((a.session_id, delta.text)))
        agent = await runtime.compose(agent="main")
        async with agent:
            await agent.run("hello")
        stop()
        async with agent:
            await agent.run("again")
    assert heard == [(agent.session_id, "hi")]


async def test_a_cancelled_stream_keeps_what_arrived_marked_partial(store):
    import anyio

    async def slow(request: ModelRequest):
        yield ModelDelta("text", "The first half")
        yield ModelDelta("text", ", and")
        await anyio.sleep(30)
        yield ModelResponse(text="never")

    agent = await agent_on(store, FunctionModel(slow))
    heard: list[str] = []

    def listen(delta: ModelDelta) -> None:
        heard.append(delta.text)
        if len(heard) == 2:
            agent.interrupt()

    agent.listen_deltas(listen)
    async with agent:
        assert await agent.run("go") == "aborted"
    events = [s.event for s in await store.events(agent.session_id)]
    (answer,) = [e for e in events if isinstance(e, AssistantMessage)]
    assert (answer.content, answer.partial) == ("The first half, and", True)
    assert agent.messages[-1].content == "The first half, and"
    # Read back from the log, it is the same partial answer; a whole answer stores no flag.
    raw = [s.event.model_dump_json() for s in await store.events(agent.session_id)]
    assert sum('"partial":true' in line for line in raw) == 1
    assert not any('"partial":false' in line for line in raw)


async def test_a_turn_cancelled_while_a_failed_stream_waits_to_retry_keeps_no_partial(store):
    import anyio

    attempts: list[int] = []

    async def flaky(request: ModelRequest):
        attempts.append(1)
        yield ModelDelta("text", "void text")
        raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "dropped", recoverable=True)

    agent = await agent_on(store, FunctionModel(flaky), retry_backoff=30.0, retry_max_wait=30.0)
    heard: list[str] = []

    def listen(delta: ModelDelta) -> None:
        heard.append(delta.kind)
        if delta.kind == "retry":
            agent.interrupt()  # cancelled in the pause before the retry

    agent.listen_deltas(listen)
    async with agent:
        with anyio.fail_after(scaled(20)):
            assert await agent.run("go") == "aborted"
    assert heard == ["text", "retry"]
    assert len(attempts) == 1
    events = [s.event for s in await store.events(agent.session_id)]
    assert not [e for e in events if isinstance(e, AssistantMessage)]  # nothing void is kept
