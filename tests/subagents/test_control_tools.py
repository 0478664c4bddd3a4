"""The subagent tool in continuable mode and the control tools: send_message, interrupt_agent,
list_agents and report, driven by a parent model through real tool calls."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tether.errors import PluginError
from tether.models import ModelRequest, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import SQLiteStore
from tether_subagent_tools._control import render_entries

from .conftest import Brain, last, tool_results, wait_for

pytestmark = pytest.mark.anyio

TASK_TOOLS = ("task_wait", "task_cancel", "task_output")

CONTINUABLE = '[plugin.subagent]\nbackground = "continuable"\n'


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


def call(name: str, call_id: str = "c1", **arguments) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
        finish_reason="tool_calls",
    )


def script(*steps: Any) -> Any:
    """A parent that plays ``steps`` (functions of the request, or responses) in order, then
    answers "ok"."""
    queue = list(steps)

    def answer(request: ModelRequest) -> Any:
        if not queue:
            return "ok"
        step = queue.pop(0)
        return step(request) if callable(step) else step

    return answer


def started_id(parent) -> str:
    (result,) = [r for r in tool_results(parent) if r.startswith("Started task ")]
    return result.split()[2].rstrip(".")


async def quiet(runtime, parent):
    manager = runtime.subagents.continuation
    await wait_for(lambda: not manager._activations)  # pyright: ignore[reportPrivateUsage]  (white-box)
    await parent.when_idle()


async def test_the_subagent_tool_starts_a_continuable_child_by_default(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    brain = Brain(
        script(call("subagent", description="look it up", prompt="child task")),
        lambda r: f"child answer to {last(r)}",
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
        child_id = started_id(parent)
        await quiet(runtime, parent)
    (header,) = await store.sessions(parent=parent.session_id)
    assert header.id == child_id
    assert header.label == "look it up"
    schema = next(t for t in brain.parent_requests[0].tools if t.name == "subagent")
    assert "continuable" in schema.parameters["properties"]["run_in_background"]["description"]
    assert any(
        m.content.startswith(f'<task_result id="{child_id}" tool="subagent" status="completed">')
        for m in parent.messages
    )


async def test_run_in_background_false_still_delegates_one_shot(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    brain = Brain(
        script(call("subagent", description="quick one", prompt="x", run_in_background=False)),
        lambda r: "one-shot answer",
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
    assert tool_results(parent) == ["one-shot answer"]


async def test_send_message_queues_the_next_turn_and_restores_a_settled_child(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    child_ids: list[str] = []

    def send(request):
        return call("send_message", "c2", subagent_id=child_ids[0], message="and then?")

    brain = Brain(
        script(call("subagent", description="a task", prompt="first"), "started it", send),
        lambda r: f"answer to {last(r)}",
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
        child_ids.append(started_id(parent))
        await quiet(runtime, parent)  # settled, and its notice took the parent's second step
        await parent.run("send it more")
        await quiet(runtime, parent)
    assert f"message queued as the next turn for subagent {child_ids[0]}" in tool_results(parent)
    texts = [
        s.event.content
        for s in await store.events(child_ids[0])
        if s.event.type == "user/message"  # type: ignore[union-attr]
    ]
    assert texts == ["first", "and then?"]


async def test_send_message_to_an_unknown_id_is_an_error_result(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    brain = Brain(script(call("send_message", subagent_id="ses_nope", message="hi")), last)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
    (result,) = tool_results(parent)
    assert result.startswith('error: subagent "ses_nope" is unavailable')
    assert result.endswith("[SUBAGENT_UNAVAILABLE]")


async def test_interrupt_agent_on_an_unknown_id_says_there_is_no_such_agent(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    brain = Brain(script(call("interrupt_agent", agent_id="ses_gone")), last)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
    (result,) = tool_results(parent)
    assert result == (
        'error: subagent "ses_gone" is unavailable: there is no such session; list your '
        "subagents with list_agents [SUBAGENT_UNAVAILABLE]"
    )


class HeldChild:
    """A child brain whose first turn waits until released (then answers every turn)."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def __call__(self, request: ModelRequest) -> str:
        if last(request) == "child task":
            self.entered.set()
            await self.release.wait()
        return f"answer to {last(request)}"


def interrupt_started(parent_box: list) -> Any:
    """A parent step that interrupts the child it started (its id is read from the log)."""
    return lambda request: call("interrupt_agent", "i1", agent_id=started_id(parent_box[0]))


async def test_interrupt_agent_says_it_interrupted_a_running_turn(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    held, box = HeldChild(), []
    brain = Brain(
        script(
            call("subagent", description="a task", prompt="child task"),
            "started it",
            interrupt_started(box),
        ),
        held,
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    box.append(parent)
    async with parent:
        await parent.run("go")
        child_id = started_id(parent)
        await held.entered.wait()
        await parent.run("stop it")
        await quiet(runtime, parent)
    assert (
        f"interrupted the running turn of agent {child_id}; its queued messages wait until you "
        "send it another"
    ) in tool_results(parent)
    ends = [s.event for s in await store.events(child_id) if s.event.type == "turn/end"]
    assert [e.stop_reason for e in ends] == ["aborted"]  # type: ignore[union-attr]


async def test_interrupt_agent_says_nothing_was_running_and_what_stays_parked(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    held, box = HeldChild(), []
    brain = Brain(
        script(
            call("subagent", description="a task", prompt="child task"),
            "started it",
            interrupt_started(box),
        ),
        held,
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    box.append(parent)
    manager = runtime.subagents.continuation
    async with parent:
        await parent.run("go")
        child_id = started_id(parent)
        await held.entered.wait()
        await manager.followup(parent, child_id, "queued")
        assert await manager.interrupt(child_id, by=parent) == "interrupted"
        child = manager.live(child_id)
        assert child is not None
        await child.when_idle()
        await parent.run("stop it")  # the tool's interrupt finds no turn running
        assert manager.state(child_id) == "running"  # the parked message keeps it
        await manager.followup(parent, child_id, "wake up")
        await quiet(runtime, parent)
    assert (
        f"agent {child_id} was not running a turn; nothing was interrupted; its 1 queued "
        "message(s) wait until you send it another"
    ) in tool_results(parent)
    texts = [
        s.event.content
        for s in await store.events(child_id)
        if s.event.type == "user/message"  # type: ignore[union-attr]
    ]
    assert texts == ["child task", "queued", "wake up"]


async def test_interrupt_agent_says_a_settled_child_is_not_running(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    box: list = []
    brain = Brain(
        script(call("subagent", description="a task", prompt="child task"), "started it"),
        lambda r: f"answer to {last(r)}",
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    box.append(parent)
    async with parent:
        await parent.run("go")
        child_id = started_id(parent)
        await quiet(runtime, parent)
        brain.parent = script(interrupt_started(box))
        await parent.run("stop it")
    assert tool_results(parent)[-1] == (
        f"agent {child_id} is not running (it settled earlier; send_message restores it); "
        "nothing was interrupted"
    )
    assert runtime.subagents.continuation.state(child_id) is None  # nothing was restored


async def test_interrupt_agent_says_a_one_shot_child_cannot_be_interrupted(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    brain = Brain(
        script(call("subagent", description="quick", prompt="x", run_in_background=False)),
        lambda r: "one-shot answer",
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
        (child,) = await store.sessions(parent=parent.session_id)
        brain.parent = script(call("interrupt_agent", "i1", agent_id=child.id))
        await parent.run("stop it")
    assert tool_results(parent)[-1] == (
        f"agent {child.id} is not a continuable subagent (a one-shot run), so it cannot be "
        "interrupted; nothing was interrupted"
    )


async def test_interrupt_agent_refuses_a_session_it_is_not_above(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)
    brain = Brain(script(), last)
    stranger = await compose_agent(runtime, store, model=brain.model)
    async with stranger:
        await stranger.run("hello")
    brain.parent = script(call("interrupt_agent", agent_id=stranger.session_id))
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
    (result,) = tool_results(parent)
    assert result.startswith(f'error: agent "{parent.session_id}" is not an ancestor of')
    assert result.endswith("[UNAUTHORIZED]")


async def test_list_agents_lists_children_and_descendants(build_runtime, store):
    runtime = build_runtime(CONTINUABLE)

    def child(request):
        if last(request) == "child task":
            return call("subagent", "g1", description="deeper", prompt="grandchild task")
        return "done"

    brain = Brain(
        script(
            call("subagent", description="a task", prompt="child task"),
            "started",
            call("list_agents", "l1"),
            "listed",
            call("list_agents", "l2", scope="descendants"),
        ),
        child,
    )
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
        child_id = started_id(parent)
        await quiet(runtime, parent)
        await parent.run("list them")
        await parent.run("list them all")
    (grandchild,) = await store.sessions(parent=child_id)
    results = tool_results(parent)
    assert f"{child_id} [ready] — a task" in results
    assert (
        f"{child_id} [ready] parent={parent.session_id} depth=1 — a task\n"
        f"{grandchild.id} [ready] parent={child_id} depth=2 — deeper"
    ) in results


def test_list_agents_pages_and_says_when_there_is_nothing():
    from tether.subagents import AgentEntry

    entries = [AgentEntry(f"ses_{n}", "ses_root", 1, f"task {n}", "ready") for n in range(5)]
    assert render_entries([], 0, 0, False) == "(no subagents)"
    assert render_entries(entries[:2], 5, 0, False).splitlines() == [
        "ses_0 [ready] — task 0",
        "ses_1 [ready] — task 1",
        "(showing 1-2 of 5; call list_agents with offset=2 for more)",
    ]
    assert render_entries(entries[4:], 5, 4, False).splitlines()[-1] == "(showing 5-5 of 5)"
    corrupt = AgentEntry("ses_x", "ses_root", 1, None, None, "corrupt")
    assert render_entries([corrupt], 1, 0, False) == "ses_x [diagnostic: corrupt]"


async def test_a_fork_childs_report_survives_its_call_time_tool_policy(build_runtime, store):
    runtime = build_runtime(
        CONTINUABLE + 'provider = "fork"\ntool_filter = { allow = ["subagent"] }\n'
    )

    def child(request):
        if last(request) == "child task":
            return call("report", "r1", output="from the fork")
        return "done"

    brain = Brain(script(call("subagent", description="a task", prompt="child task")), child)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
        await quiet(runtime, parent)
    child_id = started_id(parent)
    assert any(
        m.content == f"Background subagent {child_id} reported:\nfrom the fork"
        for m in parent.messages
    )


async def test_report_is_only_in_continuable_children_and_survives_their_tool_filter(
    build_runtime, store
):
    runtime = build_runtime(CONTINUABLE + 'tool_filter = { allow = ["subagent"] }\n')

    def child(request):
        if last(request) == "child task":
            return call("report", "r1", output="halfway there")
        return "done"

    brain = Brain(script(call("subagent", description="a task", prompt="child task")), child)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
        await quiet(runtime, parent)
    parent_tools = [t.name for t in brain.parent_requests[0].tools]
    child_tools = [t.name for t in brain.child_requests[0].tools]
    assert "report" not in parent_tools
    assert child_tools == ["subagent", "report"]
    child_id = started_id(parent)
    assert any(
        m.content == f"Background subagent {child_id} reported:\nhalfway there"
        for m in parent.messages
    )
    child_results = [
        s.event.content
        for s in await store.events(child_id)
        if s.event.type == "tool/result"  # type: ignore[union-attr]
    ]
    assert child_results[0].startswith("report accepted by the agent that started you as message")


async def test_control_tools_are_registered_once_however_many_instances_bind_providers(
    build_runtime, store
):
    runtime = build_runtime(
        CONTINUABLE
        + '[[plugin.subagent.tools]]\nprovider = "fork"\ntool_name = "fork"\n'
        + 'background = "continuable"\n'
    )
    brain = Brain(script(), last)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
    names = [t.name for t in brain.parent_requests[0].tools]
    assert names == [
        "subagent",
        "fork",
        "send_message",
        "interrupt_agent",
        "list_agents",
        *TASK_TOOLS,  # once too
    ]


async def test_one_shot_mode_offers_no_control_tools(build_runtime, store):
    runtime = build_runtime()
    brain = Brain(script(), last)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("go")
    # Its background calls are tasks: the task tools, but none of the control tools.
    assert [t.name for t in brain.parent_requests[0].tools] == ["subagent", *TASK_TOOLS]


def test_an_output_schema_in_continuable_background_mode_is_rejected_at_load(build_runtime):
    with pytest.raises(PluginError) as caught:
        build_runtime(CONTINUABLE + 'output_schema = { type = "object" }\n')
    assert "output_schema applies to one-shot runs" in str(caught.value)
