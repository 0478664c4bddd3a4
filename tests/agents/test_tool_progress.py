"""A running tool says how it goes (``ToolContext.progress``): a ``tool_progress`` delta to the
agent's delta listeners, naming the tool and the call; never stored, never shown to the model,
and nothing at all when nobody listens."""

from __future__ import annotations

import pytest

from tether.agents import Tool, ToolContext
from tether.models import ModelDelta, ScriptedModel, ScriptStep

pytestmark = pytest.mark.anyio


async def index(arguments: dict[str, object], context: ToolContext) -> str:
    for step in (1, 2):
        context.progress(f"{step}/2 indexing")
    return "indexed"


INDEX = Tool("index", "Index the files.", index)


def calling_index() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptStep.model_validate({"tool_calls": [{"id": "c1", "name": "index"}]}),
            ScriptStep(text="done"),
        ]
    )


async def test_a_tools_progress_reaches_the_agents_listeners_with_its_call(make_agent, store):
    agent = await make_agent(calling_index(), tools=[INDEX])
    heard: list[ModelDelta] = []
    agent.listen_deltas(heard.append)
    async with agent:
        assert await agent.run("index") == "completed"
    progress = [delta for delta in heard if delta.kind == "tool_progress"]
    assert [(d.text, d.name, d.call_id) for d in progress] == [
        ("1/2 indexing", "index", "c1"),
        ("2/2 indexing", "index", "c1"),
    ]
    # Not part of any answer, not in the log.
    assert [m.content for m in agent.messages if m.role == "assistant"][-1] == "done"
    logged = [stored.event for stored in await store.events(agent.session_id)]
    assert not any("indexing" in str(event) for event in logged)


async def test_progress_nobody_listens_to_costs_nothing_and_breaks_nothing(make_agent):
    agent = await make_agent(calling_index(), tools=[INDEX])
    async with agent:
        assert await agent.run("index") == "completed"
    assert agent.loop.stream is None  # no listener: nothing was made to tell
