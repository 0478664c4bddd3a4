"""Depth and lineage: a durable, monotone count of delegations between a session and its root."""

from __future__ import annotations

import pytest

from tether.agents import new_header
from tether.errors import ErrorCode, StoreError, SubagentError
from tether.models import FunctionModel
from tether.runtime import compose_agent
from tether.store import MemoryStore, SQLiteStore
from tether.subagents import (
    DEFAULT_MAX_DEPTH,
    SubagentEvent,
    SubagentRuntime,
    SubagentStartRequest,
    child_depth,
)
from tether_fork import ForkProvider
from tether_spawn import SpawnProvider
from tether_subagent_tools import Settings

from .conftest import Brain, delegating_parent, echo_child, tool_results

pytestmark = pytest.mark.anyio


async def agent_at_depth(kernel, depth, store=None):
    store = store or MemoryStore()
    header = await store.create(new_header(agent="main", delegation_depth=depth))
    return await compose_agent(kernel, store, model=FunctionModel(echo_child), session_id=header.id)


@pytest.mark.parametrize("value", [True, False, -1, 1.0, "2"])
async def test_a_max_depth_must_be_a_non_negative_int_and_not_a_bool(kernel, value):
    agent = await agent_at_depth(kernel, 0)
    with pytest.raises(SubagentError) as caught:
        child_depth(agent, value)
    assert caught.value.code == ErrorCode.SUBAGENT_INVALID
    assert f"max_depth must be a non-negative integer, not {value!r}" in str(caught.value)


async def test_a_child_is_one_deeper_than_its_parent(kernel):
    agent = await agent_at_depth(kernel, 2)
    assert child_depth(agent) == 3
    assert child_depth(agent, None) == 3
    assert child_depth(agent, 3) == 3
    with pytest.raises(SubagentError) as caught:
        child_depth(agent, 2)
    assert caught.value.code == ErrorCode.SUBAGENT_DEPTH_EXCEEDED
    assert "subagent depth 3 exceeds max_depth 2" in str(caught.value)


async def test_max_depth_zero_forbids_delegation(kernel):
    root = await agent_at_depth(kernel, 0)
    with pytest.raises(SubagentError) as caught:
        child_depth(root, 0)
    assert caught.value.code == ErrorCode.SUBAGENT_DEPTH_EXCEEDED
    assert "max_depth = 0 forbids delegation" in str(caught.value)


def test_the_delegation_tool_defaults_max_depth_to_three():
    assert DEFAULT_MAX_DEPTH == 3
    assert Settings().max_depth == 3


async def test_the_tool_stays_visible_at_the_cap_and_its_call_fails(kernel):
    brain = Brain(delegating_parent(), echo_child)
    store = MemoryStore()
    header = await store.create(new_header(agent="main", delegation_depth=3))
    parent = await compose_agent(kernel, store, model=brain.model, session_id=header.id)
    async with parent:
        assert await parent.run("go") == "completed"
    assert "subagent" in [t.name for t in brain.parent_requests[0].tools]
    (result,) = tool_results(parent)
    assert result.startswith("error: subagent depth 4 exceeds max_depth 3")
    assert brain.child_requests == []


@pytest.mark.parametrize("provider", [SpawnProvider(), ForkProvider()], ids=["spawn", "fork"])
async def test_the_child_header_records_its_lineage(kernel, provider):
    parent = await agent_at_depth(kernel, 1)
    runtime = SubagentRuntime()
    runtime.register_provider(provider)
    async with parent:
        await parent.run("first turn")
        run = await runtime.start(
            provider.name, SubagentStartRequest(prompt="x", parent=parent, label="lbl")
        )
        await run.result()
        await run.dispose()
    header = await parent.store.header(run.id)
    assert header.parent_session == parent.session_id
    assert header.origin == "subagent"
    assert header.delegation_depth == 2
    assert header.label == "lbl"
    assert header.agent == parent.name
    parent_events = await parent.store.events(parent.session_id)
    copied = [s for s in parent_events if s.event.type != "inbox/accepted"]
    assert header.seed_length == (len(copied) if provider.inherits_parent_context else 0)


async def test_depth_is_never_lowered_on_restart(kernel, tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    agent = await agent_at_depth(kernel, 2, store)
    with pytest.raises(StoreError) as caught:
        await store.raise_depth(agent.session_id, 1)
    assert caught.value.code == ErrorCode.DEPTH_LOWERED
    await store.aclose()
    reopened = SQLiteStore(tmp_path / "s.db")
    restarted = await compose_agent(
        kernel, reopened, model=FunctionModel(echo_child), session_id=agent.session_id
    )
    assert restarted.header.delegation_depth == 2
    assert child_depth(restarted) == 3
    await reopened.aclose()


async def test_the_start_event_reports_the_depth_the_child_header_records(kernel):
    parent = await agent_at_depth(kernel, 1)
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    events: list[SubagentEvent] = []
    runtime.on_event(events.append)
    async with parent:
        run = await runtime.start("spawn", SubagentStartRequest(prompt="x", parent=parent))
        await run.result()
        await run.dispose()
    header = await parent.store.header(run.id)
    assert [(e.kind, e.depth) for e in events] == [("start", 2), ("end", 2)]
    assert header.delegation_depth == 2
