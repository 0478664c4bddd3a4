"""Tool filters on delegation chains: narrowing what an ancestor already took away is not an
error; a name no plugin offers (a misspelling) still is, for spawn and fork alike."""

from __future__ import annotations

import pytest

from tether.agents import Tool, ToolFilter, ToolRegistry
from tether.errors import AgentError, ErrorCode
from tether.models import ModelRequest, ModelResponse

from .conftest import Brain, EchoTools, delegate, delegating_parent, make_parent, tool_results

pytestmark = pytest.mark.anyio


def chain_child(request: ModelRequest) -> ModelResponse | str:
    """The child delegates the same way again; the grandchild answers."""
    message = request.messages[-1]
    if message.role == "tool":
        return f"child saw: {message.content}"
    if message.content == "child task":
        return delegate("grandchild task", call_id="d2")
    return f"grandchild answer; my tools: {','.join(t.name for t in request.tools)}"


@pytest.mark.parametrize("provider", ["spawn", "fork"])
async def test_a_deny_filter_lets_a_child_delegate_again_with_the_same_tool(build_kernel, provider):
    kernel = build_kernel(
        f'[plugin.subagent]\nprovider = "{provider}"\ntool_filter = {{ deny = ["shout"] }}\n',
        extra_plugins={"echo-tools": EchoTools().plugin},
    )
    brain = Brain(delegating_parent("child task"), chain_child)
    parent = await make_parent(kernel, brain.model)
    async with parent:
        await parent.run("go")
    (result,) = tool_results(parent)
    assert result.startswith("child saw: grandchild answer; my tools: ")
    (child,) = await parent.store.sessions(parent=parent.session_id)
    (grandchild,) = await parent.store.sessions(parent=child.id)
    assert grandchild.delegation_depth == 2
    (grandchild_request,) = [
        r for r in brain.child_requests if r.messages[-1].content == "grandchild task"
    ]
    if provider == "spawn":  # a narrowed tool list
        assert "shout" not in [t.name for t in grandchild_request.tools]
    else:  # fork keeps the list byte-identical and refuses the call
        assert grandchild_request.tools == brain.parent_requests[0].tools


@pytest.mark.parametrize("provider", ["spawn", "fork"])
async def test_a_misspelt_tool_in_a_filter_is_still_an_error(build_kernel, provider):
    kernel = build_kernel(
        f'[plugin.subagent]\nprovider = "{provider}"\ntool_filter = {{ deny = ["shuot"] }}\n',
        extra_plugins={"echo-tools": EchoTools().plugin},
    )
    brain = Brain(delegating_parent("child task"), lambda r: "never")
    parent = await make_parent(kernel, brain.model)
    async with parent:
        await parent.run("go")
    (result,) = tool_results(parent)
    assert result.startswith("error: tool filter names unknown tool(s): shuot; available tools: ")
    assert result.endswith("[TOOL_FILTER_INVALID]")
    assert brain.child_requests == []
    assert await parent.store.sessions(parent=parent.session_id) == []


def tool(name: str) -> Tool:
    return Tool(name, f"{name} it", lambda args, ctx: name)


def test_restrict_narrows_names_that_are_known_but_already_gone():
    narrowed = ToolRegistry([tool("read")])  # "write" and "shell" were taken away earlier
    known = ["read", "write", "shell"]
    allowed = narrowed.restrict(ToolFilter(allow=frozenset({"read", "write"})), known=known)
    assert allowed.names() == ["read"]
    assert narrowed.restrict(ToolFilter(deny=frozenset({"shell"})), known=known).names() == ["read"]
    assert narrowed.restrict(ToolFilter(allow=frozenset({"write"})), known=known).names() == []


def test_restrict_still_rejects_a_name_nobody_offers():
    narrowed = ToolRegistry([tool("read")])
    with pytest.raises(AgentError) as caught:
        narrowed.restrict(ToolFilter(deny=frozenset({"shell", "shel"})), known=["read", "shell"])
    assert caught.value.code is ErrorCode.TOOL_FILTER_INVALID
    assert str(caught.value) == (
        "tool filter names unknown tool(s): shel; available tools: read [TOOL_FILTER_INVALID]"
    )
