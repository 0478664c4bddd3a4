"""Tree budgets in one process: a root, three children and a grandchild (:mod:`.tree`) stopped
by each kind of limit exactly where it passes, the notices before the wall, what a refused
child start tells its parent, and budgets narrowed down the tree."""

from __future__ import annotations

import time

import pytest

from tether.budgets import BUDGET_EXCEEDED_DESCRIPTOR, BUDGET_WARNING_DESCRIPTOR, Budget
from tether.errors import BudgetError, ErrorCode
from tether.models import FunctionModel
from tether.runtime import Runtime
from tether.store import ContextMessage, DescriptorEvent, MemoryStore, SessionStore, ToolResult
from tether.testing import scaled

from .tree import Tree, tree_kernel

pytestmark = pytest.mark.anyio


async def run_tree(tmp_path, budget: Budget | None, *, tree: Tree | None = None, **profile):
    tree = tree or Tree()
    store = MemoryStore()
    kernel = tree_kernel(tmp_path, **profile)
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(model=tree.model, budget=budget)
        async with runtime.hold(agent) as held:
            await held.run(["go"])
        sessions = [agent.header, *await runtime.subagents.list_descendants(agent.session_id)]
    return agent, tree, store, sessions


async def events_of(store: SessionStore, sessions) -> dict[str, list]:
    return {h.id: [s.event for s in await store.events(h.id)] for h in sessions}


def descriptors(logs: dict[str, list], kind: str) -> list[DescriptorEvent]:
    return [
        e for log in logs.values() for e in log if isinstance(e, DescriptorEvent) and e.kind == kind
    ]


def spent(logs: dict[str, list], field: str) -> int:
    from tether.store import AssistantMessage

    total = 0
    for log in logs.values():
        for event in log:
            if isinstance(event, AssistantMessage):
                total += (
                    event.usage.output_tokens if field == "output" else event.usage.input_tokens
                )
    return total


def requests(logs: dict[str, list]) -> int:
    from tether.store import AssistantMessage

    return sum(isinstance(e, AssistantMessage) for log in logs.values() for e in log)


async def test_no_budget_spends_freely_and_writes_no_record(tmp_path):
    agent, tree, store, sessions = await run_tree(tmp_path, None)
    assert agent.loop.last_stop_reason == "completed"
    assert len(tree.asked) == 10
    assert len(sessions) == 5
    logs = await events_of(store, sessions)
    assert not descriptors(logs, "budget")


@pytest.mark.parametrize("limit", [1, 4, 6, 9])
async def test_requests_stop_at_the_limit(tmp_path, limit):
    agent, tree, store, sessions = await run_tree(tmp_path, Budget(requests=limit))
    logs = await events_of(store, sessions)
    assert len(tree.asked) == limit == requests(logs)
    assert agent.loop.last_stop_reason == "error"
    assert "[BUDGET_EXCEEDED]" in (agent.loop.last_error or "")
    assert "requests" in (agent.loop.last_error or "")
    for record in descriptors(logs, BUDGET_EXCEEDED_DESCRIPTOR):
        assert record.data["limit"] == "requests"
        assert record.data["used"] == limit
        assert record.data["allowed"] == limit


@pytest.mark.parametrize("limit", [15, 60, 110])
async def test_output_tokens_stop_exactly_at_the_limit(tmp_path, limit):
    agent, _tree, store, sessions = await run_tree(tmp_path, Budget(output_tokens=limit))
    logs = await events_of(store, sessions)
    # Each request may answer at most what is left: the tree ends with the limit spent.
    assert spent(logs, "output") == limit
    refused = descriptors(logs, BUDGET_EXCEEDED_DESCRIPTOR)
    assert refused
    assert all(r.data["limit"] == "output_tokens" for r in refused)
    assert all(r.data["used"] == limit for r in refused)
    assert agent.loop.last_stop_reason == "error"


@pytest.mark.parametrize("limit", [900, 2000, 5000])
async def test_input_tokens_stop_before_the_request_that_would_pass(tmp_path, limit):
    _agent, _tree, store, sessions = await run_tree(tmp_path, Budget(input_tokens=limit))
    logs = await events_of(store, sessions)
    used = spent(logs, "input")
    assert used <= limit
    refused = descriptors(logs, BUDGET_EXCEEDED_DESCRIPTOR)
    assert refused
    for record in refused:
        assert record.data["limit"] == "input_tokens"
        assert record.data["used"] <= limit < record.data["used"] + record.data["need"]
    assert max(r.data["used"] for r in refused) == used


@pytest.mark.parametrize("limit", [0.002, 0.004, 0.006])
async def test_cost_stops_before_the_request_that_could_pass(tmp_path, limit):
    # $1 per million in, $10 per million out (the tree profile's price).
    agent, _tree, store, sessions = await run_tree(tmp_path, Budget(cost=limit))
    logs = await events_of(store, sessions)
    cost = (spent(logs, "input") * 1.0 + spent(logs, "output") * 10.0) / 1_000_000
    assert cost <= limit + 1e-12
    refused = descriptors(logs, BUDGET_EXCEEDED_DESCRIPTOR)
    assert refused
    assert all(r.data["limit"] == "cost" for r in refused)
    for record in refused:
        assert record.data["used"] + record.data["need"] > limit
    assert agent.loop.last_stop_reason == "error"


async def test_wall_time_cuts_the_request_at_the_deadline(tmp_path):
    tree = Tree(delay=scaled(0.3))
    limit = scaled(1.0)
    started = time.monotonic()
    agent, tree, store, sessions = await run_tree(tmp_path, Budget(wall_seconds=limit), tree=tree)
    elapsed = time.monotonic() - started
    assert limit <= elapsed < limit + scaled(2.0)
    assert agent.loop.last_stop_reason == "error"
    assert "wall time ran out" in (agent.loop.last_error or "")
    logs = await events_of(store, sessions)
    assert {r.data["limit"] for r in descriptors(logs, BUDGET_EXCEEDED_DESCRIPTOR)} == {
        "wall_seconds"
    }


def child_refusals(logs: dict[str, list]) -> list[str]:
    return [
        e.content
        for log in logs.values()
        for e in log
        if isinstance(e, ToolResult) and "[BUDGET_EXCEEDED]" in e.content
    ]


async def test_children_in_all_stop_at_the_limit(tmp_path):
    agent, _tree, store, sessions = await run_tree(tmp_path, Budget(children=2))
    assert len(sessions) == 3  # the root and two children: the third and the grandchild refused
    logs = await events_of(store, sessions)
    refusals = child_refusals(logs)
    assert len(refusals) == 2
    assert all("children: 2 of 2 used" in text for text in refusals)
    assert agent.loop.last_stop_reason == "completed"  # the parent read it and answered


async def test_live_children_stop_at_the_limit(tmp_path):
    _agent, _tree, store, sessions = await run_tree(tmp_path, Budget(live_children=2))
    logs = await events_of(store, sessions)
    refusals = child_refusals(logs)
    # Three children start at once: the third is refused, and so is the grandchild (its
    # parent and a sibling still work).
    assert len(sessions) == 3
    assert len(refusals) == 2
    assert all("children are working already" in text for text in refusals)


async def test_a_notice_before_the_wall_once_per_limit(tmp_path):
    # The root's first request (always the first: its children start after it) passes the
    # share, so the notice is the root's, which asks again once its children answered.
    _agent, tree, store, sessions = await run_tree(tmp_path, Budget(requests=10, warn_at=0.1))
    logs = await events_of(store, sessions)
    warnings = descriptors(logs, BUDGET_WARNING_DESCRIPTOR)
    assert len(warnings) == 1
    assert warnings[0].data["limit"] == "requests"
    notices = [
        e
        for log in logs.values()
        for e in log
        if isinstance(e, ContextMessage) and e.origin == "budget"
    ]
    assert len(notices) == 1
    assert "10% of the requests limit" in notices[0].content
    # The model read it in its next request.
    assert any(
        any(m.content == notices[0].content for m in request.messages)
        for request in tree.model.requests
    )


async def test_the_profile_sets_the_root_budget(tmp_path):
    _agent, tree, store, sessions = await run_tree(
        tmp_path, None, tether_budget="requests = 5", agent_budget="requests = 3"
    )
    assert len(tree.asked) == 3  # the agent's, within the profile's
    logs = await events_of(store, sessions)
    (record,) = descriptors(logs, "budget")
    assert record.data["limits"]["requests"] == 3


async def test_a_cost_budget_on_a_model_without_a_price_fails_at_entry(tmp_path):
    kernel = tree_kernel(tmp_path)
    async with Runtime.open(kernel, MemoryStore()) as runtime:
        model = FunctionModel(lambda r: "hi", name="x:unpriced")
        agent = await runtime.compose(model=model, budget=Budget(cost=1.0))
        with pytest.raises(BudgetError) as caught:
            async with runtime.hold(agent):
                pass
    assert caught.value.code == ErrorCode.BUDGET_INVALID
    assert '[prices."x:unpriced"]' in str(caught.value)


async def test_a_delegation_gets_at_most_what_is_left(tmp_path):
    from tether.contracts import SubagentStartRequest

    kernel = tree_kernel(tmp_path)
    tree = Tree()
    store = MemoryStore()
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(
            model=tree.model, budget=Budget(requests=6, output_tokens=100)
        )
        async with runtime.hold(agent):
            request = SubagentStartRequest(
                prompt="c2", parent=agent, label="c2", budget=Budget(requests=50, output_tokens=5)
            )
            run = await runtime.subagents.start("spawn", request)
            result = await run.result()
        (child,) = await store.sessions(parent=agent.session_id)
        logs = await events_of(store, [child])
    (record,) = descriptors(logs, "budget")
    # Asked for 50 requests and 5 output tokens: gets the 6 requests left, its own 5 tokens.
    assert record.data["limits"]["requests"] == 6
    assert record.data["limits"]["output_tokens"] == 5
    assert result.stop_reason == "error"
    assert "[BUDGET_EXCEEDED]" in (result.diagnostic or "")
    assert spent(logs, "output") == 5


async def test_a_declared_subagent_sets_its_own_budget_within_what_is_left(tmp_path):
    from tether.contracts import SubagentStartRequest

    (tmp_path / "extra.toml").write_text(
        '[agent.helper]\ndescription = "Helps."\nmodel = "scripted:tree.toml"\n'
        "budget = { requests = 50, output = 7 }\n",
        encoding="utf-8",
    )
    kernel = tree_kernel(tmp_path, agent_budget='subagents = ["helper"]\nbudget = { requests = 4 }')
    tree = Tree()
    store = MemoryStore()
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(model=tree.model)
        async with runtime.hold(agent):
            request = SubagentStartRequest(prompt="c2", parent=agent, label="c2", agent="helper")
            run = await runtime.subagents.start("spawn", request)
            await run.result()
        (child,) = await store.sessions(parent=agent.session_id)
        logs = await events_of(store, [child])
    (record,) = descriptors(logs, "budget")
    # Its own 50 requests, within the root's 4; its own 7 output tokens (the root sets none).
    assert record.data["limits"]["requests"] == 4
    assert record.data["limits"]["output_tokens"] == 7
    assert child.agent == "helper"


async def test_an_unreadable_budget_record_is_named_and_a_new_budget_replaces_it(tmp_path):
    from tether.store import SQLiteStore

    kernel = tree_kernel(tmp_path)
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        async with Runtime.open(kernel, store) as runtime:
            agent = await runtime.compose(model=Tree().model)
            session = agent.session_id
            bad = DescriptorEvent(kind="budget", data={"limits": {"bogus": 1}, "started": 1.0})
            await store.append(session, [bad])
            await store.release(session)
            again = await runtime.compose(session_id=session, model=Tree().model)
            with pytest.raises(BudgetError) as caught:
                async with runtime.hold(again):
                    pass
            assert caught.value.code == ErrorCode.BUDGET_INVALID
            assert session in str(caught.value)
            assert "--budget" in (caught.value.remedy or "")
            # Nothing was lost, and a budget given now replaces the unreadable one.
            fixed = await runtime.compose(
                session_id=session, model=Tree().model, budget=Budget(requests=3)
            )
            async with runtime.hold(fixed) as held:
                await held.run(["go"])
            assert "requests: 3 of 3 used" in (fixed.loop.last_error or "")
            logs = await events_of(store, [await store.header(session)])
            records = descriptors(logs, "budget")
            assert records[0] == bad
            assert records[-1].data["limits"]["requests"] == 3
    finally:
        await store.aclose()
