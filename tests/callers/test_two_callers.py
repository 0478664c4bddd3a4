"""Two callers on one profile see different context (docs/callers.md): a caller-aware skill
provider gives each its team's playbook, a declared subagent with a condition is offered to
one and refused to the other, a dynamic instruction and a tool source read who asks; a change
of caller in one session appends and never rewrites; a resumed session knows who asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tether_skill_tool
from tether.contracts import Caller
from tether.errors import ErrorCode
from tether.models import ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.skills import SkillRegistry
from tether.store import SQLiteStore, ToolResult
from tether.testing import make_kernel, write_profile

from . import brains, playbooks

pytestmark = pytest.mark.anyio

ALICE = Caller(
    id="os:alice", name="Alice", via="cli", claims={"team": "billing", "plan": "enterprise"}
)
BOB = Caller(id="os:bob", name="Bob", via="cli", claims={"team": "support", "plan": "free"})

PROFILE = """
[tether]
plugins = ["playbooks", "skill-tool"]

[agent.main]
model = "function:tests.callers.brains:main"
subagents = ["analyst", "helper"]

[agent.analyst]
description = "Analyses an enterprise account in depth."
model = "function:tests.callers.brains:analyst"
when = { claims = { plan = "enterprise" } }

[agent.helper]
description = "Helps with anything small."
model = "function:tests.callers.brains:helper"
"""


@pytest.fixture(autouse=True)
def _reset() -> None:
    playbooks.reset()


def _runtime(tmp_path: Path, store: SQLiteStore) -> Runtime:
    plugins = {
        "playbooks": playbooks.PlaybooksPlugin(),
        "skill-tool": tether_skill_tool.SkillToolPlugin,
    }
    return Runtime(make_kernel(write_profile(tmp_path, PROFILE), plugins), store)


def _call(tool: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=f"call_{tool}", name=tool, arguments=arguments),),
        finish_reason="tool_calls",
    )


def _text(request: ModelRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def _tools(request: ModelRequest) -> list[str]:
    return [tool.name for tool in request.tools]


async def test_two_callers_see_different_skills_and_specialists(tmp_path, store, roles):
    def main(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].role == "tool" or "task_result" in _text(request):
            return "done"  # after the call, and on the analyst's result
        return _call("call_subagent", name="analyst", message="Look at ACME.")

    roles["main"] = main
    runtime = _runtime(tmp_path, store)
    alice = await runtime.compose(agent="main", caller=ALICE)
    bob = await runtime.compose(agent="main", caller=BOB)
    async with runtime.hold(alice), runtime.hold(bob):
        await alice.run("Help me, for Alice.")
        await bob.run("Help me, for Bob.")
        await runtime.settle(alice)

    def first(prompt: str) -> ModelRequest:
        return next(r for r in brains.REQUESTS["main"] if prompt in _text(r))

    first_alice, first_bob = first("Help me, for Alice."), first("Help me, for Bob.")
    # Each sees its own team's playbook, and the provider written before callers for both.
    assert "`billing-playbook`" in _text(first_alice)
    assert "`support-playbook`" not in _text(first_alice)
    assert "`support-playbook`" in _text(first_bob)
    assert "`house-style`" in _text(first_alice)
    assert "`house-style`" in _text(first_bob)
    # The enterprise specialist is listed for Alice only; the tool lists are the same.
    assert "`analyst`: Analyses an enterprise account" in _text(first_alice)
    assert "analyst" not in _text(first_bob)
    assert _tools(first_alice) == _tools(first_bob)
    assert "helper" in _tools(first_alice)
    assert "analyst" not in _tools(first_alice)
    # Alice's call starts the analyst, as a child working for Alice; Bob's is refused.
    assert len(brains.REQUESTS["analyst"]) == 1
    children = await store.sessions(parent=alice.session_id)
    assert [child.caller for child in children] == [ALICE]
    refused = [
        s.event for s in await store.events(bob.session_id) if isinstance(s.event, ToolResult)
    ]
    assert refused[0].is_error
    assert f"[{ErrorCode.SUBAGENT_UNAVAILABLE}]" in refused[0].content
    assert 'not offered to caller "os:bob"' in refused[0].content
    # The dynamic instruction and the tool source read who asks.
    assert "You are speaking with Alice (session started by os:alice)." in _text(first_alice)
    assert "You are speaking with Bob (session started by os:bob)." in _text(first_bob)
    assert playbooks.SOURCED == [ALICE, BOB, ALICE]  # the analyst's own tools: for Alice


async def test_a_change_of_caller_appends_and_never_rewrites(tmp_path, store, roles):
    runtime = _runtime(tmp_path, store)
    agent = await runtime.compose(agent="main", caller=BOB)
    async with runtime.hold(agent) as held:
        await held.send("First, as Bob.")
        await held.settle()
        await held.send("Now Alice asks.", caller=ALICE)
        await held.settle()
        assert agent.caller == ALICE
        assert agent.initiator == BOB
    before, after = brains.REQUESTS["main"]
    assert after.messages[: len(before.messages)] == before.messages
    assert after.system == before.system
    assert _tools(after) == _tools(before)
    added = "\n".join(m.content for m in after.messages[len(before.messages) :])
    assert "You are speaking with Alice (session started by os:bob)." in added
    assert "The available skill catalog changed" in added
    assert "`billing-playbook`" in added
    assert "`analyst`" in added  # the enterprise specialist, now offered
    # Back to Bob: the list is withdrawn by a message, not by rewriting the one before.
    async with runtime.hold(agent) as held:
        await held.send("Bob again.", caller=BOB)
        await held.settle()
    third = brains.REQUESTS["main"][2]
    assert third.messages[: len(after.messages)] == after.messages
    assert "No subagent is available through call_subagent" in _text(third)


async def test_a_resumed_session_knows_who_asks_from_its_sqlite_file(tmp_path, roles):
    path = tmp_path / "sessions.db"
    store = SQLiteStore(path)
    try:
        agent = await _runtime(tmp_path, store).compose(agent="main", caller=BOB)
        async with agent:
            await agent.run("as Bob")
            await agent.run("as Alice", caller=ALICE)
    finally:
        await store.aclose()
    reopened = SQLiteStore(path)
    try:
        again = await _runtime(tmp_path, reopened).compose(session_id=agent.session_id)
        async with again:
            assert again.initiator == BOB
            assert again.caller == ALICE
            assert (await reopened.header(agent.session_id)).caller == BOB
            # A message that names nobody (an agent composed for no caller) runs as Alice.
            await again.run("who asks now?")
            assert again.caller == ALICE
        last = brains.REQUESTS["main"][-1]
        assert "You are speaking with Alice" in _text(last)
    finally:
        await reopened.aclose()


async def test_only_caller_aware_providers_are_listed_per_caller() -> None:
    registry = SkillRegistry()
    registry.register_provider(lambda control: playbooks.HouseStyle(), name="house")
    for caller in (ALICE, BOB, ALICE):
        catalog = await registry.list(cwd=Path.cwd(), caller=caller)
        assert [s.name for s in catalog.summaries] == ["house-style"]
    assert playbooks.LISTED["house"] == ["-"]  # one catalog for every caller
    registry.register_provider(lambda control: playbooks.TeamPlaybooks(), name="playbooks")
    for caller in (ALICE, BOB, ALICE):
        await registry.list(cwd=Path.cwd(), caller=caller)
    assert playbooks.LISTED["playbooks"] == ["os:alice", "os:bob"]  # cached per caller
    loaded = await registry.get("billing-playbook", cwd=Path.cwd(), caller=ALICE)
    assert loaded is not None
    assert loaded.content.startswith("Refund")
    assert await registry.get("billing-playbook", cwd=Path.cwd(), caller=BOB) is None


async def test_a_compaction_restates_the_caller_s_subagent_list(tmp_path, store, roles):
    runtime = _runtime(tmp_path, store)
    agent = await runtime.compose(agent="main", caller=ALICE)
    async with runtime.hold(agent) as held:
        await held.send("Before.")
        await held.settle()
        assert await agent.compact() is not None
        await held.send("After.")
        await held.settle()
    after = [r for r in brains.REQUESTS["main"] if r.purpose == "turn"][-1]
    lists = [m.content for m in after.messages if "call_subagent" in m.content]
    assert len(lists) == 1  # restated once after the summary, not announced again
    assert "`analyst`" in lists[0]
    assert "replaces every earlier" not in lists[0]
