"""A turn that repeats itself stops (issue 38: a small model called ``list_notes({})`` 23 times
in one turn). Steps in a row with the same tool calls and arguments: the one that reaches
``max_repeated_calls`` runs and the model then reads a notice; one more ends the turn with
``error`` (``TOOL_CALLS_REPEATED``), its calls answered but not run."""

from __future__ import annotations

import itertools

import pytest

from tether.agents import AgentLimits, Tool
from tether.agents._step import REPEAT_ORIGIN, REPEAT_REFUSED
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.store import AssistantMessage, ContextMessage, ToolResult, TurnEnded

from .conftest import echo_tool

pytestmark = pytest.mark.anyio


def list_notes(runs: list[int]) -> Tool:
    def run(arguments, context):
        runs.append(1)
        return "groceries.md\nlaunch.md"

    return Tool("list_notes", "List the notes.", run, {"type": "object", "properties": {}})


def looping(requests: list[ModelRequest], *, obeys: bool = False) -> FunctionModel:
    """Calls ``list_notes({})`` at every step (``obeys``: answers once it read the notice)."""

    def answer(request: ModelRequest) -> ModelResponse:
        requests.append(request)
        last = request.messages[-1]
        if obeys and last.role == "user" and "same tool call" in last.content:
            return ModelResponse(text="You have groceries.md and launch.md.")
        call = ToolCall(id=f"c{len(requests)}", name="list_notes", arguments={})
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")

    return FunctionModel(answer)


async def events_of(store, agent) -> list:
    return [stored.event for stored in await store.events(agent.session_id)]


async def test_the_same_call_in_a_row_gets_a_notice_then_stops_the_turn(make_agent, store):
    requests: list[ModelRequest] = []
    runs: list[int] = []
    agent = await make_agent(looping(requests), tools=[list_notes(runs)])
    async with agent:
        assert await agent.run("What notes do I have?") == "error"
    # Five steps ran the call; the sixth, after the notice, was stopped before it ran.
    assert len(runs) == 5
    assert len(requests) == 6
    events = await events_of(store, agent)
    notices = [e for e in events if isinstance(e, ContextMessage)]
    assert len(notices) == 1
    assert notices[0].origin == REPEAT_ORIGIN
    assert "list_notes({})" in notices[0].content
    assert "5 times in a row" in notices[0].content
    # The model read it as the last message of its sixth request.
    assert requests[5].messages[-1].content == notices[0].content
    assert all(notices[0].content not in m.content for r in requests[:5] for m in r.messages)
    # Every call is answered in the log: the refused one says it was not run.
    calls = [c for e in events if isinstance(e, AssistantMessage) for c in e.tool_calls]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert results[-1].content == REPEAT_REFUSED
    assert results[-1].is_error
    ended = events[-1]
    assert isinstance(ended, TurnEnded)
    assert ended.stop_reason == "error"
    assert ended.steps == 6
    assert ended.error is not None
    assert "list_notes({}) in 6 steps in a row" in ended.error
    assert "limits.max_repeated_calls = 5" in ended.error
    assert ended.error.endswith("[TOOL_CALLS_REPEATED]")


async def test_the_prompt_stays_append_only(make_agent):
    requests: list[ModelRequest] = []
    agent = await make_agent(looping(requests), tools=[list_notes([])])
    async with agent:
        await agent.run("go")
    for before, after in itertools.pairwise(requests):
        assert after.messages[: len(before.messages)] == before.messages
        assert after.system == before.system


async def test_a_model_that_heeds_the_notice_completes_its_turn(make_agent):
    requests: list[ModelRequest] = []
    runs: list[int] = []
    agent = await make_agent(looping(requests, obeys=True), tools=[list_notes(runs)])
    async with agent:
        assert await agent.run("What notes do I have?") == "completed"
    assert len(runs) == 5
    # The next turn starts counting afresh.
    async with agent:
        assert await agent.run("And now?") == "completed"
    assert len(runs) == 10


async def test_different_arguments_or_a_call_in_between_do_not_count(make_agent):
    steps = []
    for number in range(12):
        text = "a" if number % 2 else f"text {number // 4}"  # a repeat, then something else
        steps.append({"tool_calls": [{"name": "echo", "arguments": {"text": text}}]})
    steps.append({"text": "done"})
    model = FunctionModel(_replay(steps))
    agent = await make_agent(model, tools=[echo_tool()], limits=AgentLimits(max_repeated_calls=2))
    async with agent:
        assert await agent.run("go") == "completed"


def _replay(steps):
    played: list[int] = []

    def answer(request):
        step = steps[len(played)]
        played.append(1)
        if "text" in step:
            return ModelResponse(text=step["text"])
        calls = tuple(
            ToolCall(id=f"c{len(played)}-{i}", name=c["name"], arguments=c["arguments"])
            for i, c in enumerate(step["tool_calls"])
        )
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")

    return answer


async def test_the_same_parallel_calls_in_any_order_are_the_same_step(make_agent, store):
    def answer(request):
        order = ("a", "b") if len(request.messages) % 2 else ("b", "a")
        calls = tuple(
            ToolCall(id=f"c{len(request.messages)}{t}", name="echo", arguments={"text": t})
            for t in order
        )
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")

    agent = await make_agent(
        FunctionModel(answer), tools=[echo_tool()], limits=AgentLimits(max_repeated_calls=2)
    )
    async with agent:
        assert await agent.run("go") == "error"
    ended = (await events_of(store, agent))[-1]
    assert ended.steps == 3
    assert "echo(" in ended.error


async def test_zero_turns_the_check_off(make_agent, store):
    requests: list[ModelRequest] = []
    agent = await make_agent(
        looping(requests),
        tools=[list_notes([])],
        limits=AgentLimits(max_repeated_calls=0, max_steps=12),
    )
    async with agent:
        assert await agent.run("go") == "max-tokens"
    assert len(requests) == 12
    assert not [e for e in await events_of(store, agent) if isinstance(e, ContextMessage)]
