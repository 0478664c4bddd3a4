"""The runtime: the live half of tether, on a frozen kernel."""

from __future__ import annotations

import gc

import anyio
import pytest

import tether_spawn
import tether_subagent_tools
from tether.errors import ErrorCode, StoreError
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import RUNTIME_THRESHOLDS, Runtime, compose_agent
from tether.store import (
    InboxAccepted,
    MemoryStore,
    MessageSource,
    SQLiteStore,
    TurnEnded,
    UserMessage,
)
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import log_problems, scaled

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["spawn", "subagent"]

[agent.main]
model = "scripted:none.toml"
"""
PLUGINS = {"spawn": tether_spawn, "subagent": tether_subagent_tools.SubagentToolsPlugin}


@pytest.fixture
def kernel(tether_kernel):
    return tether_kernel(PROFILE, PLUGINS)


def text(answer: str) -> FunctionModel:
    return FunctionModel(lambda request: answer)


async def events(store, session_id):
    return [stored.event for stored in await store.events(session_id)]


def test_the_kernel_is_frozen(kernel):
    with pytest.raises(AttributeError, match="a Kernel is frozen"):
        kernel.permission_host = None
    assert not hasattr(kernel, "live_agents")
    assert not hasattr(kernel, "skills")


async def test_two_runtimes_on_one_kernel_share_nothing_live(kernel):
    first, second = Runtime(kernel, MemoryStore()), Runtime(kernel, MemoryStore())
    assert first.subagents is not second.subagents
    assert first.preset("main") is first.preset("main")  # built once per runtime
    agent = await first.compose(model=text("hi"))
    async with agent:
        assert first.live_agents == {agent.session_id: agent}
        assert second.live_agents == {}
        assert agent.runtime is first
        assert first.kernel is kernel
    assert first.live_agents == {}


async def test_run_session_runs_the_prompts_in_order_and_returns_the_last_stop(kernel):
    store = MemoryStore()
    runtime = Runtime(kernel, store)
    agent = await runtime.compose(model=FunctionModel(lambda r: f"seen {r.messages[-1].content}"))
    stop = await runtime.run_session(agent, ["one", "two"])
    assert stop == "completed"
    said = [m.content for m in agent.messages if m.role == "assistant"]
    assert said == ["seen one", "seen two"]
    assert log_problems(await events(store, agent.session_id)) == []


async def test_run_session_waits_for_continuable_children_to_settle(tether_kernel, tmp_path):
    continuable = PROFILE + '\n[plugin.subagent]\nbackground = "continuable"\n'
    kernel = tether_kernel(continuable, PLUGINS)
    store = SQLiteStore(tmp_path / "s.db")  # continuable children need a durable store
    runtime = Runtime(kernel, store)

    def brain(request: ModelRequest) -> ModelResponse | str:
        last = request.messages[-1]
        if any(m.content.startswith(DELEGATION_NOTE) for m in request.messages):
            return "child done"
        if last.role == "user" and last.content == "go":
            call = ToolCall(id="d1", name="subagent", arguments={"description": "t", "prompt": "x"})
            return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
        return f"parent: {last.content[:40]}"

    agent = await runtime.compose(model=FunctionModel(brain))
    try:
        await runtime.run_session(agent, ["go"])
        await check_settled(store, agent)
    finally:
        await store.aclose()
    assert agent.status == "idle"


async def check_settled(store, agent) -> None:
    # The child's settlement notice gave the parent a turn before run_session returned.
    (child,) = await store.sessions(parent=agent.session_id)
    child_log = await events(store, child.id)
    assert [e.stop_reason for e in child_log if isinstance(e, TurnEnded)] == ["completed"]
    notices = [
        e
        for e in await events(store, agent.session_id)
        if isinstance(e, UserMessage) and e.source.kind == "notice"
    ]
    assert len(notices) == 1


async def test_a_kernel_given_to_compose_agent_gets_a_runtime_of_its_own(kernel):
    one = await compose_agent(kernel, MemoryStore(), model=text("a"))
    two = await compose_agent(kernel, MemoryStore(), model=text("b"))
    assert one.runtime is not None
    assert one.runtime is not two.runtime


async def test_composing_without_any_store_says_so(kernel):
    with pytest.raises(StoreError) as caught:
        await Runtime(kernel).compose(model=text("x"))
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE


async def test_an_open_runtime_keeps_the_stores_sessions_and_delivers_posted_mail(kernel, tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        async with Runtime.open(kernel, store) as runtime:
            assert runtime.keeps(store)
            agent = await runtime.compose(model=FunctionModel(lambda r: "answered"))
            async with agent:
                await agent.run("first")
                # Another process posts to the session (tether sessions send does this).
                await store.post(
                    agent.session_id,
                    InboxAccepted(
                        message_id="msg_posted", content="posted", source=MessageSource()
                    ),
                )
                with anyio.fail_after(scaled(10)):
                    while agent.turns < 2:
                        await anyio.sleep(0.01)
                await agent.when_idle()
        assert not runtime.keeps(store)  # left: the runtime keeps nothing any more
        log = await events(store, agent.session_id)
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["first", "posted"]
        assert log_problems(log) == []
    finally:
        await store.aclose()


async def test_the_blocks_own_exception_leaves_runtime_open_unwrapped(kernel):
    async def body() -> None:
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            runtime.start_soon(anyio.sleep, 30)
            raise ValueError("the body's")

    with pytest.raises(ValueError, match="the body's"):
        await body()


async def test_the_blocks_own_exception_keeps_its_cause(kernel):
    async def body() -> None:
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            runtime.start_soon(anyio.sleep, 30)
            try:
                raise KeyError("inner")
            except KeyError as exc:
                raise ValueError("outer") from exc

    with pytest.raises(ValueError, match="outer") as caught:
        await body()
    assert isinstance(caught.value.__cause__, KeyError)
    assert caught.value.__suppress_context__


async def test_background_work_needs_an_open_runtime(kernel):
    with pytest.raises(RuntimeError, match=r"Runtime\.open"):
        Runtime(kernel).start_soon(anyio.sleep, 1)


async def test_a_caller_cancelled_during_an_inline_turn_aborts_it_and_the_log_stays_whole(
    kernel,
):
    store = MemoryStore()
    started = anyio.Event()

    async def slow(request: ModelRequest) -> str:
        if started.is_set():
            return "fine"  # the next turn, after the aborted one
        started.set()
        await anyio.sleep(30)
        return "never"

    agent = await compose_agent(kernel, store, model=FunctionModel(slow))
    async with agent:
        with anyio.move_on_after(scaled(10)) as scope:
            async with anyio.create_task_group() as group:

                async def ask() -> None:
                    await agent.run("slow one")  # idle: the turn runs in this task

                group.start_soon(ask)
                await started.wait()
                group.cancel_scope.cancel()
        assert not scope.cancelled_caught
        assert agent.status == "idle"
        assert agent.loop.last_stop_reason == "aborted"
        # The agent goes on: the next turn runs.
        assert await agent.run("next") == "completed"
    log = await events(store, agent.session_id)
    assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["aborted", "completed"]
    assert log_problems(log) == []


async def test_run_on_an_idle_agent_stores_its_message_with_the_turns_first_answer(kernel):
    # Nobody is told the message was accepted before run() returns: acceptance, claim and the
    # answer are one commit. A message sent otherwise is accepted before it is acknowledged.
    store = MemoryStore()
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> str:
        seen.append([e.type for e in await events(store, agent.session_id)])
        return "ok"

    agent = await compose_agent(kernel, store, model=FunctionModel(answer))
    async with agent:
        assert await agent.run("inline") == "completed"
        assert seen == [[]]  # nothing of the turn was stored while the model answered
        await agent.followup("queued")
        acknowledged = await events(store, agent.session_id)
        assert isinstance(acknowledged[-1], InboxAccepted)
        assert acknowledged[-1].content == "queued"
        await agent.when_idle()
    log = await events(store, agent.session_id)
    assert [type(e).__name__ for e in log[:7]] == [
        "DescriptorEvent",  # where its workspace is (docs/workspaces.md), with the first commit
        "InboxAccepted",
        "TurnStarted",
        "UserMessage",
        "AssistantMessage",
        "TurnEnded",
        "InboxAccepted",
    ]
    assert log_problems(log) == []


async def test_mail_posted_to_a_session_created_a_moment_ago_runs_once_it_is_open(kernel, tmp_path):
    # Entering a new session reads nothing back; the process's keeper finds the mail.
    store, other = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")
    try:
        async with Runtime.open(kernel, store) as runtime:
            agent = await runtime.compose(model=FunctionModel(lambda r: "answered"))
            await other.post(
                agent.session_id,
                InboxAccepted(message_id="msg_early", content="early", source=MessageSource()),
            )
            async with agent:
                with anyio.fail_after(scaled(10)):
                    while agent.turns < 1:
                        await anyio.sleep(0.01)
                await agent.when_idle()
        log = await events(store, agent.session_id)
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["early"]
        assert log_problems(log) == []
    finally:
        await store.aclose()
        await other.aclose()


@pytest.fixture
def default_collector():
    """The process's thresholds, put back whatever a test does."""
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


async def test_an_open_runtime_tunes_the_collector_and_the_last_one_out_restores_it(
    kernel, default_collector
):
    async with Runtime.open(kernel, MemoryStore()):
        assert gc.get_threshold() == RUNTIME_THRESHOLDS
        async with Runtime.open(kernel, MemoryStore()):
            assert gc.get_threshold() == RUNTIME_THRESHOLDS
        assert gc.get_threshold() == RUNTIME_THRESHOLDS  # the first is still open
    assert gc.get_threshold() == (700, 10, 10)


async def test_thresholds_someone_set_while_it_was_open_stay(kernel, default_collector):
    async with Runtime.open(kernel, MemoryStore()):
        gc.set_threshold(100_000, 5, 5)  # the application's own choice
    assert gc.get_threshold() == (100_000, 5, 5)


async def test_a_runtime_told_not_to_leaves_the_collector_alone(kernel, default_collector):
    async with Runtime.open(kernel, MemoryStore(), tune_collector=False):
        assert gc.get_threshold() == (700, 10, 10)
    gc.disable()
    try:
        async with Runtime.open(kernel, MemoryStore()):
            assert gc.get_threshold() == (700, 10, 10)  # a disabled collector stays as it is
    finally:
        gc.enable()


async def test_mail_posted_to_a_new_session_on_a_store_without_a_keeper_runs_on_entering(kernel):
    # A memory store has no keeper (nobody else can post to it): entering reads the mail.
    store = MemoryStore()
    runtime = Runtime(kernel, store)
    agent = await runtime.compose(model=FunctionModel(lambda r: "answered"))
    await store.post(
        agent.session_id,
        InboxAccepted(message_id="msg_early", content="early", source=MessageSource()),
    )
    async with agent:
        with anyio.fail_after(scaled(10)):
            await agent.when_idle()
    log = await events(store, agent.session_id)
    assert [e.content for e in log if isinstance(e, UserMessage)] == ["early"]
    assert log_problems(log) == []
