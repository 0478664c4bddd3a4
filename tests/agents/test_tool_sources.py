"""Tool sources (``tether_tool_sources``): tools listed at compose, merged into their layer."""

from __future__ import annotations

import anyio
import pytest

import tether
from tether.agents import PARALLEL_TOOLS_SECTION, Tool, ToolSource, build_preset
from tether.errors import AgentError, ErrorCode, PluginError, SkillError
from tether.models import FunctionModel, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import MemoryStore
from tether.testing import scaled

pytestmark = pytest.mark.anyio


def tool(name: str, result: str | None = None) -> Tool:
    async def run(args, ctx):
        return result or name

    return Tool(name, f"the {name} tool", run)


class Listing:
    """A tool source whose list the test changes; counts how often it was listed."""

    def __init__(self, name: str, *tools: Tool, eager: bool = False) -> None:
        self.tools: tuple[Tool, ...] = tools
        self.calls = 0
        self.failure: Exception | None = None
        self.gate: anyio.Event | None = None
        self.opens: anyio.Event | None = None
        self.source = ToolSource(name, self.list_tools, eager=eager)

    async def list_tools(self, runtime):
        self.calls += 1
        if self.opens is not None:
            self.opens.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return self.tools


class Sources:
    def __init__(self, *listings: Listing, static: tuple[Tool, ...] = ()) -> None:
        self.listings = listings
        self.static = static

    @tether.hookimpl
    def tether_tool_sources(self):
        return [listing.source for listing in self.listings]

    @tether.hookimpl
    def tether_tools(self):
        return self.static


PROFILE = """
[tether]
plugins = ["outer"]
[agent.main]
plugins = ["inner"]
model = "function:x"
"""


def kernel_with(tether_kernel, outer: Sources, inner: Sources):
    return tether_kernel(PROFILE, {"outer": outer, "inner": inner})


async def test_hook_tether_tool_sources_merge_into_their_layer_at_compose(tether_kernel):
    near = Listing("near", tool("shared", "near"), tool("mine"))
    far = Listing("far", tool("shared", "far"), tool("theirs"))
    kernel = kernel_with(tether_kernel, Sources(far, static=(tool("fixed"),)), Sources(near))
    preset = build_preset(kernel, "main")
    assert preset.tools.names() == ["fixed"]  # the preset knows only what loading gave
    assert PARALLEL_TOOLS_SECTION in preset.system
    runtime = Runtime(kernel, MemoryStore())
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "ok"))
    # Nearest layer first; the agent layer's "shared" hides the global one.
    assert agent.tools.names() == ["shared", "mine", "fixed", "theirs"]
    shared = agent.tools.get("shared")
    assert shared is not None
    assert await shared.run({}, None) == "near"  # type: ignore[arg-type]
    assert {"mine", "theirs", "shared"} <= runtime.tool_catalog.known_names()


async def test_an_unchanged_listing_is_the_same_tool_list_and_a_new_one_is_new(tether_kernel):
    listing = Listing("live", tool("a"))
    kernel = kernel_with(tether_kernel, Sources(listing), Sources())
    runtime = Runtime(kernel, MemoryStore())
    model = FunctionModel(lambda r: "ok")
    first = await runtime.compose(agent="main", model=model)
    second = await runtime.compose(agent="main", model=model)
    assert first.tools is second.tools
    assert listing.calls == 2  # listed each compose: the source decides what is current
    listing.tools = (tool("a"), tool("b"))
    third = await runtime.compose(agent="main", model=model)
    assert third.tools.names() == ["a", "b"]
    assert first.tools.names() == ["a"]  # a composed agent keeps its list for its session


async def test_the_tools_a_source_lists_are_called_by_the_model(tether_kernel):
    listing = Listing("live", tool("lookup", "found it"))
    kernel = kernel_with(tether_kernel, Sources(), Sources(listing))
    runtime = Runtime(kernel, MemoryStore())

    def script(request):
        if request.messages[-1].role == "tool":
            return request.messages[-1].content
        call = ToolCall(id="c1", name="lookup", arguments={})
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")

    agent = await runtime.compose(agent="main", model=FunctionModel(script))
    await runtime.run_session(agent, ["find"])
    assert agent.messages[-1].content == "found it"
    assert [t.name for t in (await agent.loop.preview(None))[0].tools] == ["lookup"]


async def test_sources_are_listed_concurrently(tether_kernel):
    first, second = Listing("first", tool("a")), Listing("second", tool("b"))
    # The first waits until the second is being listed: one after the other would hang.
    first.gate = anyio.Event()
    second.opens = first.gate
    kernel = kernel_with(tether_kernel, Sources(first, second), Sources())
    with anyio.fail_after(scaled(10)):
        agent = await Runtime(kernel, MemoryStore()).compose(
            agent="main", model=FunctionModel(lambda r: "ok")
        )
    assert agent.tools.names() == ["a", "b"]


async def test_two_tools_of_one_name_in_one_layer_fail_the_compose(tether_kernel):
    kernel = kernel_with(
        tether_kernel, Sources(Listing("one", tool("dup")), Listing("two", tool("dup"))), Sources()
    )
    store = MemoryStore()
    with pytest.raises(AgentError) as caught:
        await Runtime(kernel, store).compose(agent="main", model=FunctionModel(lambda r: "ok"))
    assert caught.value.code == ErrorCode.TOOL_INVALID
    assert 'outer (one)" and "outer (two)"' in str(caught.value)
    assert await store.sessions() == []  # no session for an agent that was not made


async def test_a_source_that_fails_is_named_and_leaves_no_session(tether_kernel):
    broken = Listing("flaky", tool("a"))
    broken.failure = ValueError("server said no")
    kernel = kernel_with(tether_kernel, Sources(), Sources(broken))
    store = MemoryStore()
    with pytest.raises(AgentError) as caught:
        await Runtime(kernel, store).compose(agent="main", model=FunctionModel(lambda r: "ok"))
    assert caught.value.code == ErrorCode.TOOL_SOURCE_FAILED
    assert str(caught.value).startswith(
        'tool source "flaky" of plugin "inner" could not list its tools: ValueError: server said no'
    )
    assert str(caught.value).endswith("[TOOL_SOURCE_FAILED]")
    assert await store.sessions() == []
    # A tether error of the source's own passes as it is.
    broken.failure = SkillError(ErrorCode.SKILL_INVALID, "its own words")
    with pytest.raises(SkillError, match="its own words"):
        await Runtime(kernel, store).compose(agent="main", model=FunctionModel(lambda r: "ok"))


@pytest.mark.parametrize("listed", [None, "abc", (1, 2)])
async def test_a_source_that_lists_something_else_breaks_the_contract(tether_kernel, listed):
    listing = Listing("odd")
    listing.tools = listed  # type: ignore[assignment]
    kernel = kernel_with(tether_kernel, Sources(listing), Sources())
    with pytest.raises(PluginError) as caught:
        await Runtime(kernel, MemoryStore()).compose(
            agent="main", model=FunctionModel(lambda r: "ok")
        )
    assert caught.value.code == ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert 'tool source "odd" of plugin "outer" listed' in str(caught.value)


async def test_eager_sources_are_listed_when_the_runtime_opens(tether_kernel):
    eager, lazy = Listing("eager", tool("a"), eager=True), Listing("lazy", tool("b"))
    failing = Listing("failing", tool("c"), eager=True)
    failing.failure = ValueError("not yet")
    eager.opens = anyio.Event()
    kernel = kernel_with(tether_kernel, Sources(eager, lazy), Sources(failing))
    runtime = Runtime(kernel)
    assert [source.name for _, source in runtime.tool_catalog.eager_sources()] == [
        "eager",
        "failing",
    ]
    async with Runtime.open(kernel, MemoryStore()) as opened:
        with anyio.fail_after(scaled(10)):
            await eager.opens.wait()
        assert (eager.calls, lazy.calls) == (1, 0)
        # The eager failure waits for the compose that needs the tools.
        with pytest.raises(AgentError, match="not yet"):
            await opened.compose(agent="main", model=FunctionModel(lambda r: "ok"))


async def test_a_sessions_own_sources_form_the_nearest_layer(tether_kernel):
    """``compose(tool_sources=...)`` (an ACP client's MCP servers): a layer of their own,
    nearest, so one of their tools hides a profile tool of the same name, whatever layer the
    profile's is in; the list is the session's alone (not kept for the next compose)."""
    profile_source = Listing("profile", tool("shared", "profile"), tool("theirs"))
    kernel = tether_kernel(
        '[tether]\nplugins = ["outer"]\nstore = "memory"\n', {"outer": Sources(profile_source)}
    )
    runtime = Runtime(kernel, MemoryStore())
    own = Listing("client", tool("shared", "client"))
    model = FunctionModel(lambda r: "ok")
    agent = await runtime.compose(model=model, tool_sources=[own.source])
    assert agent.tools.names() == ["shared", "theirs"]
    shared = agent.tools.get("shared")
    assert shared is not None
    assert await shared.run({}, None) == "client"  # type: ignore[arg-type]
    plain = await runtime.compose(model=model)
    shared = plain.tools.get("shared")
    assert shared is not None
    assert await shared.run({}, None) == "profile"  # type: ignore[arg-type]
