"""Which delegation tools a session is offered (eve's ``advertised-tools.test``): the recursive
``agent`` copy only in root sessions, declared subagents at any depth (even one named
``agent``), and the load-time errors of declared subagents (eve's texts, adapted)."""

from __future__ import annotations

import pytest

from tether.errors import AgentError, ErrorCode, ProfileError
from tether.loading import Kernel
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.testing import make_kernel, write_profile

from . import brains
from .conftest import PLUGINS, call

pytestmark = pytest.mark.anyio

COPY = """
[plugin.subagent]
tool_name = "agent"
root_only = true
"""


def _profile(tmp_path, body: str) -> Kernel:
    return make_kernel(write_profile(tmp_path, body), PLUGINS)


def _names(agent, requests) -> list[str]:
    return [tool.name for tool in requests.tools]


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


async def test_the_recursive_agent_tool_is_kept_in_a_root_session_and_removed_in_delegated_ones(
    tmp_path, store, roles
):
    kernel = _profile(
        tmp_path,
        f"""
        [tether]
        plugins = ["spawn", "subagent"]
        {COPY}
        [agent.main]
        model = "function:tests.specialists.brains:main"
        subagents = ["writer"]

        [agent.writer]
        description = "Writes."
        model = "function:tests.specialists.brains:writer"
        plugins = ["subagent"]
        [agent.writer.plugin.subagent]
        tool_name = "agent"
        root_only = true
        """,
    )
    roles["main"] = lambda r: (
        call("writer", message="Draft.") if len(brains.REQUESTS["main"]) == 1 else "ok"
    )
    async with Runtime.open(kernel, store) as runtime:
        main = await runtime.compose(agent="main")
        async with main:
            await main.run("go")
            await runtime.settle(main)
        # The same preset composed as a root session offers its copy tool.
        root_writer = await runtime.compose(agent="writer")
    root_tools = [t.name for t in brains.REQUESTS["main"][0].tools]
    assert "agent" in root_tools
    delegated = [t.name for t in brains.REQUESTS["writer"][0].tools]
    assert "agent" not in delegated
    assert root_writer.tools.get("agent", root_writer) is not None


async def test_a_declared_subagent_is_kept_at_any_depth_even_one_named_agent(
    tmp_path, store, roles
):
    kernel = _profile(
        tmp_path,
        """
        [tether]
        store = "sqlite:sessions.db"

        [agent.main]
        model = "function:tests.specialists.brains:main"
        subagents = ["writer"]

        [agent.writer]
        description = "Writes."
        model = "function:tests.specialists.brains:writer"
        subagents = ["editor"]

        [agent.editor]
        description = "Edits."
        tool_name = "agent"
        model = "function:tests.specialists.brains:editor"
        """,
    )
    roles["main"] = lambda r: (
        call("writer", message="Draft.") if len(brains.REQUESTS["main"]) == 1 else "ok"
    )
    roles["writer"] = lambda r: (
        call("agent", message="Polish.") if len(brains.REQUESTS["writer"]) == 1 else "drafted"
    )
    roles["editor"] = lambda r: "polished"
    async with Runtime.open(kernel, store) as runtime:
        main = await runtime.compose(agent="main")
        async with main:
            await main.run("go")
            await runtime.settle(main)
        tree = await store.children(main.session_id) if hasattr(store, "children") else None
    writer_tools = [t.name for t in brains.REQUESTS["writer"][0].tools]
    assert writer_tools[0] == "agent"  # the declared subagent, at depth 1
    (editor_request,) = brains.REQUESTS["editor"]
    assert editor_request.messages[-1].content == "Polish."
    # The editor's result reached the writer, and the writer's reached main.
    assert any(
        'tool="agent" status="completed">polished' in m.content
        for m in brains.REQUESTS["writer"][-1].messages
    )
    del tree


def _kernel_error(tmp_path, body: str) -> AgentError:
    kernel = _profile(tmp_path, body)
    runtime = Runtime(kernel)
    with pytest.raises(AgentError) as caught:
        runtime.preset("main")
    return caught.value


def test_a_subagent_that_collides_with_another_tool_is_an_error(tmp_path):
    error = _kernel_error(
        tmp_path,
        """
        [tether]
        plugins = ["spawn", "subagent"]
        [plugin.subagent]
        tool_name = "writer"
        [agent.main]
        subagents = ["writer"]
        [agent.writer]
        description = "Writes."
        """,
    )
    assert error.code is ErrorCode.TOOL_INVALID
    assert error.message == ('Subagent "writer" of agent "main" collides with another tool name')
    assert "tool = false" in (error.remedy or "")


def test_a_hidden_subagent_leaves_its_name_to_another_tool(tmp_path):
    kernel = _profile(
        tmp_path,
        """
        [tether]
        plugins = ["spawn", "subagent"]
        [plugin.subagent]
        tool_name = "writer"
        [agent.main]
        subagents = ["writer"]
        [agent.writer]
        description = "Writes."
        tool = false
        """,
    )
    preset = Runtime(kernel).preset("main")
    assert preset.tools.names() == ["writer", "task_wait", "task_cancel", "task_output"]
    assert [s.agent for s in preset.specialists] == ["writer"]


def test_two_subagents_with_one_tool_name_are_an_error_at_load(tmp_path):
    with pytest.raises(ProfileError) as caught:
        _profile(
            tmp_path,
            """
            [agent.main]
            subagents = ["a", "b"]
            [agent.a]
            description = "A."
            tool_name = "helper"
            [agent.b]
            description = "B."
            tool_name = "helper"
            """,
        )
    assert caught.value.message == (
        'subagents "a" and "b" of agent "main" have one tool name, "helper"'
    )


def test_deferred_subagents_are_found_by_description_and_called_by_name(tmp_path):
    kernel = _profile(
        tmp_path,
        """
        [agent.main]
        subagents = ["writer", "translator"]
        [agent.writer]
        description = "Writes."
        [agent.translator]
        description = "Translates German into English."
        tool = "deferred"
        """,
    )
    preset = Runtime(kernel).preset("main")
    assert preset.tools.names() == [
        "writer",
        "find_subagents",
        "call_subagent",
        "task_wait",
        "task_cancel",
        "task_output",
    ]


async def test_find_subagents_lists_the_deferred_ones_matching_the_query(tmp_path):
    kernel = _profile(
        tmp_path,
        """
        [agent.main]
        subagents = ["translator", "summarizer"]
        [agent.translator]
        description = "Translates German into English."
        tool = "deferred"
        [agent.summarizer]
        description = "Summarizes long English texts."
        tool = "deferred"
        """,
    )
    find = Runtime(kernel).preset("main").tools.get("find_subagents")
    assert find is not None
    text = await find.run({"query": "german"}, None)  # type: ignore[arg-type]
    assert text == "- translator: Translates German into English."
    everything = await find.run({"query": ""}, None)  # type: ignore[arg-type]
    assert everything.count("\n") == 1
