"""A delegated child keeps what its delegation allowed on every route that continues it.

The routes open the child's stored session through ``compose_agent(session_id=CHILD)`` and
restore it (``tether run --session``, ACP ``session/load``, ``tether context --session``; the
command-line routes run as real processes in test_continued_child_cli.py): its tools, their
call policy and its approvals come from the ``delegation`` descriptor in its own log, never
from the preset it is composed from. Real SQLite stores, the spawn and fork providers,
function models.
"""

from __future__ import annotations

from typing import Any

import pytest

import tether
from tests.remake import remade
from tether.agents import PermissionQuestion, Tool, ToolFilter, new_header
from tether.errors import ErrorCode, StoreError
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import ContextMessage, DescriptorEvent, SQLiteStore

from .conftest import Brain, delegating_parent, make_parent, tool_results

pytestmark = pytest.mark.anyio


class Tools:
    """``echo``, ``shout`` and ``danger`` (which needs approval); it records what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def _tool(self, name: str, **options: Any) -> Tool:
        def run(arguments: dict[str, Any], context: Any) -> str:
            self.ran.append(name)
            return f"{name} ran"

        return Tool(name, f"{name} something", run, **options)

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        return [self._tool("echo"), self._tool("shout"), self._tool("danger", needs_approval=True)]


@pytest.fixture
def tools() -> Tools:
    return Tools()


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


async def allow_everything(question: PermissionQuestion) -> str:
    return "allow"


def calls(*names: str) -> Any:
    """A model that calls ``names`` in one step, then answers with what the tools said."""

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].role == "tool":
            results = [m.content for m in request.messages if m.role == "tool"]
            return " | ".join(results[-len(names) :])
        return ModelResponse(
            tool_calls=tuple(ToolCall(id=f"c{i}", name=n) for i, n in enumerate(names)),
            finish_reason="tool_calls",
        )

    return answer


async def delegated_child(runtime, store, approval: str = "deny", **request: Any) -> str:
    """Run a parent (approval policy ``approval``, which its child gets) that delegates one
    task through its ``subagent`` tool; the child's id."""
    brain = Brain(delegating_parent("child task", **request), lambda r: "child done")
    parent = await make_parent(runtime, brain.model, store)
    parent = remade(parent, approval=approval)
    async with parent:
        await parent.run("go")
    assert tool_results(parent) == ["child done"]
    (child,) = await store.sessions(parent=parent.session_id)
    return child.id


async def continue_session(runtime, store, session_id: str, *names: str) -> tuple[Any, str]:
    """What ``tether run --session`` and ACP ``session/load`` do: compose the stored session
    and run a turn in it. The agent and its answer."""
    agent = await compose_agent(
        runtime, store, session_id=session_id, model=FunctionModel(calls(*names))
    )
    async with agent:
        await agent.run("carry on")
    return agent, agent.messages[-1].content


async def test_a_spawn_child_opened_as_a_session_keeps_its_narrowed_tools_and_denied_approvals(
    build_runtime, store, tools
):
    runtime = build_runtime(
        '[plugin.subagent]\ntool_filter = { deny = ["shout"] }\n', extra_plugins={"tools": tools}
    )
    child_id = await delegated_child(runtime, store)
    runtime.permission_host = allow_everything  # a person who would allow anything asked
    agent, said = await continue_session(runtime, store, child_id, "shout", "danger", "echo")
    assert said == (
        'error: there is no tool "shout"; available tools: subagent, task_wait, task_cancel, '
        'task_output, echo, danger | error: tool "danger" needs approval, and this agent may not '
        "ask for it (its approval policy is deny) | echo ran"
    )
    assert tools.ran == ["echo"]
    assert agent.spec.approval == "deny"
    assert agent.tools.names() == [
        "subagent",
        "task_wait",
        "task_cancel",
        "task_output",
        "echo",
        "danger",
    ]


async def test_acp_session_load_of_a_child_gets_the_childs_tools_before_any_prompt(
    build_runtime, store, tools
):
    # tether_acp's session/load composes the session by id and enters the agent (which
    # restores it); the pins are in place before the first prompt arrives.
    runtime = build_runtime(
        '[plugin.subagent]\ntool_filter = { allow = ["echo"] }\n', extra_plugins={"tools": tools}
    )
    child_id = await delegated_child(runtime, store)
    agent = await compose_agent(runtime, store, session_id=child_id, model=FunctionModel(calls()))
    async with agent:
        request, _ = await agent.loop.preview("next")
    assert [schema.name for schema in request.tools] == ["echo"]
    assert agent.spec.approval == "deny"


async def test_a_fork_child_opened_as_a_session_keeps_its_call_time_policy(
    build_runtime, store, tools
):
    runtime = build_runtime(
        '[plugin.subagent]\nprovider = "fork"\ntool_filter = { deny = ["shout"] }\n',
        extra_plugins={"tools": tools},
    )
    child_id = await delegated_child(runtime, store)
    agent, said = await continue_session(runtime, store, child_id, "shout", "echo")
    assert said == (
        'error: tool "shout" is not available to this agent: the task was delegated without '
        "it | echo ran"
    )
    assert agent.tools.names() == [  # the parent's list
        "subagent",
        "task_wait",
        "task_cancel",
        "task_output",
        "echo",
        "shout",
        "danger",
    ]
    assert agent.spec.tool_policy == ToolFilter(deny=frozenset({"shout"}))


async def test_a_grandchild_opened_as_a_session_keeps_every_ancestors_narrowing(
    build_runtime, store, tools
):
    runtime = build_runtime(
        '[plugin.subagent]\ntool_filter = { deny = ["shout"] }\n'
        '[[plugin.subagent.tools]]\ntool_name = "narrow"\ntool_filter = { deny = ["danger"] }\n',
        extra_plugins={"tools": tools},
    )

    def child(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].content == "child task":
            return ModelResponse(
                tool_calls=(
                    ToolCall(
                        id="g",
                        name="narrow",
                        arguments={"description": "deeper", "prompt": "grandchild task"},
                    ),
                ),
                finish_reason="tool_calls",
            )
        return "done"

    brain = Brain(delegating_parent("child task"), child)
    parent = await make_parent(runtime, brain.model, store)
    async with parent:
        await parent.run("go")
    (child_header,) = await store.sessions(parent=parent.session_id)
    (grandchild,) = await store.sessions(parent=child_header.id)
    agent, said = await continue_session(runtime, store, grandchild.id, "shout", "danger", "echo")
    assert agent.tools.names() == [
        "subagent",
        "narrow",
        "task_wait",
        "task_cancel",
        "task_output",
        "echo",
    ]
    assert said.startswith('error: there is no tool "shout"')
    assert tools.ran == ["echo"]


async def test_restoring_an_already_narrowed_child_changes_nothing(build_runtime, store, tools):
    runtime = build_runtime(
        '[plugin.subagent]\ntool_filter = { deny = ["shout"] }\n', extra_plugins={"tools": tools}
    )
    child_id = await delegated_child(runtime, store)
    agent = await compose_agent(runtime, store, session_id=child_id, model=FunctionModel(calls()))
    async with agent:
        narrowed = agent.tools
        await agent.restore(repair=False)  # the pins again: idempotent
        assert agent.tools is narrowed


# ------------------------------------------------------------------ logs written otherwise


async def stored_child(store, data: dict[str, Any] | None, *, origin: str = "subagent") -> str:
    """A stored session (``origin``) whose setup window holds a delegation descriptor with
    ``data`` (none when ``None``), as an older tether or another program wrote it."""
    header = new_header(agent="main", origin=origin, delegation_depth=1)  # type: ignore[arg-type]
    setup: list[Any] = []
    if data is not None:
        setup.append(DescriptorEvent(kind="delegation", version=1, data=data))
    setup.append(ContextMessage(role="user", content="note", origin="delegation"))
    await store.create(header, setup)
    return header.id


async def test_a_descriptor_without_recorded_tools_still_enforces_its_filter_at_call_time(
    build_runtime, store, tools
):
    runtime = build_runtime(extra_plugins={"tools": tools})
    child_id = await stored_child(
        store,
        {
            "provider": "spawn",
            "approval": "deny",
            "parent_overrides": {"tool_policy": {"allow": None, "deny": ["danger"]}},
            "tool_filter": {"allow": None, "deny": ["shout"]},
        },
    )
    agent, said = await continue_session(runtime, store, child_id, "shout", "danger", "echo")
    assert agent.spec.tool_policy == ToolFilter(deny=frozenset({"shout", "danger"}))
    assert said.count("the task was delegated without it") == 2
    assert tools.ran == ["echo"]


async def test_a_delegated_session_without_a_descriptor_has_its_approvals_denied(
    build_runtime, store, tools
):
    runtime = build_runtime(extra_plugins={"tools": tools})
    child_id = await stored_child(store, None)
    runtime.permission_host = allow_everything
    agent, said = await continue_session(runtime, store, child_id, "danger")
    assert agent.spec.approval == "deny"
    assert said.startswith('error: tool "danger" needs approval, and this agent may not ask')


async def test_a_session_a_person_started_is_not_pinned(build_runtime, store, tools):
    runtime = build_runtime(extra_plugins={"tools": tools})
    session_id = await stored_child(store, None, origin="user")
    runtime.permission_host = allow_everything
    agent, said = await continue_session(runtime, store, session_id, "danger")
    assert (agent.spec.approval, agent.spec.tool_policy, said) == ("ask", None, "danger ran")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"tools": "echo"}, "tools is 'echo', not a list of tool names"),
        ({"tools": ["echo"], "policy": {"deny": []}}, "policy is {'deny': []}, not a filter"),
        ({"approval": "maybe"}, "approval is 'maybe', not one of"),
        ({"tool_filter": ["shout"]}, "tool_filter is ['shout'], not a table"),
    ],
)
async def test_an_unreadable_descriptor_stops_the_restore_and_frees_the_session(
    build_runtime, store, tools, data, problem
):
    runtime = build_runtime(extra_plugins={"tools": tools})
    child_id = await stored_child(store, data)
    agent = await compose_agent(runtime, store, session_id=child_id, model=FunctionModel(calls()))
    with pytest.raises(StoreError) as caught:
        async with agent:
            pass
    assert caught.value.code is ErrorCode.SESSION_CORRUPT
    assert f'the delegation descriptor of session "{child_id}" is not readable: {problem}' in str(
        caught.value
    )
    await store.acquire(child_id)  # the lease it took was given back
    await store.release(child_id)
    assert tools.ran == []


async def test_a_continuable_child_cold_restored_in_a_new_process_keeps_its_tools(
    build_runtime, store, tools
):
    settings = '[plugin.subagent]\nbackground = "continuable"\ntool_filter = { deny = ["shout"] }\n'
    brain = Brain(
        delegating_parent("child task", background=True),
        lambda r: calls("shout", "echo")(r) if r.messages[-1].content == "now" else "ok",
    )
    runtime = build_runtime(settings, extra_plugins={"tools": tools})
    parent = await make_parent(runtime, brain.model, store)
    async with parent:
        await parent.run("go")
        await runtime.subagents.continuation.wait_quiet(parent)
    (child,) = await store.sessions(parent=parent.session_id)

    # Another runtime (as after a restart): nothing of the first activation is in memory.
    runtime = build_runtime(settings, extra_plugins={"tools": tools})
    again = await compose_agent(runtime, store, session_id=parent.session_id, model=brain.model)
    manager = runtime.subagents.continuation
    async with again:
        await manager.followup(again, child.id, "now")
        restored = manager.live(child.id)
        assert restored is not None
        assert "shout" not in restored.tools.names()
        assert restored.spec.approval == "ask"  # its parent's, as delegated
        await manager.wait_quiet(again)
    results = [
        s.event.content  # type: ignore[union-attr]
        for s in await store.events(child.id)
        if s.event.type == "tool/result"
    ]
    assert results[-2:] == [
        'error: there is no tool "shout"; available tools: subagent, send_message, '
        "interrupt_agent, list_agents, report, task_wait, task_cancel, task_output, echo, danger",
        "echo ran",
    ]
