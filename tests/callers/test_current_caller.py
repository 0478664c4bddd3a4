"""The current caller is the caller of the last message the agent took (docs/callers.md): a
steer taken at a step changes it for the steps after it, context injected between turns at
once; a message that names nobody keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tether_skill_tool
from tether import hookimpl
from tether.agents import Tool, ToolContext
from tether.contracts import Caller
from tether.models import ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import SQLiteStore, UserMessage
from tether.testing import make_kernel, write_profile

from . import brains, playbooks

pytestmark = pytest.mark.anyio

ALICE = Caller(id="os:alice", via="api", claims={"team": "billing"})
BOB = Caller(id="os:bob", via="api", claims={"team": "support"})


class Handoff:
    """A tool that hands the conversation to Alice: it steers the running turn as her."""

    @hookimpl
    def tether_tools(self, settings: Any) -> list[Tool]:
        async def handoff(arguments: dict[str, Any], context: ToolContext) -> str:
            await context.agent.steer("Alice takes over.", caller=ALICE)
            return "handed over"

        return [Tool("handoff", "Hand the conversation to Alice.", handoff)]


def _runtime(tmp_path: Path, store: SQLiteStore) -> Runtime:
    body = """
    [tether]
    plugins = ["playbooks", "skill-tool", "handoff"]

    [agent.main]
    model = "function:tests.callers.brains:main"
    """
    plugins = {
        "playbooks": playbooks.PlaybooksPlugin(),
        "skill-tool": tether_skill_tool.SkillToolPlugin,
        "handoff": Handoff(),
    }
    return Runtime(make_kernel(write_profile(tmp_path, body), plugins), store)


async def test_a_steer_taken_at_a_step_changes_who_asks_for_the_steps_after(tmp_path, store, roles):
    def main(request: ModelRequest) -> ModelResponse | str:
        if len(brains.REQUESTS["main"]) == 1:
            call = ToolCall(id="c1", name="handoff", arguments={})
            return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
        return "ok"

    roles["main"] = main
    playbooks.reset()
    agent = await _runtime(tmp_path, store).compose(agent="main", caller=BOB)
    async with agent:
        await agent.run("Help.")
        assert agent.caller == ALICE
        assert agent.initiator == BOB
    first, second = brains.REQUESTS["main"]
    assert second.messages[: len(first.messages)] == first.messages
    added = "\n".join(m.content for m in second.messages[len(first.messages) :])
    assert "Alice takes over." in added
    assert "`billing-playbook`" in added  # the catalog replaced for her, at the next step
    claims = [s.event for s in await store.events(agent.session_id)]
    steer = next(e for e in claims if isinstance(e, UserMessage) and e.source.kind == "steer")
    assert steer.source.caller == ALICE


async def test_context_injected_between_turns_is_taken_at_once(tmp_path, store):
    agent = await _runtime(tmp_path, store).compose(agent="main", caller=BOB)
    async with agent:
        await agent.run("Help.")
        await agent.inject("Alice is here now.", caller=ALICE)
        assert agent.caller == ALICE
        await agent.run("And this one names nobody.", caller=None)
        assert agent.caller == BOB  # the agent's default sender: it was composed for Bob
    plain = await _runtime(tmp_path, store).compose(session_id=agent.session_id)
    async with plain:
        assert plain.caller == BOB
        await plain.run("No caller at all.")
        assert plain.caller == BOB  # a message naming nobody keeps who asks
