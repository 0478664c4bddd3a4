"""The setup window, spawn (a fresh child) and fork (a child that reuses the parent's prefix)."""

from __future__ import annotations

import json

import pytest

from tether.agents import ToolFilter
from tether.errors import AgentError, ErrorCode
from tether.models import ModelRequest, ModelResponse, ToolCall
from tether.store import (
    ContextMessage,
    DescriptorEvent,
    InboxAccepted,
    ToolResult,
    UserMessage,
)
from tether.subagents import AgentOptions, SubagentRuntime, SubagentStartRequest
from tether.subagents.notices import APPROVAL_NOTES, DELEGATION_NOTE
from tether.testing import write_profile
from tether_fork import ForkProvider
from tether_spawn import SpawnProvider

from .conftest import Brain, EchoTools, delegate, make_parent

pytestmark = pytest.mark.anyio


@pytest.fixture
def tools_kernel(build_kernel):
    return build_kernel(extra_plugins={"echo-tools": EchoTools().plugin})


async def start_child(parent, provider, **request):
    runtime = SubagentRuntime()
    runtime.register_provider(provider)
    run = await runtime.start(
        provider.name, SubagentStartRequest(parent=parent, **{"prompt": "task", **request})
    )
    result = await run.result()
    await run.dispose()
    return run, result


def child_events(parent, run):
    return parent.store.events(run.id)


# ------------------------------------------------------------------ the setup window


@pytest.mark.parametrize("provider", [SpawnProvider(), ForkProvider()], ids=["spawn", "fork"])
async def test_policy_descriptor_and_note_follow_any_seed_in_the_childs_own_log(
    tools_kernel, provider
):
    brain = Brain(lambda r: "parent answer", lambda r: "child answer")
    parent = await make_parent(tools_kernel, brain.model)
    async with parent:
        await parent.run("first turn")
        run, _ = await start_child(
            parent,
            provider,
            persona="a terse reviewer",
            tool_filter=ToolFilter(deny=frozenset({"shout"})),
            max_depth=3,
        )
    header = await parent.store.header(run.id)
    events = [s.event for s in await parent.store.events(run.id)]
    descriptor, note = events[header.seed_length], events[header.seed_length + 1]
    assert isinstance(descriptor, DescriptorEvent)
    assert descriptor.kind == "delegation"
    assert descriptor.data["approval"] == "ask"  # its parent's: it asks up the chain
    assert descriptor.data["provider"] == provider.name
    assert descriptor.data["parent_session"] == parent.session_id
    assert descriptor.data["persona"] == "a terse reviewer"
    assert descriptor.data["tool_filter"] == {"allow": None, "deny": ["shout"]}
    assert descriptor.data["max_depth"] == 3
    assert isinstance(note, ContextMessage)
    assert note.origin == "delegation"
    assert note.content.startswith(DELEGATION_NOTE)
    assert "Your persona for this task:\na terse reviewer" in note.content
    # Then where it works (docs/workspaces.md), and the task itself, as its first turn.
    workspace = events[header.seed_length + 2]
    assert isinstance(workspace, DescriptorEvent)
    assert workspace.kind == "workspace"
    task = events[header.seed_length + 3]
    assert isinstance(task, InboxAccepted)
    assert task.source.kind == "subagent"


async def test_spawn_tool_filter_is_a_scoped_restrict_that_leaves_the_parent_untouched(
    tools_kernel,
):
    brain = Brain(lambda r: "parent answer", lambda r: "child answer")
    parent = await make_parent(tools_kernel, brain.model)
    before = [t.name for t in parent.tools]
    async with parent:
        run, _ = await start_child(
            parent, SpawnProvider(), tool_filter=ToolFilter(allow=frozenset({"echo"}))
        )
        await parent.run("after")
    assert [t.name for t in brain.child_requests[0].tools] == ["echo"]
    assert [t.name for t in parent.tools] == before
    assert {"echo", "shout", "subagent"} <= set(before)
    assert [t.name for t in brain.parent_requests[-1].tools] == before
    assert run.local_agent is not None
    assert run.local_agent.spec.tool_policy is None


async def test_fork_keeps_the_tool_list_and_refuses_filtered_calls(tools_kernel):
    def child(request):
        if request.messages[-1].role == "tool":
            return f"tool said: {request.messages[-1].content}"
        return ModelResponse(
            tool_calls=(ToolCall(id="s1", name="shout", arguments={"text": "hi"}),),
            finish_reason="tool_calls",
        )

    brain = Brain(lambda r: "parent answer", child)
    parent = await make_parent(tools_kernel, brain.model)
    async with parent:
        _, result = await start_child(
            parent, ForkProvider(), tool_filter=ToolFilter(deny=frozenset({"shout"}))
        )
    assert brain.child_requests[0].tools == parent.tools.schemas(parent)
    assert result.output == (
        'tool said: error: tool "shout" is not available to this agent: the task was '
        "delegated without it"
    )
    assert (
        'Only these tools are yours to call for this task: {"allow": null, "deny": ["shout"]}'
        in (brain.child_requests[0].messages[-2].content)
    )


def test_an_empty_tool_filter_is_an_error():
    with pytest.raises(AgentError) as caught:
        ToolFilter()
    assert caught.value.code == ErrorCode.TOOL_FILTER_INVALID


# ------------------------------------------------------------------ spawn


async def test_spawn_starts_a_fresh_history(kernel):
    brain = Brain(lambda r: "parent answer", lambda r: "child answer")
    parent = await make_parent(kernel, brain.model)
    async with parent:
        await parent.run("an earlier turn")
        run, result = await start_child(parent, SpawnProvider(), prompt="the task")
    (request,) = brain.child_requests
    assert [(m.role, m.content) for m in request.messages] == [
        ("user", DELEGATION_NOTE + APPROVAL_NOTES["ask"]),
        ("user", "the task"),
    ]
    assert request.system == brain.parent_requests[0].system
    assert result.output == "child answer"
    assert (await parent.store.header(run.id)).seed_length == 0


async def test_spawn_inherits_the_parent_model_unless_agent_options_name_one(kernel, tmp_path):
    script = write_profile(tmp_path, '[[steps]]\ntext = "from the other model"\n', "other.toml")
    brain = Brain(lambda r: "parent answer", lambda r: "from the parent's model")
    parent = await make_parent(kernel, brain.model)
    async with parent:
        inherited, first = await start_child(parent, SpawnProvider())
        options = AgentOptions(model=f"scripted:{script}", max_output_tokens=64)
        overridden, second = await start_child(parent, SpawnProvider(), agent_options=options)
    assert first.output == "from the parent's model"
    assert inherited.local_agent.model is parent.model  # type: ignore[union-attr]
    assert second.output == "from the other model"
    assert overridden.local_agent.spec.limits.max_output_tokens == 64  # type: ignore[union-attr]
    assert len(brain.child_requests) == 1


# ------------------------------------------------------------------ fork


def render(request: ModelRequest, messages=None) -> bytes:
    """The request as a provider would send it, in order: system, tools, then messages."""
    parts = [json.dumps(list(request.system)), *(t.model_dump_json() for t in request.tools)]
    parts += [m.model_dump_json() for m in (request.messages if messages is None else messages)]
    return "\n".join(parts).encode()


def common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def forking_parent(request: ModelRequest):
    message = request.messages[-1]
    if message.role == "tool" and message.name == "subagent":
        return f"parent saw: {message.content}"
    if message.role == "tool":
        return "first answer"
    if message.content == "first turn":
        return ModelResponse(
            text="let me echo",
            tool_calls=(ToolCall(id="e1", name="echo", arguments={"text": "x"}),),
            finish_reason="tool_calls",
        )
    return delegate("child task")


@pytest.fixture
def fork_kernel(build_kernel):
    return build_kernel(
        '[plugin.subagent]\nprovider = "fork"\n', extra_plugins={"echo-tools": EchoTools().plugin}
    )


async def test_fork_first_request_starts_with_exactly_the_parents_request_prefix(fork_kernel):
    brain = Brain(forking_parent, lambda r: "child answer")
    parent = await make_parent(fork_kernel, brain.model)
    async with parent:
        await parent.run("first turn")
        await parent.run("fork it")
    delegating = next(r for r in brain.parent_requests if r.messages[-1].content == "fork it")
    child = brain.child_requests[0]
    completed = delegating.messages[:-1]  # through the parent's last completed turn
    assert len(completed) == 4
    assert json.dumps(child.system) == json.dumps(delegating.system)
    assert [t.model_dump_json() for t in child.tools] == [
        t.model_dump_json() for t in delegating.tools
    ]
    assert [m.model_dump_json() for m in child.messages[: len(completed)]] == [
        m.model_dump_json() for m in completed
    ]
    prefix = render(delegating, completed)
    ratio = common_prefix(prefix, render(child)) / len(prefix)
    print(f"fork prefix reuse: {ratio:.0%} of {len(prefix)} bytes")
    assert ratio == 1.0
    # Anything child-specific comes after the inherited prefix.
    assert child.messages[len(completed)].content.startswith(DELEGATION_NOTE)
    assert child.messages[-1].content == "child task"
    assert parent.messages[-1].content == "parent saw: child answer"


async def test_fork_seed_stops_at_the_last_completed_turn(fork_kernel):
    brain = Brain(forking_parent, lambda r: "child answer")
    parent = await make_parent(fork_kernel, brain.model)
    async with parent:
        await parent.run("first turn")
        await parent.run("fork it")
    (child_header,) = await parent.store.sessions(parent=parent.session_id)
    events = [s.event for s in await parent.store.events(child_header.id)]
    seed = events[: child_header.seed_length]
    assert seed[-1].type == "turn/end"
    assert not any(isinstance(e, InboxAccepted) for e in seed)
    texts = [e.content for e in seed if isinstance(e, UserMessage)]
    assert texts == ["first turn"]  # the in-flight delegating turn is not copied
    parent_events = [
        s.event
        for s in await parent.store.events(parent.session_id)
        if not isinstance(s.event, InboxAccepted)
    ]
    assert seed == parent_events[: len(seed)]
    # The child's own turn is numbered after the inherited one.
    assert [e.turn for e in events if e.type == "turn/start"] == [1, 2]


async def test_fork_of_a_parent_with_no_completed_turn_has_an_empty_seed(kernel):
    brain = Brain(lambda r: "parent", lambda r: "child answer")
    parent = await make_parent(kernel, brain.model)
    async with parent:
        run, result = await start_child(parent, ForkProvider())
    assert (await parent.store.header(run.id)).seed_length == 0
    assert result.output == "child answer"


# ------------------------------------------------------------------ a delegated parent's limits


def grandchild_calls_shout(request: ModelRequest) -> ModelResponse | str:
    """A child that delegates once, and a grandchild that tries the denied tool."""
    last = request.messages[-1]
    if last.role == "tool":
        return f"tool said: {last.content}"
    if "grandchild task" in last.content:
        return ModelResponse(
            tool_calls=(ToolCall(id="s1", name="shout", arguments={"text": "hi"}),),
            finish_reason="tool_calls",
        )
    return delegate("grandchild task", call_id="g1")


@pytest.mark.parametrize(
    ("child_provider", "grandchild"),
    [("spawn", "spawn"), ("fork", "fork"), ("fork", "spawn"), ("spawn", "fork")],
)
async def test_a_grandchild_cannot_call_a_tool_its_delegated_parent_lost(
    build_kernel, child_provider, grandchild
):
    kernel = build_kernel(
        f'[plugin.subagent]\nprovider = "{grandchild}"\n',
        extra_plugins={"echo-tools": EchoTools().plugin},
    )
    brain = Brain(lambda r: "parent answer", grandchild_calls_shout)
    parent = await make_parent(kernel, brain.model)
    provider = {"spawn": SpawnProvider(), "fork": ForkProvider()}[child_provider]
    async with parent:
        run, result = await start_child(
            parent, provider, tool_filter=ToolFilter(deny=frozenset({"shout"}))
        )
    assert result.stop_reason == "completed"
    (grand,) = await parent.store.sessions(parent=run.id)
    grand_events = [s.event for s in await parent.store.events(grand.id)]
    (descriptor,) = [
        e for e in grand_events if isinstance(e, DescriptorEvent) and e.kind == "delegation"
    ]
    overrides = descriptor.data["parent_overrides"]
    if child_provider == "spawn":
        assert "shout" not in overrides["tools"]
    else:
        assert overrides["tool_policy"] == {"allow": None, "deny": ["shout"]}
    shout_results = [e.content for e in grand_events if isinstance(e, ToolResult)]
    # Either the tool is not in its list at all, or the call is refused: never run.
    assert shout_results
    assert all(r.startswith("error:") for r in shout_results)
    assert "HI" not in json.dumps([e.model_dump() for e in grand_events])


async def test_a_root_parent_has_no_overrides_to_carry(tools_kernel):
    brain = Brain(lambda r: "parent answer", lambda r: "child answer")
    parent = await make_parent(tools_kernel, brain.model)
    async with parent:
        run, _ = await start_child(parent, SpawnProvider())
    events = [s.event for s in await parent.store.events(run.id)]
    (descriptor,) = [e for e in events if isinstance(e, DescriptorEvent) and e.kind == "delegation"]
    assert descriptor.data["parent_overrides"] == {}
