"""The local-child kit: a continuable child restored cold from its own log is the agent its
compose made (tools, call policy, approvals, scope, model, limits), because both are made from
one :class:`ChildSpec`.

Real SQLite stores, the spawn and fork providers' settings, function models.
"""

from __future__ import annotations

import pytest

from tether.agents import Agent, ToolFilter, new_header
from tether.errors import ErrorCode, StoreError, SubagentError
from tether.models import FunctionModel, ModelRequest
from tether.runtime import compose_agent
from tether.store import DescriptorEvent, MemoryStore, SQLiteStore
from tether.subagents import AgentOptions, SubagentStartRequest
from tether.subagents._kit import ChildSpec, find_continuable_descriptor
from tether.subagents.local import CONTINUABLE_DESCRIPTOR, compose_local_child, restore_local_child

from .conftest import EchoTools

pytestmark = pytest.mark.anyio

#: The delegation tool's settings that add the control tools (``report`` among them).
CONTINUABLE = '[plugin.subagent]\nbackground = "continuable"\n'


def routed(request: ModelRequest) -> str:
    """The model a delegation names by spec (``AgentOptions.model``)."""
    return "routed answer"


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


def the_same_agent(restored: Agent, composed: Agent) -> None:
    assert restored.session_id == composed.session_id
    assert restored.tools.names() == composed.tools.names()
    assert restored.spec.tool_policy == composed.spec.tool_policy
    assert (
        restored.spec.approval == composed.spec.approval == "ask"
    )  # its parent's: it asks up the chain
    assert restored.spec.scope is not None
    assert composed.spec.scope is not None
    assert restored.spec.scope.path == composed.spec.scope.path
    assert restored.model.name == composed.model.name
    assert restored.spec.limits == composed.spec.limits
    assert restored.cwd == composed.cwd
    assert restored.runtime is composed.runtime
    assert restored.spec.system == composed.spec.system


@pytest.mark.parametrize("keep_tool_list", [False, True], ids=["spawn", "fork"])
async def test_a_cold_restore_makes_the_agent_its_compose_made(
    build_runtime, store, keep_tool_list
):
    runtime = build_runtime(CONTINUABLE, extra_plugins={"echo": EchoTools().plugin})
    parent = await compose_agent(runtime, store, model=FunctionModel(lambda request: "ok"))
    request = SubagentStartRequest(
        prompt="child task",
        parent=parent,
        tool_filter=ToolFilter(deny=frozenset({"shout"})),
        agent_options=AgentOptions(model=f"function:{__name__}:routed", max_output_tokens=321),
    )
    async with parent:
        composed = await compose_local_child(
            request, provider="spawn", keep_tool_list=keep_tool_list, continuable=True
        )
        header = await store.header(composed.session_id)
        descriptor = await find_continuable_descriptor(store, header)
        assert descriptor is not None
        restored = await restore_local_child(parent, header, descriptor)
    the_same_agent(restored, composed)
    assert restored.spec.limits.max_output_tokens == 321
    assert restored.model.name == f"function:{__name__}:routed"
    if keep_tool_list:
        assert "shout" in restored.tools.names()
        assert restored.spec.tool_policy is not None
        assert not restored.spec.tool_policy.permits("shout")
    else:
        assert "shout" not in restored.tools.names()
    assert "report" in restored.tools.names()  # a continuable child keeps its report tool


async def test_a_child_without_a_model_of_its_own_is_restored_with_its_hosts(build_runtime, store):
    runtime = build_runtime()
    model = FunctionModel(lambda request: "ok")
    parent = await compose_agent(runtime, store, model=model)
    async with parent:
        composed = await compose_local_child(
            SubagentStartRequest(prompt="child task", parent=parent),
            provider="spawn",
            continuable=True,
        )
        header = await store.header(composed.session_id)
        descriptor = await find_continuable_descriptor(store, header)
        assert descriptor is not None
        restored = await restore_local_child(parent, header, descriptor)
    the_same_agent(restored, composed)
    assert restored.model is model
    assert restored.spec.limits == parent.spec.limits


async def test_the_continuable_descriptor_is_written_in_the_setup_window(build_runtime, store):
    runtime = build_runtime()
    parent = await compose_agent(runtime, store, model=FunctionModel(lambda request: "ok"))
    async with parent:
        one_shot = await compose_local_child(
            SubagentStartRequest(prompt="task", parent=parent), provider="spawn"
        )
        continuable = await compose_local_child(
            SubagentStartRequest(prompt="task", parent=parent, label="kept"),
            provider="fork",
            continuable=True,
        )
        assert await find_continuable_descriptor(store, one_shot.header) is None
        found = await find_continuable_descriptor(store, continuable.header)
    assert found is not None
    assert found.kind == CONTINUABLE_DESCRIPTOR
    assert found.data["provider"] == "fork"
    assert found.data["label"] == "kept"


@pytest.mark.parametrize(
    ("key", "value"),
    [("model", 7), ("max_output_tokens", "many"), ("max_output_tokens", 0)],
)
async def test_an_unreadable_continuable_descriptor_is_a_corrupt_session(build_runtime, key, value):
    runtime = build_runtime()
    parent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(lambda r: "ok"))
    header = new_header(parent_session=parent.session_id, origin="subagent")
    descriptor = DescriptorEvent(
        kind=CONTINUABLE_DESCRIPTOR,
        data={"mode": "continuable", "provider": "spawn", key: value},
    )
    with pytest.raises(StoreError) as caught:
        ChildSpec.restored(parent, header, descriptor)
    assert caught.value.code is ErrorCode.SESSION_CORRUPT
    assert header.id in str(caught.value)
    assert key in str(caught.value)


async def test_an_agent_without_a_runtime_cannot_host_a_child():
    bare = Agent(header=new_header(), store=MemoryStore(), model=FunctionModel(lambda r: "ok"))
    header = new_header(parent_session=bare.session_id, origin="subagent")
    descriptor = DescriptorEvent(kind=CONTINUABLE_DESCRIPTOR, data={"mode": "continuable"})
    with pytest.raises(SubagentError) as caught:
        ChildSpec.restored(bare, header, descriptor)
    assert caught.value.code is ErrorCode.SUBAGENT_INVALID
    assert "without a runtime" in str(caught.value)
