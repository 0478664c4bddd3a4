"""Children on a child host: the runtime's one-shot children run where its ``child_host``
drives them (a cluster's worker; here a second runtime with a store of its own on the same
SQLite file, :class:`tether.testing.RuntimeSessionHost`), and behave as local ones.

spawn, fork and the specialists start children with :func:`tether.subagents.start_child`: the
provider conformance suite runs through the host, and the delegation tools (foreground and
background) get the same results and notices as with local children.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from tether.agents import Agent
from tether.loading import SUBAGENT_PROVIDER, Offer
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.subagents import declared_capabilities
from tether.subagents.local import HostedChildRun
from tether.testing import RuntimeSessionHost, log_problems, make_kernel, scaled, write_profile
from tether.testing.subagent_provider_conformance import SubagentProviderConformance
from tether_fork import ForkProvider
from tether_spawn import SpawnProvider

pytestmark = pytest.mark.anyio

_PROFILE = """
[tether]
plugins = []
[agent.main]
model = "function:tether.testing.subagent_provider_conformance:conformance_model"
"""


class _Hosted:
    """Two runtimes on one SQLite file, each with its own store (its own leases): the
    parent's, whose children the other one drives."""

    def __init__(self, parent: Runtime, host: RuntimeSessionHost) -> None:
        self.parent = parent
        self.host = host

    async def make_parent(self) -> Agent:
        return await self.parent.compose()


@pytest.fixture
async def hosted(tmp_path: Path) -> AsyncIterator[_Hosted]:
    kernel = make_kernel(write_profile(tmp_path, _PROFILE))
    here = SQLiteStore(tmp_path / "sessions.db")
    there = SQLiteStore(tmp_path / "sessions.db")
    try:
        async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
            host = RuntimeSessionHost(driver)
            runtime.child_host = host
            yield _Hosted(runtime, host)
    finally:
        await here.aclose()
        await there.aclose()


class _OnAHost(SubagentProviderConformance):
    @pytest.fixture
    def make_parent(self, hosted: _Hosted):  # pyright: ignore[reportIncompatibleMethodOverride]
        return hosted.make_parent

    async def test_the_child_runs_on_the_host(self, provider, runtime, hosted: _Hosted) -> None:
        from tether.subagents import SubagentStartRequest

        parent = await hosted.make_parent()
        async with parent:
            run = await runtime.start(
                provider.name, SubagentStartRequest(prompt="hello", parent=parent)
            )
            try:
                with anyio.fail_after(scaled(10)):
                    result = await run.result()
            finally:
                await run.dispose()
            assert isinstance(run._run, HostedChildRun)  # pyright: ignore[reportAttributeAccessIssue]
            assert run.local_agent is None
            header = await parent.store.header(run.id)
            assert header.parent_session == parent.session_id
            assert header.origin == "subagent"
            assert header.delegation_depth == parent.header.delegation_depth + 1
            assert run.id in hosted.host.drives
            assert run.id not in hosted.parent.live_agents
            log = [s.event for s in await parent.store.events(run.id)]
        assert result.output == "conformance answer"
        assert log_problems(log) == []


class TestSpawnOnAHost(_OnAHost):
    @pytest.fixture
    def provider(self):
        return SpawnProvider()

    @pytest.fixture
    def offer(self):
        return Offer(kind=SUBAGENT_PROVIDER, capabilities=declared_capabilities(SpawnProvider()))


class TestForkOnAHost(_OnAHost):
    @pytest.fixture
    def provider(self):
        return ForkProvider()


# ------------------------------------------------------------------ the delegation tool

_TOOL_PROFILE = """
[tether]
plugins = ["spawn", "fork", "subagent"]
[plugin.subagent]
provider = "{provider}"
[agent.main]
model = "function:tests.subagents.test_hosted_children:brain"
"""


def brain(request):  # the model of the profile above: the parent and its children
    from .conftest import delegate, is_child

    message = request.messages[-1]
    if is_child(request):
        return f"child answer to {message.content}"
    if message.role == "tool":
        return f"parent saw: {message.content}"
    if any(m.role == "tool" for m in request.messages):
        return "noted"  # a task's result
    if message.content == "three at once":
        return _parallel(delegate)
    return delegate("child task", background=message.content == "in the background")


def _parallel(delegate):
    from tether.models import ModelResponse

    calls = [delegate(f"task {n}", call_id=f"d{n}").tool_calls[0] for n in range(3)]
    return ModelResponse(tool_calls=tuple(calls), finish_reason="tool_calls")


@pytest.fixture
async def tool_runtimes(tmp_path: Path):
    import tether_fork
    import tether_spawn
    import tether_subagent_tools

    plugins = {
        "spawn": tether_spawn,
        "fork": tether_fork,
        "subagent": tether_subagent_tools.SubagentToolsPlugin,
    }
    stores: list[SQLiteStore] = []

    async def open_for(provider: str):
        folder = tmp_path / provider
        folder.mkdir()
        kernel = make_kernel(
            write_profile(folder, _TOOL_PROFILE.format(provider=provider)), plugins
        )
        here, there = SQLiteStore(folder / "s.db"), SQLiteStore(folder / "s.db")
        stores.extend((here, there))
        return kernel, here, there

    try:
        yield open_for
    finally:
        for store in stores:
            await store.aclose()


@pytest.mark.parametrize("provider", ["spawn", "fork"])
async def test_a_foreground_delegation_gets_the_hosted_childs_answer(tool_runtimes, provider):
    kernel, here, there = await tool_runtimes(provider)
    async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
        host = RuntimeSessionHost(driver)
        runtime.child_host = host
        parent = await runtime.compose()
        async with parent:
            with anyio.fail_after(scaled(20)):
                await parent.run("go")
        (child,) = await here.sessions(parent=parent.session_id)
        assert host.drives == [child.id]
        assert [m.content for m in parent.messages if m.role == "tool"] == [
            "child answer to child task"
        ]
        assert parent.messages[-1].content == "parent saw: child answer to child task"
        for session in (parent.session_id, child.id):
            assert log_problems([s.event for s in await here.events(session)]) == []


async def test_a_background_delegation_notifies_the_parent_when_the_hosted_child_ends(
    tool_runtimes,
):
    kernel, here, there = await tool_runtimes("spawn")
    async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
        runtime.child_host = RuntimeSessionHost(driver)
        parent = await runtime.compose()
        async with parent:
            with anyio.fail_after(scaled(20)):
                await parent.run("in the background")
                await runtime.settle(parent)  # the notice's turn too
        (child,) = await here.sessions(parent=parent.session_id)
    notices = [m.content for m in parent.messages if m.content.startswith("<task_result")]
    assert notices == [
        f'<task_result id="{child.id}" tool="subagent" status="completed">'
        "child answer to child task</task_result>"
    ]
    assert parent.messages[-1].content == "noted"


async def test_parallel_delegations_run_side_by_side_on_the_host(tool_runtimes):
    kernel, here, there = await tool_runtimes("spawn")
    async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
        host = RuntimeSessionHost(driver)
        runtime.child_host = host
        parent = await runtime.compose()
        async with parent:
            with anyio.fail_after(scaled(20)):
                await parent.run("three at once")
        children = await here.sessions(parent=parent.session_id)
    assert sorted(host.drives) == sorted(c.id for c in children)
    assert len(children) == 3
    assert sorted(m.content for m in parent.messages if m.role == "tool") == [
        f"child answer to task {n}" for n in range(3)
    ]


class _Unreachable:
    """A session host whose cluster cannot be reached."""

    name = "unreachable"

    async def send(
        self, session_id, content, *, agent=None, new=False, message_id=None, trace=None
    ) -> str:
        from tether.errors import ErrorCode, HostError

        raise HostError(ErrorCode.HOST_UNAVAILABLE, "the cluster cannot be reached")

    async def cancel(self, session_id: str) -> None:
        raise AssertionError("nothing was started")

    async def interrupt(self, session_id: str) -> None:
        raise AssertionError("nothing was started")

    async def aclose(self) -> None:
        return None


async def test_a_start_the_host_refuses_raises_and_leaves_no_child(hosted: _Hosted) -> None:
    from tether.errors import ErrorCode, HostError
    from tether.runtime import SessionHost
    from tether.subagents import SubagentStartRequest

    assert isinstance(_Unreachable(), SessionHost)
    hosted.parent.child_host = _Unreachable()
    parent = await hosted.make_parent()
    async with parent:
        with pytest.raises(HostError) as caught:
            await SpawnProvider().start(SubagentStartRequest(prompt="hello", parent=parent))
        assert caught.value.code is ErrorCode.HOST_UNAVAILABLE
        assert await parent.store.sessions(parent=parent.session_id) == []


class _Losing(RuntimeSessionHost):
    """Takes the child and loses it: its session is gone before it runs."""

    async def send(
        self, session_id, content, *, agent=None, new=False, message_id=None, trace=None
    ) -> str:
        await self.store.acquire(session_id)
        await self.store.delete(session_id)
        return message_id or "msg_lost"


async def test_a_background_child_whose_log_cannot_be_read_is_a_failed_task(tool_runtimes):
    kernel, here, there = await tool_runtimes("spawn")
    async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
        runtime.child_host = _Losing(driver)
        parent = await runtime.compose()
        async with parent:
            with anyio.fail_after(scaled(20)):
                await parent.run("in the background")
                (result,) = [m.content for m in parent.messages if m.role == "tool"]
                child = result.split()[2].rstrip(".")
                await runtime.settle(parent)  # the notice's turn too: the parent lives on
    (notice,) = [m.content for m in parent.messages if m.content.startswith("<task_result")]
    assert notice.startswith(f'<task_result id="{child}" tool="subagent" status="failed">')
    assert notice.endswith("[SESSION_NOT_FOUND]</task_result>")
    assert parent.messages[-1].content == "noted"
