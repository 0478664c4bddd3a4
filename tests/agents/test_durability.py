"""What a turn produced reaches the log as soon as it exists, and in a form the log can hold."""

from __future__ import annotations

import sqlite3
import threading
import time

import anyio
import pytest

from tether.agents import Agent, new_header
from tether.errors import ErrorCode
from tether.models import FunctionModel, ModelResponse, ToolCall
from tether.store import AssistantMessage, SQLiteStore, ToolResult, TurnEnded
from tether.testing import log_problems, scaled

from .conftest import echo_tool

pytestmark = pytest.mark.anyio


async def test_a_finished_tool_result_is_stored_while_its_sibling_still_runs(make_agent, store):
    release = anyio.Event()

    async def slow(args, ctx):
        await release.wait()
        return "slow done"

    calls = (
        ToolCall(id="c1", name="quick", arguments={"text": "a"}),
        ToolCall(id="c2", name="slow", arguments={"text": "b"}),
    )
    replies = iter([ModelResponse(tool_calls=calls), ModelResponse(text="both done")])
    agent = await make_agent(
        FunctionModel(lambda request: next(replies)),
        tools=[echo_tool("quick", safe=True), echo_tool("slow", safe=True, run=slow)],
    )
    async with agent:
        await agent.followup("go")
        stored: list[ToolResult] = []
        with anyio.fail_after(scaled(5)):
            while not stored:
                await anyio.sleep(0.01)
                events = [s.event for s in await store.events(agent.session_id)]
                stored = [e for e in events if isinstance(e, ToolResult)]
        # The quick result is durable now, while the slow call is still running.
        assert [(r.tool_call_id, r.content) for r in stored] == [("c1", "quick:a")]
        release.set()
        await agent.when_idle()
    events = [s.event for s in await store.events(agent.session_id)]
    results = [e.tool_call_id for e in events if isinstance(e, ToolResult)]
    assert results == ["c1", "c2"]
    assert agent.loop.last_stop_reason == "completed"


async def test_a_lone_surrogate_from_the_model_is_stored_as_a_replacement_character(
    make_agent, store
):
    calls = (ToolCall(id="c1", name="echo", arguments={"text": "smile \ud83d"}),)
    replies = iter(
        [ModelResponse(text="half \ud83d", tool_calls=calls), ModelResponse(text="done \ud83d")]
    )
    agent = await make_agent(FunctionModel(lambda request: next(replies)), tools=[echo_tool()])
    async with agent:
        assert await agent.run("go \ud83d") == "completed"
    events = [s.event for s in await store.events(agent.session_id)]
    answers = [e for e in events if isinstance(e, AssistantMessage)]
    assert [a.content for a in answers] == ["half \ufffd", "done \ufffd"]
    assert answers[0].tool_calls[0].arguments == {"text": "smile \ufffd"}
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.content == "echo:smile \ufffd"
    # What the model sees next is what the log holds: a restored agent has the same history.
    assert [m.content for m in agent.messages][-1] == "done \ufffd"


async def test_a_surrogate_pair_split_across_no_boundary_is_kept_whole(make_agent, store):
    agent = await make_agent(FunctionModel(lambda request: "\ud83d\ude00"))
    async with agent:
        await agent.run("hi")
    events = [s.event for s in await store.events(agent.session_id)]
    assert next(e for e in events if isinstance(e, AssistantMessage)).content == "\U0001f600"


async def test_a_turn_waits_for_a_store_another_program_keeps_locked(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    header = await store.create(new_header())
    locker = sqlite3.connect(tmp_path / "s.db", isolation_level=None, check_same_thread=False)

    def release_later() -> None:
        time.sleep(3.0)
        locker.execute("ROLLBACK")

    async def model(request):
        locker.execute("BEGIN IMMEDIATE")  # another program takes the write lock mid-turn
        threading.Thread(target=release_later).start()
        return "the answer"

    agent = Agent(header=header, store=store, model=FunctionModel(model))
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.05)
            ticks += 1

    async with anyio.create_task_group() as group, agent:
        group.start_soon(tick)
        assert await agent.run("go") == "completed"
        group.cancel_scope.cancel()
    assert ticks > 5  # the event loop kept running while the store waited (blocked: 0 or 1)
    assert agent.fault is None
    events = [s.event for s in await store.events(header.id)]
    assert [e.content for e in events if isinstance(e, AssistantMessage)] == ["the answer"]
    assert log_problems(events) == []
    locker.close()
    await store.aclose()


async def test_an_answer_a_locked_store_refused_is_kept_and_stored_by_the_next_write(tmp_path):
    store = SQLiteStore(tmp_path / "s.db", busy_timeout=0.3)
    header = await store.create(new_header())
    locker = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    answers = iter(["the first answer", "the second answer"])

    def model(request):
        answer = next(answers)
        if answer == "the first answer":
            locker.execute("BEGIN IMMEDIATE")  # locked past the store's busy_timeout
        return answer

    agent = Agent(header=header, store=store, model=FunctionModel(model))
    async with agent:
        assert await agent.run("go") == "error"
        assert agent.fault is not None
        assert agent.fault.code is ErrorCode.STORE_BUSY
        locker.execute("ROLLBACK")
        assert await agent.run("again") == "completed"
        assert agent.fault is None
    events = [s.event for s in await store.events(header.id)]
    contents = [e.content for e in events if isinstance(e, AssistantMessage)]
    assert contents == ["the first answer", "the second answer"]  # nothing received was lost
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == [
        "completed",
        "completed",
    ]
    assert log_problems(events) == []
    locker.close()
    await store.aclose()


class _SlowToConnect:
    """A session-bound model (a remote agent's, say) whose connection, opened when the agent
    enters, hangs until ``ready`` is set."""

    def __init__(self) -> None:
        self.ready = anyio.Event()
        self.inner = FunctionModel(lambda request: "answered")

    async def attach(self, agent: Agent) -> None:
        await self.ready.wait()

    async def detach(self, agent: Agent) -> None:
        pass

    async def request(self, request):  # type: ignore[no-untyped-def]
        return await self.inner.request(request)


async def test_an_entry_cancelled_after_the_lease_was_taken_gives_the_session_back(tmp_path):
    # Cancelled while entering (a worker's drive cancelled by its cluster, a deadline), the
    # agent held the session's lease: leaving it held would refuse every later attempt.
    store = SQLiteStore(tmp_path / "s.db")
    other = SQLiteStore(tmp_path / "s.db")
    try:
        header = await store.create(new_header())
        await store.release(header.id)
        model = _SlowToConnect()
        agent = Agent(header=header, store=store, model=model)  # type: ignore[arg-type]
        with anyio.move_on_after(0.5) as waited:
            async with agent:
                pytest.fail("entered although the model never connected")
        assert waited.cancelled_caught
        assert await other.holder(header.id) is None  # given back, not held by a live process
        model.ready.set()
        again = Agent(header=header, store=other, model=model)  # type: ignore[arg-type]
        async with again:
            assert await again.run("hello") == "completed"
    finally:
        await store.aclose()
        await other.aclose()


@pytest.mark.parametrize("resume", [True, False], ids=["resumed", "closed"])
async def test_a_turn_cut_in_a_later_model_step_goes_on_only_where_the_runtime_resumes(
    tmp_path, resume
):
    """A log cut while the turn's second step asked the model (its first answer and tool
    result stored): a runtime that resumes cut turns (a cluster's worker) asks again and the
    turn goes on, counting the steps and usage it stored before; any other closes it
    ``aborted`` without asking."""
    from tether.agents import ToolRegistry
    from tether.models import Usage
    from tether.store import InboxAccepted, TurnStarted, UserMessage
    from tether.testing import make_runtime, write_profile

    store = SQLiteStore(tmp_path / "s.db")
    header = await store.create(
        new_header(agent="main"),
        [
            InboxAccepted(message_id="m1", content="go"),
            TurnStarted(turn=1, message_id="m1"),
            UserMessage(message_id="m1", content="go"),
            AssistantMessage(
                tool_calls=(ToolCall(id="c1", name="echo", arguments={"text": "a"}),),
                usage=Usage(input_tokens=10, output_tokens=2),
            ),
            ToolResult(tool_call_id="c1", name="echo", content="a"),
        ],
    )
    await store.release(header.id)
    runtime = make_runtime(write_profile(tmp_path, '[tether]\nstore = "memory"\n'))
    runtime.resume_cut_turns = resume
    asked: list[int] = []

    def answer(request):
        asked.append(len(request.messages))
        return ModelResponse(text="went on", usage=Usage(input_tokens=20, output_tokens=3))

    agent = Agent(
        header=header,
        store=store,
        model=FunctionModel(answer),
        tools=ToolRegistry([echo_tool()]),
        runtime=runtime,
    )
    try:
        async with agent:
            await agent.loop.run_parked()
        log = [s.event for s in await store.events(header.id)]
    finally:
        await store.aclose()
    (end,) = [e for e in log if isinstance(e, TurnEnded)]
    assert log_problems(log) == []
    if resume:
        assert len(asked) == 1
        assert (end.stop_reason, end.steps) == ("completed", 2)
        assert (end.usage.input_tokens, end.usage.output_tokens) == (30, 5)
        assert [e.content for e in log if isinstance(e, AssistantMessage)][-1] == "went on"
    else:
        assert asked == []
        assert end.stop_reason == "aborted"
