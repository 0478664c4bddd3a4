"""A local child is hosted by one task: it settles its result there and calls back.

Spawn and fork runs (``LocalChildRun``) are :class:`tether.subagents.SettlingRun`: the job that
hosts the child also settles its result and awaits an ``on_settled`` callback, so a background
delegation costs one task per live child, and waiting for a result needs no task of its own.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest

from tether.agents import Agent
from tether.models import FunctionModel
from tether.subagents import (
    SettlingRun,
    SubagentResult,
    SubagentRuntime,
    SubagentStartRequest,
)
from tether.subagents._tasks import is_settling
from tether.testing import scaled
from tether_spawn import SpawnProvider

from .conftest import Brain, delegate, is_child, make_parent, wait_for

pytestmark = pytest.mark.anyio


async def test_a_live_background_child_costs_one_task(runtime):
    release = anyio.Event()

    async def child(request) -> str:
        await release.wait()
        return "done"

    def parent(request):
        last = request.messages[-1]
        if last.role == "user" and last.content == "go":
            calls = [delegate(f"task {n}", background=True, call_id=f"d{n}") for n in range(3)]
            return calls[0].model_copy(update={"tool_calls": tuple(c.tool_calls[0] for c in calls)})
        return "noted"

    brain = Brain(parent, child)
    agent = await make_parent(runtime, brain.model)
    async with agent:
        before = len(asyncio.all_tasks())
        await agent.run("go")
        await wait_for(lambda: len(brain.child_requests) == 3)
        assert len(asyncio.all_tasks()) - before == 3  # one host task per live child
        release.set()

        def results() -> list[str]:
            return [m.content for m in agent.messages if m.content.startswith("<task_result")]

        await wait_for(lambda: len(results()) == 3)
        await agent.when_idle()
    assert all('status="completed"' in result for result in results())


async def start_one(kernel, answer) -> tuple[SubagentRuntime, Agent, SubagentStartRequest]:
    def model(request):
        return answer(request) if is_child(request) else "parent"

    parent = await make_parent(kernel, FunctionModel(model))
    service = SubagentRuntime()
    service.register_provider(SpawnProvider())
    return service, parent, SubagentStartRequest(parent=parent, prompt="the task")


async def test_a_callback_given_after_the_child_settled_is_still_called_in_its_host(kernel):
    service, parent, request = await start_one(kernel, lambda r: "quick answer")
    async with parent:
        run = await service.start("spawn", request)
        assert isinstance(run, SettlingRun)
        await anyio.sleep(0)  # the host has settled by now: the answer needed no waiting
        got: list[SubagentResult] = []
        done = anyio.Event()

        async def settled(result: SubagentResult) -> None:
            got.append(result)
            await run.dispose()  # from the callback's own task: no deadlock
            done.set()

        assert run.on_settled(settled) is True
        with anyio.fail_after(scaled(5)):
            await done.wait()
        assert [r.output for r in got] == ["quick answer"]
        assert (await run.result()).output == "quick answer"
        assert run.on_settled(settled) is False  # disposed: the run has ended


async def test_a_disposed_run_calls_no_callback_and_result_says_aborted(kernel):
    async def never(request) -> str:
        await anyio.sleep_forever()
        return "never"

    service, parent, request = await start_one(kernel, never)
    async with parent:
        run = await service.start("spawn", request)
        assert isinstance(run, SettlingRun)
        await run.dispose()
        assert run.on_settled(lambda result: anyio.sleep(0)) is False
        result = await run.result()
        assert result.stop_reason == "aborted"


async def test_a_callback_under_way_when_the_parent_is_left_runs_to_its_end(kernel):
    """The parent's teardown cancels its task group while the host awaits the callback (the
    delivery of a result): the host's child is shielded from that, so the callback ends as it
    would have, and the parent is left once it has."""
    service, parent, request = await start_one(kernel, lambda r: "quick answer")
    called, gate = anyio.Event(), anyio.Event()
    delivered: list[str] = []

    async def settled(result: SubagentResult) -> None:
        called.set()
        await gate.wait()  # the parent is being left meanwhile
        await anyio.sleep(0)
        delivered.append(result.output)

    async def host_parent() -> None:
        async with parent:
            run = await service.start("spawn", request)
            assert isinstance(run, SettlingRun)
            assert run.on_settled(settled) is True
            await called.wait()

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as group:
            group.start_soon(host_parent)
            await called.wait()
            await wait_for(lambda: parent.tearing_down)
            await anyio.wait_all_tasks_blocked()  # the teardown's cancellation has been delivered
            assert delivered == []
            gate.set()
    assert delivered == ["quick answer"]


async def test_whether_a_run_settles_is_its_class_s_answer_found_once(kernel):
    """``is_settling`` is ``isinstance(run, SettlingRun)``, remembered for the run's class."""
    service, parent, request = await start_one(kernel, lambda r: "quick answer")

    class Plain:  # a SubagentRun without on_settled
        id = "plain"
        local_agent = None

        async def result(self) -> SubagentResult:
            return SubagentResult(output="", stop_reason="completed")

        async def dispose(self) -> None:
            return None

    assert not is_settling(Plain())
    assert not is_settling(Plain())
    async with parent:
        run = await service.start("spawn", request)
        assert is_settling(run) is isinstance(run, SettlingRun) is True
        again = await service.start("spawn", SubagentStartRequest(parent=parent, prompt="more"))
        assert is_settling(again)
        await run.dispose()
        await again.dispose()
