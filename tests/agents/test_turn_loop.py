"""The turn loop: inbox, steps, tools, stop reasons, retries, cancellation, restore."""

from __future__ import annotations

import gc
import weakref

import anyio
import pytest

from tether.agents import Agent, AgentLimits, new_header
from tether.agents._turn import UNFINISHED_CALL
from tether.errors import ErrorCode, ModelError, TetherError
from tether.models import FunctionModel, ModelResponse, ScriptedModel, ToolCall, Usage
from tether.store import InboxAccepted, MemoryStore, MessageSource
from tether.testing import scaled

from .conftest import echo_tool

pytestmark = pytest.mark.anyio


def script(steps):
    return ScriptedModel.from_data({"steps": steps})


def types(stored):
    return [s.event.type for s in stored]


def call(name, call_id="c1", **arguments):
    return ToolCall(id=call_id, name=name, arguments=arguments)


async def test_one_text_step_completes_and_logs_the_turn(make_agent, store):
    agent = await make_agent(FunctionModel(lambda request: "hello"))
    async with agent:
        assert await agent.run("hi") == "completed"
    stored = await store.events(agent.session_id)
    assert types(stored) == [
        "inbox/accepted",
        "turn/start",
        "user/message",
        "assistant/message",
        "turn/end",
    ]
    end = stored[-1].event
    assert (end.stop_reason, end.steps, end.turn) == ("completed", 1, 1)
    assert stored[3].event.content == "hello"


async def test_followup_is_durable_before_it_is_acknowledged(make_agent, store):
    release = anyio.Event()

    async def slow(request):
        await release.wait()
        return "done"

    agent = await make_agent(FunctionModel(slow))
    async with agent:
        first = await agent.followup("one")
        second = await agent.followup("two")
        accepted = [s.event for s in await store.events(agent.session_id)]
        ids = [e.message_id for e in accepted if isinstance(e, InboxAccepted)]
        assert ids == [first, second]
        assert agent.status == "running"
        release.set()
        await agent.when_idle()
        assert agent.status == "idle"


async def test_followups_run_as_fifo_turns(make_agent):
    model = FunctionModel(lambda request: "re: " + request.messages[-1].content)
    agent = await make_agent(model)
    async with agent:
        for text in ("a", "b", "c"):
            await agent.followup(text)
        await agent.when_idle()
    assert [r.messages[-1].content for r in model.requests] == ["a", "b", "c"]
    assert agent.turns == 3


async def test_steer_reaches_the_running_turn_at_its_next_step(make_agent):
    gate = anyio.Event()

    async def waiting_tool(args, ctx):
        await gate.wait()
        return "tool done"

    model = script(
        [
            dict(tool_calls=[{"name": "echo", "arguments": {"text": "x"}}]),
            dict(text="ok"),
        ]
    )
    agent = await make_agent(model, tools=[echo_tool(run=waiting_tool)])
    async with agent:
        await agent.followup("start")
        await anyio.wait_all_tasks_blocked()
        await agent.steer("also consider this")
        gate.set()
        await agent.when_idle()
    roles = [(m.role, m.content) for m in agent.messages]
    assert roles[-3:] == [
        ("tool", "tool done"),
        ("user", "also consider this"),
        ("assistant", "ok"),
    ]
    assert agent.turns == 1


async def test_steer_on_an_idle_agent_starts_a_turn(make_agent, store):
    agent = await make_agent(FunctionModel(lambda request: "ok"))
    async with agent:
        await agent.steer("wake up")
        await agent.when_idle()
    assert agent.turns == 1
    stored = await store.events(agent.session_id)
    assert stored[0].event.source == MessageSource(kind="steer")


async def test_inject_does_not_wake_an_idle_agent(make_agent):
    model = FunctionModel(lambda request: "ok")
    agent = await make_agent(model)
    async with agent:
        await agent.inject("background fact")
        assert agent.status == "idle"
        assert agent.turns == 0
        await agent.run("question")
    assert [m.content for m in model.requests[0].messages] == ["background fact", "question"]


async def test_inject_while_running_arrives_at_the_next_step(make_agent):
    gate = anyio.Event()

    async def waiting_tool(args, ctx):
        await gate.wait()
        return "done"

    model = script(
        [
            dict(tool_calls=[{"name": "echo", "arguments": {"text": "x"}}]),
            dict(text="ok"),
        ]
    )
    agent = await make_agent(model, tools=[echo_tool(run=waiting_tool)])
    async with agent:
        await agent.followup("go")
        await anyio.wait_all_tasks_blocked()
        await agent.inject("late context")
        gate.set()
        await agent.when_idle()
    assert [m.content for m in agent.messages][-2:] == ["late context", "ok"]


async def test_cancel_aborts_the_running_turn_and_answers_open_tool_calls(make_agent, store):
    async def forever(args, ctx):
        await anyio.sleep_forever()

    model = script([dict(tool_calls=[{"name": "echo", "arguments": {"text": "x"}}])])
    agent = await make_agent(model, tools=[echo_tool(run=forever)])
    async with agent:
        await agent.followup("go")
        await anyio.wait_all_tasks_blocked()
        await agent.cancel()
        await agent.when_idle()
    assert agent.loop.last_stop_reason == "aborted"
    stored = [s.event for s in await store.events(agent.session_id)]
    assert stored[-2].type == "tool/result"
    assert (stored[-2].content, stored[-2].is_error) == (UNFINISHED_CALL, True)
    assert stored[-1].stop_reason == "aborted"


async def test_cancel_discards_queued_messages_unless_kept(make_agent, store):
    gate = anyio.Event()

    async def slow(request):
        await gate.wait()
        return "ok"

    agent = await make_agent(FunctionModel(slow))
    async with agent:
        await agent.followup("one")
        await agent.followup("two")
        await anyio.wait_all_tasks_blocked()
        await agent.cancel()
        await agent.when_idle()
        assert agent.turns == 1
    kinds = types(await store.events(agent.session_id))
    assert "inbox/discarded" in kinds


async def test_cancel_keep_inbox_parks_queued_messages_until_a_waking_message(make_agent):
    gate = anyio.Event()
    seen: list[str] = []

    async def slow(request):
        seen.append(request.messages[-1].content)
        if len(seen) == 1:
            await gate.wait()
        return "ok"

    agent = await make_agent(FunctionModel(slow))
    async with agent:
        await agent.followup("one")
        await agent.followup("two")
        await anyio.wait_all_tasks_blocked()
        await agent.cancel(keep_inbox=True)
        await agent.when_idle()
        assert seen == ["one"]
        await agent.followup("three")
        await agent.when_idle()
    assert seen == ["one", "two", "three"]


async def test_a_tool_that_raises_becomes_an_error_result(make_agent):
    def broken(args, ctx):
        raise ValueError("disk on fire")

    model = script(
        [
            dict(tool_calls=[{"name": "echo", "arguments": {"text": "x"}}]),
            dict(text="sorry"),
        ]
    )
    agent = await make_agent(model, tools=[echo_tool(run=broken)])
    async with agent:
        assert await agent.run("go") == "completed"
    tool_message = agent.messages[-2]
    assert (tool_message.content, tool_message.is_error) == (
        "error: ValueError: disk on fire",
        True,
    )


async def test_unknown_tools_and_invalid_arguments_are_error_results(make_agent):
    model = script(
        [
            dict(
                tool_calls=[
                    {"name": "nope", "arguments": {}},
                    {"name": "echo", "arguments": {"text": 3}},
                ]
            ),
            dict(text="ok"),
        ]
    )
    agent = await make_agent(model, tools=[echo_tool()])
    async with agent:
        await agent.run("go")
    results = [m for m in agent.messages if m.role == "tool"]
    assert results[0].content == 'error: there is no tool "nope"; available tools: echo'
    assert results[1].content == "error: invalid arguments: text: 3 is not of type 'string'"


async def test_safe_tools_run_concurrently(make_agent):
    arrived = {"a": anyio.Event(), "b": anyio.Event()}

    def meet(me, other):
        async def run(args, ctx):
            arrived[me].set()
            with anyio.fail_after(scaled(2)):
                await arrived[other].wait()
            return me

        return run

    model = script(
        [
            dict(
                tool_calls=[
                    {"name": "a", "arguments": {"text": ""}},
                    {"name": "b", "arguments": {"text": ""}},
                ]
            ),
            dict(text="ok"),
        ]
    )
    tools = [
        echo_tool("a", safe=True, run=meet("a", "b")),
        echo_tool("b", safe=True, run=meet("b", "a")),
    ]
    agent = await make_agent(model, tools=tools)
    async with agent:
        await agent.run("go")
    assert [m.content for m in agent.messages if m.role == "tool"] == ["a", "b"]


async def test_unsafe_tools_run_one_at_a_time_in_call_order(make_agent):
    order: list[str] = []

    def record(name):
        async def run(args, ctx):
            order.append(f"start {name}")
            await anyio.sleep(0.01)
            order.append(f"end {name}")
            return name

        return run

    model = script(
        [
            dict(
                tool_calls=[
                    {"name": "a", "arguments": {"text": ""}},
                    {"name": "b", "arguments": {"text": ""}},
                ]
            ),
            dict(text="ok"),
        ]
    )
    agent = await make_agent(
        model, tools=[echo_tool("a", run=record("a")), echo_tool("b", run=record("b"))]
    )
    async with agent:
        await agent.run("go")
    assert order == ["start a", "end a", "start b", "end b"]


async def test_recoverable_model_errors_are_retried_without_redoing_committed_steps(make_agent):
    runs: list[str] = []
    model = script(
        [
            dict(tool_calls=[{"name": "echo", "arguments": {"text": "once"}}]),
            dict(text="done", fail_times=3),
        ]
    )

    def counted(args, ctx):
        runs.append(args["text"])
        return "ok"

    agent = await make_agent(model, tools=[echo_tool(run=counted)])
    async with agent:
        assert await agent.run("go") == "completed"
    assert runs == ["once"]
    model.assert_consumed()


async def test_retries_give_up_after_model_retries(make_agent, store):
    model = script([dict(text="never", fail_times=4)])
    agent = await make_agent(model, limits=AgentLimits(retry_backoff=0, model_retries=3))
    async with agent:
        assert await agent.run("go") == "error"
    end = (await store.events(agent.session_id))[-1].event
    assert "scripted transient failure 4 of step 1 (gave up after 3 retries)" in end.error


async def test_a_failing_model_ends_the_turn_with_error_and_a_diagnostic(make_agent, store):
    def broken(request):
        raise RuntimeError("socket closed")

    agent = await make_agent(FunctionModel(broken))
    async with agent:
        assert await agent.run("go") == "error"
    end = (await store.events(agent.session_id))[-1].event
    assert "RuntimeError: socket closed" in end.error


@pytest.mark.parametrize(
    ("finish", "stop"), [("length", "max-tokens"), ("refusal", "refusal"), ("error", "error")]
)
async def test_finish_reasons_map_to_stop_reasons(make_agent, finish, stop):
    agent = await make_agent(FunctionModel(lambda r: ModelResponse(text="x", finish_reason=finish)))
    async with agent:
        assert await agent.run("go") == stop


async def test_the_step_limit_ends_the_turn_with_max_tokens(make_agent):
    def loop(request):
        n = len(request.messages)
        return ModelResponse(
            tool_calls=(call("echo", f"c{n}", text="x"),), finish_reason="tool_calls"
        )

    agent = await make_agent(
        FunctionModel(loop), tools=[echo_tool()], limits=AgentLimits(max_steps=3)
    )
    async with agent:
        assert await agent.run("go") == "max-tokens"
    assert sum(1 for m in agent.messages if m.role == "assistant") == 3


async def test_the_output_token_limit_ends_the_turn_with_max_tokens(make_agent):
    def spend(request):
        n = len(request.messages)
        return ModelResponse(
            tool_calls=(call("echo", f"c{n}", text="x"),),
            usage=Usage(output_tokens=40),
            finish_reason="tool_calls",
        )

    model = FunctionModel(spend)
    agent = await make_agent(model, tools=[echo_tool()], limits=AgentLimits(max_output_tokens=100))
    async with agent:
        assert await agent.run("go") == "max-tokens"
    assert [r.max_output_tokens for r in model.requests] == [100, 60, 20]


async def test_restore_rebuilds_history_and_runs_unclaimed_messages_first(store):
    from tether.agents import new_header

    header = await store.create(new_header(agent="main"))
    model = FunctionModel(lambda request: "re: " + request.messages[-1].content)
    first = Agent(header=header, store=store, model=model)
    async with first:
        await first.run("one")
    # A message accepted by a process that died before claiming it:
    await store.append(header.id, [InboxAccepted(message_id="msg_lost", content="two")])
    second = Agent(header=header, store=store, model=model)
    async with second:
        assert [m.content for m in second.messages] == ["one", "re: one"]
        await second.followup("three")
        await second.when_idle()
    assert [r.messages[-1].content for r in model.requests] == ["one", "two", "three"]
    assert second.turns == 3


async def test_sending_outside_async_with_is_an_error(make_agent):
    agent = await make_agent(FunctionModel(lambda request: "x"))
    await agent.restore()
    with pytest.raises(RuntimeError, match=r"async with agent"):
        await agent.followup("hi")


async def test_model_error_codes_survive_into_the_turn_end(make_agent, store):
    model = script([])
    agent = await make_agent(model)
    async with agent:
        assert await agent.run("go") == "error"
    end = (await store.events(agent.session_id))[-1].event
    assert f"[{ErrorCode.SCRIPT_MISMATCH}]" in end.error
    assert isinstance(ModelError, type)


async def test_a_steer_is_durable_before_it_is_acknowledged(make_agent, store):
    gate = anyio.Event()

    async def waiting_tool(args, ctx):
        await gate.wait()
        return "done"

    model = script([{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}, {"text": "ok"}])
    agent = await make_agent(model, tools=[echo_tool(run=waiting_tool)])
    async with agent:
        await agent.followup("go")
        await anyio.wait_all_tasks_blocked()
        steer_id = await agent.steer("change course")
        accepted = [s.event for s in await store.events(agent.session_id)][-1]
        assert (accepted.type, accepted.message_id, accepted.delivery) == (
            "inbox/accepted",
            steer_id,
            "step",
        )
        gate.set()
        await agent.when_idle()


async def test_unclaimed_steer_and_inject_survive_a_restart(store):
    from tether.agents import new_header

    header = await store.create(new_header(agent="main"))
    await store.append(
        header.id,
        [
            InboxAccepted(message_id="m1", content="steered", delivery="step"),
            InboxAccepted(message_id="m2", content="context", delivery="context"),
        ],
    )
    model = FunctionModel(lambda request: "ok")
    agent = Agent(header=header, store=store, model=model)
    async with agent:
        assert agent.status == "idle"  # restored messages wait for a waking message
        await agent.followup("next")
        await agent.when_idle()
    # The steer became a turn of its own; the context arrived with the first step.
    assert [m.content for m in model.requests[0].messages] == ["steered", "context"]
    assert model.requests[1].messages[-1].content == "next"


async def test_a_failing_instruction_resolver_ends_the_turn_with_error_and_the_agent_lives_on(
    make_agent, store
):
    from tether.agents import DynamicInstruction

    calls = []

    def flaky(context):
        calls.append(context.turn)
        if len(calls) == 1:
            raise RuntimeError("clock unavailable")
        return "noon"

    agent = await make_agent(
        FunctionModel(lambda r: "ok"), instructions=[DynamicInstruction("clock", flaky)]
    )
    async with agent:
        assert await agent.run("one") == "error"
        assert await agent.run("two") == "completed"
    ends = [s.event for s in await store.events(agent.session_id) if s.event.type == "turn/end"]
    assert ends[0].error == "RuntimeError: clock unavailable"
    # The message of the failed turn is kept, not lost.
    assert [m.content for m in agent.messages if m.role == "user"] == ["one", "two"]


async def test_leaving_async_with_mid_turn_closes_the_turn_in_the_log(make_agent, store):
    async def forever(args, ctx):
        await anyio.sleep_forever()

    model = script([{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}])
    agent = await make_agent(model, tools=[echo_tool(run=forever)])
    async with agent:
        await agent.followup("go")
        await anyio.wait_all_tasks_blocked()
    events = [s.event for s in await store.events(agent.session_id)]
    assert [e.type for e in events[-2:]] == ["tool/result", "turn/end"]
    assert events[-2].content == UNFINISHED_CALL
    assert events[-1].stop_reason == "aborted"
    assert agent.loop.last_stop_reason == "aborted"


async def test_sending_before_async_with_writes_nothing(make_agent, store):
    agent = await make_agent(FunctionModel(lambda r: "x"))
    for send in (agent.followup, agent.steer, agent.inject):
        with pytest.raises(RuntimeError, match=r"async with agent"):
            await send("hi")
    assert await store.events(agent.session_id) == []


async def test_restore_closes_a_turn_the_process_never_finished(store):
    from tether.agents import new_header
    from tether.store import AssistantMessage, TurnStarted, UserMessage

    header = await store.create(new_header(agent="main"))
    await store.append(
        header.id,
        [
            InboxAccepted(message_id="m1", content="go"),
            TurnStarted(turn=1, message_id="m1"),
            UserMessage(message_id="m1", content="go"),
            AssistantMessage(tool_calls=(call("echo", "c1", text="x"),)),
        ],
    )
    model = FunctionModel(lambda request: "fine")
    agent = Agent(header=header, store=store, model=model)
    async with agent:
        await agent.run("again")
    events = [s.event for s in await store.events(header.id)]
    assert [e.type for e in events[4:6]] == ["tool/result", "turn/end"]
    assert events[4].is_error
    assert "interrupted" in events[4].content
    assert events[5].stop_reason == "aborted"
    roles = [m.role for m in model.requests[0].messages]
    assert roles == ["user", "assistant", "tool", "user"]
    assert agent.turns == 2


async def test_arguments_that_are_not_a_json_object_fail_without_running_the_tool(make_agent):
    ran = []
    broken = ToolCall(id="c1", name="echo", arguments={}, invalid_arguments="{not json")
    responses = iter([ModelResponse(tool_calls=(broken,), finish_reason="tool_calls"), "ok"])

    def model(request):
        return next(responses)

    agent = await make_agent(
        FunctionModel(model), tools=[echo_tool(run=lambda a, c: ran.append(a))]
    )
    async with agent:
        await agent.run("go")
    assert ran == []
    result = next(m for m in agent.messages if m.role == "tool")
    assert result.content == (
        "error: the arguments are not valid JSON: Expecting property name enclosed in double "
        "quotes at column 2: {not json; call the tool again with a JSON object"
    )


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (
            '{"name": "ci',
            "the arguments are not valid JSON: Unterminated string starting at "
            'column 10: {"name": "ci',
        ),
        ('{"a": 1,\n"b": }', "not valid JSON: Expecting value at line 2 column 6"),
        ("[1, 2]", "the arguments must be a JSON object, not an array: [1, 2]"),
        ('"text"', 'the arguments must be a JSON object, not a string: "text"'),
        ("null", "the arguments must be a JSON object, not null"),
        ("  ", "the arguments are empty (they must be a JSON object, {} for none)"),
        ("{" * 100_000, "not valid JSON"),
        ("x" * 2000, "x" * 500 + "...; call the tool again"),
    ],
)
async def test_invalid_arguments_are_kept_verbatim_and_the_error_says_what_is_wrong(
    make_agent, store, raw, says
):
    broken = ToolCall(id="c1", name="echo", invalid_arguments=raw)
    responses = iter([ModelResponse(tool_calls=(broken,), finish_reason="tool_calls"), "ok"])
    agent = await make_agent(FunctionModel(lambda request: next(responses)), tools=[echo_tool()])
    async with agent:
        assert await agent.run("go") == "completed"
    stored = [s.event for s in await store.events(agent.session_id)]
    call_event = next(e for e in stored if e.type == "assistant/message" and e.tool_calls)
    assert call_event.tool_calls[0].invalid_arguments == raw  # as the model wrote it
    result = next(e for e in stored if e.type == "tool/result")
    assert result.is_error
    assert result.content.startswith("error: ")
    assert says in result.content
    assert len(result.content) < 700


async def test_safe_calls_run_together_only_with_their_neighbours_in_call_order(make_agent):
    order: list[str] = []

    def record(name):
        async def run(args, ctx):
            order.append(f"start {name}")
            await anyio.sleep(0.01)
            order.append(f"end {name}")
            return name

        return run

    model = script(
        [
            {
                "tool_calls": [
                    {"name": n, "arguments": {"text": ""}} for n in ("first", "b", "c", "last")
                ]
            },
            {"text": "ok"},
        ]
    )
    tools = [
        echo_tool("first", run=record("first")),
        echo_tool("b", safe=True, run=record("b")),
        echo_tool("c", safe=True, run=record("c")),
        echo_tool("last", run=record("last")),
    ]
    agent = await make_agent(model, tools=tools)
    async with agent:
        await agent.run("go")
    assert order[:2] == ["start first", "end first"]
    assert set(order[2:4]) == {"start b", "start c"}
    assert order[-2:] == ["start last", "end last"]


async def test_sync_safe_tools_run_in_threads_and_overlap(make_agent):
    import threading

    barrier = threading.Barrier(2, timeout=scaled(2))

    def meet(args, ctx):
        barrier.wait()  # would time out if the two calls ran one after the other
        return "met"

    model = script(
        [
            {"tool_calls": [{"name": n, "arguments": {"text": ""}} for n in ("a", "b")]},
            {"text": "ok"},
        ]
    )
    tools = [echo_tool("a", safe=True, run=meet), echo_tool("b", safe=True, run=meet)]
    agent = await make_agent(model, tools=tools)
    async with agent:
        await agent.run("go")
    assert [m.content for m in agent.messages if m.role == "tool"] == ["met", "met"]


async def test_a_steer_after_the_last_step_becomes_the_next_turn(make_agent):
    gate = anyio.Event()
    seen: list[str] = []

    async def answer(request):
        seen.append(request.messages[-1].content)
        if len(seen) == 1:
            await gate.wait()
        return "ok"

    agent = await make_agent(FunctionModel(answer))
    async with agent:
        await agent.followup("first")
        await anyio.wait_all_tasks_blocked()
        await agent.steer("actually, also this")  # arrives during the turn's only step
        gate.set()
        await agent.when_idle()
    assert seen == ["first", "actually, also this"]
    assert agent.turns == 2


async def test_cancel_discards_a_waiting_steer_too(make_agent, store):
    gate = anyio.Event()

    async def waiting_tool(args, ctx):
        await gate.wait()
        return "done"

    model = script([{"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]}, {"text": "ok"}])
    agent = await make_agent(model, tools=[echo_tool(run=waiting_tool)])
    async with agent:
        await agent.followup("go")
        await anyio.wait_all_tasks_blocked()
        steer_id = await agent.steer("never mind")
        await agent.cancel()
        await agent.when_idle()
    events = [s.event for s in await store.events(agent.session_id)]
    assert any(e.type == "inbox/discarded" and e.message_id == steer_id for e in events)
    assert agent.turns == 1


async def test_an_agent_whose_lease_was_taken_over_writes_nothing_more(tmp_path):
    import sqlite3

    from tether.agents import new_header
    from tether.store import SQLiteStore, TurnStarted

    first = SQLiteStore(tmp_path / "s.db")
    other = SQLiteStore(tmp_path / "s.db")
    header = await first.create(new_header(agent="main"))

    async def interloper(request):
        # As if the first owner's lease had expired and another host took it over.
        db = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
        db.execute(
            "UPDATE leases SET token = ? WHERE session_id = ?", (other.owner.token, header.id)
        )
        db.close()
        await other.append(header.id, [TurnStarted(turn=99)])
        return "answer"

    agent = Agent(header=header, store=first, model=FunctionModel(interloper))
    async with agent:
        assert await agent.run("go") == "error"
        length = len(await other.events(header.id))
        with pytest.raises(TetherError, match="SESSION_BUSY"):
            await agent.followup("more")  # refused: the agent writes nothing once fenced
    assert agent.fault is not None
    assert agent.fault.code is ErrorCode.SESSION_BUSY
    assert len(await other.events(header.id)) == length
    await first.aclose()
    await other.aclose()


async def test_an_exception_in_the_block_leaves_it_as_raised_not_in_a_group(tmp_path):
    from tether.agents import Agent
    from tether.agents._agent import new_header
    from tether.models import FunctionModel
    from tether.store import MemoryStore

    store = MemoryStore()
    header = await store.create(new_header())
    agent = Agent(header=header, store=store, model=FunctionModel(lambda r: "ok"))

    async def use_then_fail() -> None:
        async with agent:
            await agent.run("hello")
            raise ValueError("mine")

    with pytest.raises(ValueError, match="mine"):
        await use_then_fail()
    assert agent.turns == 1


async def test_queued_notices_join_one_turn_but_other_messages_keep_their_own(tmp_path):
    from tether.agents import Agent
    from tether.agents._agent import new_header
    from tether.models import FunctionModel
    from tether.store import MemoryStore, MessageSource

    seen: list[list[str]] = []

    def model(request):
        seen.append([m.content for m in request.messages if m.role == "user"])
        return "ok"

    store = MemoryStore()
    agent = Agent(header=await store.create(new_header()), store=store, model=FunctionModel(model))
    notice = MessageSource(kind="notice", sender="ses_child")
    async with agent:
        await agent.followup("child one finished", source=notice)
        await agent.followup("child two finished", source=notice)
        await agent.followup("a question")
        await agent.followup("child three finished", source=notice)
        await agent.when_idle()
    assert agent.turns == 3
    assert seen[0] == ["child one finished", "child two finished"]
    assert seen[1][-1] == "a question"
    assert seen[2][-1] == "child three finished"


async def test_a_finished_agent_is_freed_by_reference_counting():
    """An agent and its collaborators form no reference cycle (they hold it weakly): once its
    session is left and dropped, it is freed at once, not left for the cyclic collector (which
    thousands of finished children would keep busy). A store no other process shares, so the
    agent starts no keeper job (a cancelled job's traceback is a cycle of its own)."""
    store = MemoryStore()
    header = await store.create(new_header(agent="main"))
    agent = Agent(
        header=header, store=store, model=FunctionModel(lambda r: "hello"), new_session=True
    )
    async with agent:
        assert await agent.run("hi") == "completed"
    assert agent.loop.turn is not None  # the turn that ran last is kept, as is the budget
    gone = weakref.ref(agent)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        del agent
        assert gone() is None
    finally:
        if was_enabled:
            gc.enable()


async def test_withdraw_drops_only_the_named_unclaimed_messages(make_agent, store):
    gate = anyio.Event()

    async def waiting_tool(args, ctx):
        await gate.wait()
        return "done"

    model = script(
        [
            {"tool_calls": [{"name": "echo", "arguments": {"text": "x"}}]},
            {"expect": "keep this", "text": "kept the steer"},
            {"expect": "and this turn", "text": "kept the turn"},
        ]
    )
    agent = await make_agent(model, tools=[echo_tool(run=waiting_tool)])
    async with agent:
        first = await agent.followup("go")
        await anyio.wait_all_tasks_blocked()
        kept = await agent.steer("keep this")
        taken_back = await agent.steer("take this back")
        queued = await agent.followup("and this turn")
        dropped_turn = await agent.followup("take this back too")
        withdrawn = agent.inbox.withdraw({taken_back, dropped_turn, first, "msg_unknown"})
        await agent.lease.append(*withdrawn)
        gate.set()
        await agent.when_idle()
    # The claimed message (the running turn's) and unknown ids are not touched.
    assert [e.message_id for e in withdrawn] == [dropped_turn, taken_back]
    events = [s.event for s in await store.events(agent.session_id)]
    claims = [e.message_id for e in events if e.type == "user/message"]
    assert claims == [first, kept, queued]
    assert agent.turns == 2
