"""Continuable children: start, follow-ups, settlement, cold restore, interrupt, report.

Real SQLite stores, real spawn and fork providers, FunctionModel brains. A child's model can be
held in its turn with a :class:`Gate` to observe the running state.
"""

from __future__ import annotations

import anyio
import pytest

import tether_spawn
from tether.errors import CapabilityError, ErrorCode, SubagentError
from tether.models import ModelRequest, ModelResponse
from tether.runtime import compose_agent
from tether.store import (
    DescriptorEvent,
    InboxAccepted,
    MemoryStore,
    SQLiteStore,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.subagents import SubagentCapabilities, SubagentStartRequest
from tether.subagents.local import CONTINUABLE_DESCRIPTOR
from tether.subagents.notices import settlement_notice
from tether.testing.subagents import LimitedProvider

from .conftest import Brain, last, wait_for

pytestmark = pytest.mark.anyio


class Gate:
    """Holds a child's model call until opened (one use per ``open``)."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self._open = anyio.Event()

    def open(self) -> None:
        self._open.set()

    async def wait(self) -> None:
        self.entered.set()
        await self._open.wait()


@pytest.fixture
def runtime(build_runtime):
    return build_runtime('[plugin.subagent]\nbackground = "continuable"\n')


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


@pytest.fixture
def events(runtime):
    seen: list = []
    runtime.subagents.on_event(lambda e: seen.append(e) if e.kind in ("start", "end") else None)
    return seen


async def start(parent, prompt="child task", provider="spawn", **request):
    runtime = parent.runtime.subagents
    return await runtime.start_continuable(
        provider,
        SubagentStartRequest(
            prompt=prompt, parent=parent, label=request.pop("label", "a task"), **request
        ),
    )


async def user_texts(store, session_id):
    return [
        s.event.content for s in await store.events(session_id) if isinstance(s.event, UserMessage)
    ]


async def notices(agent):
    return [m.content for m in agent.messages if m.content.startswith("Background subagent")]


def parent_says(answer="ok"):
    return lambda request: answer


def echo(request: ModelRequest) -> str:
    return f"child answer to {last(request)}"


async def settled(runtime, child_id):
    await wait_for(lambda: runtime.subagents.continuation.state(child_id) is None)


# ------------------------------------------------------------------ start


async def test_returns_both_identities_at_inbox_acceptance_without_waiting_for_the_turn(
    runtime, store
):
    gate = Gate()

    async def child(request):
        await gate.wait()
        return "done"

    brain = Brain(parent_says(), child)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        started = await start(parent)
        accepted = [
            s.event
            for s in await store.events(started.child_id)
            if isinstance(s.event, InboxAccepted)
        ]
        assert [a.message_id for a in accepted] == [started.message_id]
        await gate.entered.wait()
        assert runtime.subagents.continuation.state(started.child_id) == "running"
        gate.open()
        await settled(runtime, started.child_id)


async def test_rejects_without_ids_when_the_provider_has_no_prepare_continuable(
    build_runtime, tmp_path
):
    provider = LimitedProvider(capabilities=SubagentCapabilities(depth_limit=True))
    runtime = build_runtime(extra_plugins={"limited": provider})
    sqlite = SQLiteStore(tmp_path / "s.db")
    parent = await compose_agent(runtime, sqlite, model=Brain(parent_says(), echo).model)
    async with parent:
        with pytest.raises(CapabilityError) as caught:
            await start(parent, provider="limited")
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert "does not support continuable children (no prepare_continuable capability)" in str(
        caught.value
    )
    assert await sqlite.sessions(parent=parent.session_id) == []
    await sqlite.aclose()


async def test_rejects_when_persistence_is_not_durable(runtime):
    parent = await compose_agent(runtime, MemoryStore(), model=Brain(parent_says(), echo).model)
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await start(parent)
    assert caught.value.code is ErrorCode.PERSISTENCE_UNAVAILABLE
    assert 'set store = "sqlite:PATH"' in str(caught.value)


async def test_rejects_a_continuable_child_that_would_exceed_the_depth_cap(runtime, store):
    parent = await compose_agent(runtime, store, model=Brain(parent_says(), echo).model)
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await start(parent, max_depth=0)
    assert caught.value.code is ErrorCode.SUBAGENT_DEPTH_EXCEEDED
    assert await store.sessions(parent=parent.session_id) == []


async def test_rolls_the_child_back_completely_when_the_signal_aborts_before_acceptance(
    runtime, store, events
):
    brain = Brain(parent_says(), echo)
    parent = await compose_agent(runtime, store, model=brain.model)
    request = SubagentStartRequest(prompt="task", parent=parent, label="a task")
    # Cancelled between publication (the start edge) and the first prompt's acceptance.
    runtime.subagents.on_event(lambda e: request.cancel.cancel("changed my mind"))
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await runtime.subagents.start_continuable("spawn", request)
    assert caught.value.code is ErrorCode.SUBAGENT_CANCELLED
    assert await store.sessions(parent=parent.session_id) == []
    assert brain.child_requests == []
    assert [e.kind for e in events] == ["start", "end"]  # paired even when rolled back
    assert await notices(parent) == []


@pytest.mark.parametrize("provider", ["spawn", "fork"])
async def test_appends_the_descriptor_after_any_fork_seed(runtime, store, provider):
    brain = Brain(parent_says("parent answer"), echo)
    parent = await compose_agent(runtime, store, model=brain.model)
    async with parent:
        await parent.run("first turn")
        started = await start(parent, provider=provider, persona="terse", label="review it")
        await settled(runtime, started.child_id)
    header = await store.header(started.child_id)
    own = [s.event for s in await store.events(started.child_id)][header.seed_length :]
    descriptors = [e for e in own if isinstance(e, DescriptorEvent)]
    assert [d.kind for d in descriptors] == ["delegation", CONTINUABLE_DESCRIPTOR, "workspace"]
    data = descriptors[1].data
    assert data["mode"] == "continuable"
    assert data["provider"] == provider
    assert data["label"] == "review it"
    assert data["persona"] == "terse"
    assert (header.seed_length > 0) == (provider == "fork")


# ------------------------------------------------------------------ follow-ups


async def test_enqueues_in_the_same_activation_while_it_is_running_preserving_one_inbox_fifo(
    runtime, store
):
    gate = Gate()

    async def child(request):
        if last(request) == "child task":
            await gate.wait()
        return f"answer to {last(request)}"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
        agent = manager.live(started.child_id)
        await manager.followup(parent, started.child_id, "first follow-up")
        await manager.followup(parent, started.child_id, "second follow-up")
        assert manager.live(started.child_id) is agent
        gate.open()
        await settled(runtime, started.child_id)
    texts = await user_texts(store, started.child_id)
    assert texts[-3:] == ["child task", "first follow-up", "second follow-up"]


async def test_a_steered_follow_up_reaches_the_running_turn_at_its_next_step(runtime, store):
    gate = Gate()
    seen: list[list[str]] = []

    async def child_with_a_step(request):
        seen.append([m.content for m in request.messages if m.role == "user"])
        if len(seen) == 1:
            await gate.wait()
            return ModelResponse(tool_calls=(tool_call("list_agents"),), finish_reason="tool_calls")
        return "done"

    parent = await compose_agent(
        runtime, store, model=Brain(parent_says(), child_with_a_step).model
    )
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
        await manager.followup(parent, started.child_id, "look here too", steer=True)
        gate.open()
        await settled(runtime, started.child_id)
    assert "look here too" in seen[1]  # the second step of the same turn
    turns = [
        s.event for s in await store.events(started.child_id) if isinstance(s.event, TurnStarted)
    ]
    assert len(turns) == 1


async def test_cold_restores_a_settled_child_into_a_new_activation(runtime, store, events):
    parent = await compose_agent(runtime, store, model=Brain(parent_says(), echo).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
        await manager.followup(parent, started.child_id, "more")
        await settled(runtime, started.child_id)
        await runtime.settle(parent)  # and the parent took its notice (a turn of its own)
    log = [s.event for s in await store.events(started.child_id)]
    assert (
        sum(isinstance(e, DescriptorEvent) and e.kind == CONTINUABLE_DESCRIPTOR for e in log) == 1
    )
    assert await user_texts(store, started.child_id) == ["child task", "more"]
    starts = [e.run_id for e in events if e.kind == "start"]
    ends = [e.run_id for e in events if e.kind == "end"]
    assert len(starts) == 2
    assert starts == ends
    assert starts[0] != starts[1]
    assert await notices(parent) == [
        settlement_notice(started.child_id, "completed", "child answer to child task"),
        settlement_notice(started.child_id, "completed", "child answer to more"),
    ]


async def test_cold_restores_after_the_initial_provider_unregisters(runtime, store, events):
    parent = await compose_agent(runtime, store, model=Brain(parent_says(), echo).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
        assert runtime.subagents.remove_provider("spawn")
        await manager.followup(parent, started.child_id, "still there?")
        await settled(runtime, started.child_id)
        runtime.subagents.register_provider(tether_spawn.SpawnProvider())
    assert (await user_texts(store, started.child_id))[-1] == "still there?"
    assert [e.provider for e in events] == ["spawn"] * 4  # the name recorded at creation


async def test_wakes_a_waiting_activation_instead_of_cold_restoring_it(runtime, store, events):
    gate = Gate()
    grandchild_id: list[str] = []

    async def child(request):
        text = last(request)
        if text == "grandchild task":
            await gate.wait()
            return "grandchild done"
        if text == "child task":
            me = runtime.live_agents[request_session(request)]
            started = await start(me, prompt="grandchild task", label="deeper")
            grandchild_id.append(started.child_id)
            return "started a grandchild"
        return f"child answer to {text}"

    def request_session(request):
        return next(
            session
            for session, agent in runtime.live_agents.items()
            if agent.messages and agent.messages[-1].content == request.messages[-1].content
        )

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await wait_for(lambda: bool(grandchild_id) and manager.state(started.child_id) == "waiting")
        agent = manager.live(started.child_id)
        await manager.followup(parent, started.child_id, "while waiting")
        assert manager.live(started.child_id) is agent
        await wait_for(lambda: manager.state(started.child_id) == "waiting")
        gate.open()
        await settled(runtime, started.child_id)
    child_starts = [e for e in events if e.kind == "start" and e.child_id == started.child_id]
    assert len(child_starts) == 1


async def test_rejects_a_parent_that_is_not_the_durable_direct_parent(runtime, store):
    brain = Brain(parent_says(), echo)
    parent = await compose_agent(runtime, store, model=brain.model)
    other = await compose_agent(runtime, store, model=brain.model)
    manager = runtime.subagents.continuation
    async with parent, other:
        started = await start(parent)
        with pytest.raises(SubagentError) as caught:
            await manager.followup(other, started.child_id, "mine now")
        await settled(runtime, started.child_id)
    assert caught.value.code is ErrorCode.UNAUTHORIZED
    assert "belongs to another parent session" in str(caught.value)
    assert "mine now" not in await user_texts(store, started.child_id)


async def test_rejects_an_agent_object_that_is_not_the_live_one(runtime, store):
    brain = Brain(parent_says(), echo)
    parent = await compose_agent(runtime, store, model=brain.model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
    with pytest.raises(SubagentError) as caught:
        await manager.followup(parent, started.child_id, "after closing")
    assert caught.value.code is ErrorCode.UNAUTHORIZED
    assert "exact live agent" in str(caught.value)


async def test_reports_an_unresumable_child_whose_log_has_no_descriptor(runtime, store):
    brain = Brain(parent_says(), echo)
    parent = await compose_agent(runtime, store, model=brain.model)
    manager = runtime.subagents.continuation
    async with parent:
        run = await runtime.subagents.start(
            "spawn", SubagentStartRequest(prompt="one-shot", parent=parent)
        )
        await run.result()
        await run.dispose()
        with pytest.raises(SubagentError) as caught:
            await manager.followup(parent, run.id, "again")
    assert caught.value.code is ErrorCode.NOT_RESUMABLE
    assert "do not retry send_message with this id" in str(caught.value)


async def test_reports_an_unknown_child_id_as_unavailable(runtime, store):
    parent = await compose_agent(runtime, store, model=Brain(parent_says(), echo).model)
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await runtime.subagents.continuation.followup(parent, "ses_nope", "hello?")
    assert caught.value.code is ErrorCode.SUBAGENT_UNAVAILABLE


# ------------------------------------------------------------------ settlement


async def test_tells_the_parent_what_the_child_finished_with(runtime, store):
    parent = await compose_agent(
        runtime, store, model=Brain(parent_says(), lambda r: "the answer").model
    )
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
        await parent.when_idle()
    assert await notices(parent) == [
        f"Background subagent {started.child_id} finished and will do no further work unless "
        "you send it more.\nIts closing message:\nthe answer"
    ]


async def test_tells_the_parent_a_child_ran_out_of_room(runtime, store):
    def child(request):
        return ModelResponse(text="half an ans", finish_reason="length")

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
        await parent.when_idle()
    assert await notices(parent) == [
        f"Background subagent {started.child_id} ran out of room before it finished.\n"
        "Its closing message:\nhalf an ans"
    ]


async def test_gives_an_idle_parent_one_ordinary_turn_on_the_notice(runtime, store):
    parent = await compose_agent(runtime, store, model=Brain(parent_says("noted"), echo).model)
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
        await wait_for(lambda: parent.turns == 1)
        await parent.when_idle()
    assert parent.messages[-2].content.startswith(f"Background subagent {started.child_id}")
    assert parent.messages[-1].content == "noted"


async def test_batches_simultaneous_notices_into_one_step_of_a_busy_parent(runtime, store):
    gate = Gate()
    parent_requests: list[ModelRequest] = []

    async def parent_model(request):
        parent_requests.append(request)
        if len(parent_requests) == 1:
            await gate.wait()
            return ModelResponse(tool_calls=(tool_call("list_agents"),), finish_reason="tool_calls")
        return "saw them"

    child_gate = Gate()

    async def child(request):
        await child_gate.wait()
        return f"done with {last(request)}"

    parent = await compose_agent(runtime, store, model=Brain(parent_model, child).model)
    async with parent:
        first = await start(parent, prompt="one")
        second = await start(parent, prompt="two")
        await parent.followup("busy now")
        await gate.entered.wait()
        child_gate.open()
        await settled(runtime, first.child_id)
        await settled(runtime, second.child_id)
        gate.open()
        await parent.when_idle()
    step_two = [m.content for m in parent_requests[1].messages if m.role == "user"]
    assert sum(text.startswith("Background subagent") for text in step_two) == 2
    assert parent.turns == 1  # no new turn: both notices joined the running one


def tool_call(name: str):
    from tether.models import ToolCall

    return ToolCall(id=f"c-{name}", name=name, arguments={})


async def test_does_not_wake_a_parent_whose_own_teardown_already_began(runtime, store):
    gate = Gate()

    async def child(request):
        await gate.wait()
        return "never"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
    # The child was torn down with its parent; the notice was injected, no turn was started.
    assert parent.turns == 0
    log = [s.event for s in await store.events(parent.session_id)]
    injected = [e for e in log if isinstance(e, UserMessage) and e.source.kind == "notice"]
    assert [e.content for e in injected] == [
        f"Background subagent {started.child_id} was stopped before it finished.\n"
        "It left no closing message."
    ]
    child_log = [s.event for s in await store.events(started.child_id)]
    assert [e.stop_reason for e in child_log if isinstance(e, TurnEnded)] == ["aborted"]


async def test_teardown_of_a_root_drains_its_whole_forest_child_first(runtime, store, events):
    gate = Gate()

    async def child(request):
        text = last(request)
        if text == "grandchild task":
            await gate.wait()
            return "never"
        me = next(a for a in runtime.live_agents.values() if a is not parent and a.turns)
        await start(me, prompt="grandchild task", label="deeper")
        return "started a grandchild"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
        await wait_for(lambda: runtime.subagents.continuation.state(started.child_id) == "waiting")
    ends = [e.child_id for e in events if e.kind == "end"]
    assert len(ends) == 2
    assert ends[-1] == started.child_id  # the grandchild ended first
    assert runtime.live_agents == {}


# ------------------------------------------------------------------ interrupt


async def test_interrupt_aborts_the_turn_parks_follow_ups_and_resumes_them_on_a_waking_send(
    runtime, store
):
    gate = Gate()

    async def child(request):
        if last(request) == "child task":
            await gate.wait()
        return f"answer to {last(request)}"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
        await manager.followup(parent, started.child_id, "queued")
        assert await manager.interrupt(started.child_id, by=parent) == "interrupted"
        await manager.live(started.child_id).when_idle()
        assert manager.state(started.child_id) == "running"  # the parked message keeps it
        assert "queued" not in await user_texts(store, started.child_id)
        await manager.followup(parent, started.child_id, "wake up")
        await settled(runtime, started.child_id)
    assert await user_texts(store, started.child_id) == ["child task", "queued", "wake up"]
    ends = [
        s.event.stop_reason
        for s in await store.events(started.child_id)
        if isinstance(s.event, TurnEnded)
    ]
    assert ends == ["aborted", "completed", "completed"]


async def test_interrupt_rejects_self_unrelated_callers_and_unknown_ids(runtime, store):
    gate = Gate()

    async def child(request):
        await gate.wait()
        return "done"

    brain = Brain(parent_says(), child)
    parent = await compose_agent(runtime, store, model=brain.model)
    stranger = await compose_agent(runtime, store, model=brain.model)
    manager = runtime.subagents.continuation
    async with parent, stranger:
        started = await start(parent)
        await gate.entered.wait()
        child_agent = manager.live(started.child_id)
        with pytest.raises(SubagentError) as caught:
            await manager.interrupt(started.child_id, by=stranger)
        assert caught.value.code is ErrorCode.UNAUTHORIZED
        with pytest.raises(SubagentError) as caught:
            await manager.interrupt(started.child_id, by=child_agent)
        assert caught.value.code is ErrorCode.UNAUTHORIZED
        assert manager.state(started.child_id) == "running"
        with pytest.raises(SubagentError) as caught:
            await manager.interrupt("ses_absent", by=parent)
        assert caught.value.code is ErrorCode.SUBAGENT_UNAVAILABLE
        assert manager.state(started.child_id) == "running"
        assert await manager.interrupt(started.child_id, human_root=parent.session_id) == (
            "interrupted"
        )
        await settled(runtime, started.child_id)


# ------------------------------------------------------------------ report


async def test_report_reaches_the_direct_parent_quietly_or_at_its_next_step(runtime, store):
    reports: list[str] = []

    async def child(request):
        me = next(a for a in runtime.live_agents.values() if a is not parent)
        reports.append(await runtime.subagents.continuation.report(me, "halfway there"))
        reports.append(
            await runtime.subagents.continuation.report(me, "look now", delivery="wakeup")
        )
        return "done"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    async with parent:
        started = await start(parent)
        await settled(runtime, started.child_id)
        await parent.when_idle()
    texts = [m.content for m in parent.messages if m.role == "user"]
    assert f"Background subagent {started.child_id} reported:\nhalfway there" in texts
    assert f"Background subagent {started.child_id} reported:\nlook now" in texts
    assert len(reports) == 2


async def test_report_is_refused_from_an_agent_that_is_not_a_live_continuable_child(runtime, store):
    parent = await compose_agent(runtime, store, model=Brain(parent_says(), echo).model)
    manager = runtime.subagents.continuation
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await manager.report(parent, "I am nobody's child")
    assert caught.value.code is ErrorCode.UNAUTHORIZED


async def test_report_is_refused_while_the_activation_closes(runtime, store):
    gate = Gate()

    async def child(request):
        await gate.wait()
        return "done"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
        activation = manager._activations.get(started.child_id)  # pyright: ignore[reportPrivateUsage]  (white-box)
        assert activation is not None
        activation.closing = True  # the admission cutoff
        with pytest.raises(SubagentError) as caught:
            await manager.report(activation.agent, "too late")
        activation.closing = False
        gate.open()
        await settled(runtime, started.child_id)
    assert caught.value.code is ErrorCode.ACTIVATION_CLOSING


async def test_report_needs_a_live_direct_parent(runtime, store):
    """A child restored by its root's owner reports, but its direct parent is not open."""
    reports: list[Exception] = []

    async def child(request):
        text = last(request)
        if text == "grandchild task":
            return "grandchild done"
        if text == "child task":
            me = next(a for a in runtime.live_agents.values() if a is not root and a.turns)
            await start(me, prompt="grandchild task", label="deeper")
            return "started"
        if text == "from the human":
            me = next(a for a in runtime.live_agents.values() if a is not root)
            try:
                await runtime.subagents.continuation.report(me, "hello?")
            except SubagentError as exc:
                reports.append(exc)
            return "ok"
        return "fine"

    root = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with root:
        started = await start(root)
        await settled(runtime, started.child_id)
    (grandchild,) = await store.sessions(parent=started.child_id)
    host = await compose_agent(runtime, store, session_id=root.session_id, model=root.model)
    async with host:
        root = host
        await manager.send_as_owner(host, grandchild.id, "from the human")
        await manager.wait_settled(grandchild.id)
    assert [e.code for e in reports] == [ErrorCode.PARENT_UNAVAILABLE]  # type: ignore[attr-defined]


# ------------------------------------------------------------------ listing


async def test_lists_continuable_children_with_status_and_pages(runtime, store):
    gate = Gate()

    async def child(request):
        if last(request) == "hold":
            await gate.wait()
        return "done"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with parent:
        held = await start(parent, prompt="hold", label="held one")
        quick = [await start(parent, prompt=f"quick {n}", label=f"quick {n}") for n in range(3)]
        for started in quick:
            await settled(runtime, started.child_id)
        run = await runtime.subagents.start(
            "spawn", SubagentStartRequest(prompt="x", parent=parent)
        )
        await run.result()
        await run.dispose()
        everything, total = await manager.list(parent)
        page, _ = await manager.list(parent, offset=1, limit=2)
        gate.open()
        await settled(runtime, held.child_id)
    assert total == 4  # the one-shot child is not listed
    statuses = {e.id: e.status for e in everything}
    assert statuses[held.child_id] == "running"
    assert {statuses[s.child_id] for s in quick} == {"ready"}
    assert [e.id for e in page] == [e.id for e in everything[1:3]]


async def test_walks_a_deep_ordinary_chain_without_the_call_stack_and_finds_what_is_below(
    runtime, store
):
    import sys

    from tether.store import SessionHeader

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), echo).model)
    depth = sys.getrecursionlimit() + 100
    above = parent.session_id
    for n in range(depth):
        header = SessionHeader(id=f"ses_chain{n}", created_at=float(n), parent_session=above)
        await store.create(header)
        above = header.id
    bottom = SessionHeader(
        id="ses_bottom", created_at=1e9, parent_session=above, origin="subagent", label="deep"
    )
    await store.create(bottom)
    descriptor = DescriptorEvent(
        kind=CONTINUABLE_DESCRIPTOR, data={"mode": "continuable", "provider": "spawn"}
    )
    await store.append(bottom.id, [descriptor])
    async with parent:
        entries, total = await runtime.subagents.continuation.list(parent, scope="descendants")
    assert total == 1
    assert (entries[0].id, entries[0].status, entries[0].label) == ("ses_bottom", "ready", "deep")


async def test_drops_the_notice_without_disturbing_anything_when_the_parent_is_gone(runtime, store):
    async def child(request):
        text = last(request)
        if text == "child task":
            me = next(a for a in runtime.live_agents.values() if a is not root and a.turns)
            await start(me, prompt="grandchild task", label="deeper")
            return "started"
        return f"answer to {text}"

    root = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with root:
        started = await start(root)
        await manager.wait_quiet(root)
    (grandchild,) = await store.sessions(parent=started.child_id)
    before = len(await store.events(started.child_id))
    host = await compose_agent(runtime, store, session_id=root.session_id, model=root.model)
    async with host:
        root = host
        await manager.send_as_owner(host, grandchild.id, "more")  # notify: its parent is gone
        await manager.wait_settled(grandchild.id)
    assert len(await store.events(started.child_id)) == before  # nothing reached the child
    assert (await user_texts(store, grandchild.id))[-1] == "more"


async def test_a_settled_child_is_reused_unless_its_log_grew_elsewhere(runtime, store):
    gate = Gate()

    async def child(request):
        if last(request) == "child task":
            await gate.wait()
        return f"answer to {last(request)}"

    parent = await compose_agent(runtime, store, model=Brain(parent_says(), child).model)
    manager = runtime.subagents.continuation
    async with parent:
        started = await start(parent)
        await gate.entered.wait()
        first = manager.live(started.child_id)
        gate.open()
        await manager.wait_quiet(parent)
        await manager.followup(parent, started.child_id, "again")
        assert manager.live(started.child_id) is first  # no re-read of its log
        await manager.wait_quiet(parent)
        await store.append(started.child_id, [DescriptorEvent(kind="elsewhere")])
        await manager.followup(parent, started.child_id, "and again")
        assert manager.live(started.child_id) is not first  # restored from the log
        await manager.wait_quiet(parent)
    assert await user_texts(store, started.child_id) == ["child task", "again", "and again"]
