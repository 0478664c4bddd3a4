"""SubagentRuntime: providers by name, checked starts, lifecycle events, lineage queries."""

from __future__ import annotations

import anyio
import pytest

import tether
from tether.agents import ToolFilter
from tether.errors import CapabilityError, ErrorCode, PluginError, SubagentError
from tether.models import FunctionModel
from tether.runtime import compose_agent
from tether.store import MemoryStore
from tether.subagents import (
    SubagentCapabilities,
    SubagentEvent,
    SubagentRuntime,
    SubagentStartRequest,
)
from tether.testing import scaled
from tether.testing.subagents import LimitedProvider
from tether_spawn import SpawnProvider

from .conftest import echo_child, make_parent

pytestmark = pytest.mark.anyio


class FailingProvider(LimitedProvider):
    """Its start fails after an await, as a provider whose backend is down would."""

    async def start(self, request):
        await anyio.sleep(0)
        raise RuntimeError("backend unreachable")


def recorder(runtime: SubagentRuntime) -> list[SubagentEvent]:
    events: list[SubagentEvent] = []
    runtime.on_event(events.append)
    return events


@pytest.fixture
async def parent(runtime):
    return await make_parent(runtime, FunctionModel(echo_child))


def test_registers_lists_looks_up_and_removes_providers():
    runtime = SubagentRuntime()
    events = recorder(runtime)
    spawn, limited = SpawnProvider(), LimitedProvider()
    remove_spawn = runtime.register_provider(spawn)
    runtime.register_provider(limited)
    assert runtime.providers() == [spawn, limited]
    assert runtime.get("spawn") is spawn
    remove_spawn()
    remove_spawn()  # idempotent
    assert runtime.get("spawn") is None
    assert [(e.kind, e.provider) for e in events] == [
        ("provider-added", "spawn"),
        ("provider-added", "limited"),
        ("provider-removed", "spawn"),
    ]


def test_rejects_a_duplicate_provider_name():
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    with pytest.raises(SubagentError) as caught:
        runtime.register_provider(LimitedProvider("spawn"))
    assert caught.value.code == ErrorCode.DUPLICATE_PROVIDER
    assert 'a subagent provider named "spawn" is already registered' in str(caught.value)


def test_rolls_registration_back_when_a_provider_added_listener_fails():
    runtime = SubagentRuntime()

    def refuse(event):
        if event.kind == "provider-added":
            raise RuntimeError("listener refuses")

    runtime.on_event(refuse)
    with pytest.raises(RuntimeError, match="listener refuses"):
        runtime.register_provider(SpawnProvider())
    assert runtime.get("spawn") is None


def test_kernel_registers_every_plugin_provider_by_name(build_runtime):
    runtime = build_runtime()
    assert [p.name for p in runtime.subagents.providers()] == ["spawn", "fork"]
    assert runtime.subagents is runtime.subagents


def test_kernel_names_the_plugin_of_a_duplicate_provider(build_runtime):
    class Impostor:
        """Offers, under its provider's own name, a second provider called "spawn"."""

        @tether.hookimpl
        def tether_subagent_providers(self):
            return [LimitedProvider("spawn")]

        @tether.hookimpl
        def tether_offers(self):
            return [tether.Offer(kind="subagent provider", name="spawn")]

    runtime = build_runtime(extra_plugins={"impostor": Impostor()})
    with pytest.raises(SubagentError) as caught:
        runtime.subagents  # noqa: B018
    assert caught.value.code == ErrorCode.DUPLICATE_PROVIDER
    assert 'plugin "impostor"' in str(caught.value)


def test_an_offer_named_unlike_the_provider_it_hands_over_fails_at_load(build_runtime):
    with pytest.raises(PluginError) as caught:
        build_runtime(extra_plugins={"impostor": LimitedProvider("spawn")})
    assert caught.value.code == ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert str(caught.value) == (
        'plugin "impostor" (inline plugin) does not keep its offer of subagent provider '
        '"impostor": its tether_subagent_providers hands over no provider named "impostor" (it '
        'hands over: "spawn"); give the provider the offered name, or name the offer after the '
        "provider (tether.Offer(name=...)) [PLUGIN_CONTRACT_VIOLATION]"
    )


async def test_start_rejects_an_absent_provider_name(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await runtime.start("remote", SubagentStartRequest(prompt="x", parent=parent))
    assert caught.value.code == ErrorCode.NO_PROVIDER
    assert "registered providers: spawn" in str(caught.value)


async def test_start_reports_the_first_missing_capability_in_order(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(LimitedProvider(capabilities=SubagentCapabilities(persona=True)))
    request = SubagentStartRequest(
        prompt="x",
        parent=parent,
        persona="terse",
        tool_filter=ToolFilter(deny=frozenset({"subagent"})),
        max_depth=3,
    )
    async with parent:
        with pytest.raises(CapabilityError) as caught:
            await runtime.start("limited", request)
    assert caught.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
    assert 'subagent provider "limited" does not support the "depth_limit" capability' in str(
        caught.value
    )


async def test_start_checks_capabilities_before_depth_and_depth_before_schema(parent):
    runtime = SubagentRuntime()
    limited = LimitedProvider(capabilities=SubagentCapabilities(depth_limit=True))
    runtime.register_provider(limited)
    runtime.register_provider(SpawnProvider())
    bad_schema = {"type": "array"}
    async with parent:
        with pytest.raises(CapabilityError) as caught:  # schema unsupported beats depth
            await runtime.start(
                "limited",
                SubagentStartRequest(
                    prompt="x", parent=parent, max_depth=0, output_schema=bad_schema
                ),
            )
        assert caught.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
        with pytest.raises(SubagentError) as caught:  # depth beats an invalid schema
            await runtime.start(
                "spawn",
                SubagentStartRequest(
                    prompt="x", parent=parent, max_depth=0, output_schema=bad_schema
                ),
            )
        assert caught.value.code == ErrorCode.SUBAGENT_DEPTH_EXCEEDED
        with pytest.raises(SubagentError) as caught:
            await runtime.start(
                "spawn", SubagentStartRequest(prompt="x", parent=parent, output_schema=bad_schema)
            )
        assert caught.value.code == ErrorCode.INVALID_OUTPUT_SCHEMA
    assert limited.started == []


async def test_a_rejected_start_emits_no_events_and_creates_no_child(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    events = recorder(runtime)
    async with parent:
        with pytest.raises(SubagentError):
            await runtime.start(
                "spawn", SubagentStartRequest(prompt="x", parent=parent, max_depth=0)
            )
    assert events == []
    assert await parent.store.sessions(parent=parent.session_id) == []


async def test_emits_no_run_lifecycle_when_provider_startup_rejects(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(FailingProvider("down"))
    events = recorder(runtime)
    async with parent:
        with pytest.raises(RuntimeError, match="backend unreachable"):
            await runtime.start("down", SubagentStartRequest(prompt="x", parent=parent))
    assert events == []


async def test_start_precedes_end_with_one_pair_per_run(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    events = recorder(runtime)
    async with parent:
        for _ in range(2):
            run = await runtime.start("spawn", SubagentStartRequest(prompt="x", parent=parent))
            assert [e.kind for e in events][-1] == "start"
            await run.result()
            await run.result()
            await run.dispose()
            await run.dispose()
    starts = [e for e in events if e.kind == "start"]
    ends = [e for e in events if e.kind == "end"]
    assert [e.kind for e in events] == ["start", "end", "start", "end"]
    assert [e.run_id for e in starts] == [e.run_id for e in ends]
    assert len({e.run_id for e in starts}) == 2
    assert all(e.provider == "spawn" and e.local for e in events)
    assert all(e.parent_id == parent.session_id for e in events)
    assert [e.stop_reason for e in ends] == ["completed", "completed"]
    assert [e.child_id for e in starts] == [e.child_id for e in ends]


async def test_a_run_disposed_before_its_result_ends_aborted(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    events = recorder(runtime)
    async with parent:
        run = await runtime.start("spawn", SubagentStartRequest(prompt="x", parent=parent))
        await run.dispose()
    assert [(e.kind, e.stop_reason) for e in events] == [("start", None), ("end", "aborted")]


async def test_lifecycle_listener_failures_are_contained(parent, caplog):
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())

    def explode(event):
        raise RuntimeError("observer bug")

    runtime.on_event(explode)
    events = recorder(runtime)
    async with parent:
        run = await runtime.start("spawn", SubagentStartRequest(prompt="x", parent=parent))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed"
    assert [e.kind for e in events] == ["start", "end"]
    assert "subagent event listener failed" in caplog.text


async def test_a_cancel_signal_before_start_starts_nothing(parent):
    runtime = SubagentRuntime()
    runtime.register_provider(spawn := LimitedProvider())
    events = recorder(runtime)
    request = SubagentStartRequest(prompt="x", parent=parent)
    request.cancel.cancel("user pressed stop")
    async with parent:
        with pytest.raises(SubagentError) as caught:
            await runtime.start("limited", request)
    assert caught.value.code == ErrorCode.SUBAGENT_CANCELLED
    assert "user pressed stop" in str(caught.value)
    assert spawn.started == []
    assert events == []


async def test_a_cancel_signal_after_start_aborts_the_child(runtime):
    started = anyio.Event()

    async def model(request):
        if request.messages[-1].content == "slow":
            started.set()
            await anyio.sleep_forever()
        return "ok"

    parent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(model))
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    async with parent:
        request = SubagentStartRequest(prompt="slow", parent=parent)
        run = await runtime.start("spawn", request)
        await started.wait()
        request.cancel.cancel()
        with anyio.fail_after(scaled(5)):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "aborted"
    assert run.local_agent is not None
    assert run.local_agent.status == "idle"


async def test_lists_children_and_descendants_from_storage(runtime):
    store = MemoryStore()
    parent = await compose_agent(runtime, store, model=FunctionModel(echo_child))
    runtime = SubagentRuntime(store)
    runtime.register_provider(SpawnProvider())
    async with parent:
        first = await runtime.start(
            "spawn", SubagentStartRequest(prompt="a", parent=parent, label="one")
        )
        await first.result()
        second = await runtime.start("spawn", SubagentStartRequest(prompt="b", parent=parent))
        await second.result()
        child = first.local_agent
        assert child is not None
        # The child is live until disposed: its own delegation makes a grandchild of the root.
        grandchild = await runtime.start("spawn", SubagentStartRequest(prompt="c", parent=child))
        await grandchild.result()
        await grandchild.dispose()
        await first.dispose()
        await second.dispose()
    children = await runtime.list_children(parent.session_id)
    assert {c.id for c in children} == {first.id, second.id}
    assert all(c.origin == "subagent" for c in children)
    descendants = await runtime.list_descendants(parent.session_id)
    assert {d.id for d in descendants} == {first.id, second.id, grandchild.id}
    by_id = {d.id: d for d in descendants}
    assert by_id[grandchild.id].parent_session == first.id
    assert by_id[grandchild.id].delegation_depth == 2
    assert await runtime.list_children(grandchild.id) == []


async def test_lineage_queries_need_a_store():
    with pytest.raises(SubagentError) as caught:
        await SubagentRuntime().list_children("ses_x")
    assert caught.value.code == ErrorCode.SUBAGENT_INVALID


def test_subagent_error_is_a_tether_error():
    error = SubagentError(ErrorCode.NO_PROVIDER, "no provider", remedy="add one")
    assert isinstance(error, tether.TetherError)
    assert str(error) == "no provider; add one [NO_PROVIDER]"
