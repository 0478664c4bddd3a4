"""``Runtime.hold``: the one way a process hosts a session (real SQLite stores, function models).

Entering enters the agent (lease, posted mail, repair) and recovers its continuable children
when asked; while held, mail other processes post runs; leaving releases the lease and closes a
closable model, also when the block raised; a second host is refused by the lease.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

import tether_spawn
import tether_subagent_tools
from tether.errors import ErrorCode, StoreError, SubagentError
from tether.models import ClosableModel, FunctionModel, ModelRequest
from tether.runtime import HeldSession, Runtime
from tether.store import (
    AssistantMessage,
    Event,
    InboxAccepted,
    MessageSource,
    SQLiteStore,
    TurnEnded,
    UserMessage,
)
from tether.testing import log_problems, make_kernel, scaled, tree_problems, write_profile

from ..processes import kill_at_ready

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["spawn", "subagent"]

[agent.main]
model = "scripted:none.toml"
"""
PLUGINS = {"spawn": tether_spawn, "subagent": tether_subagent_tools.SubagentToolsPlugin}
CRASH_SCRIPT = Path(__file__).parents[1] / "subagents" / "crash_parent.py"
TIMEOUT = scaled(60.0)


class ClosableAnswers(FunctionModel):
    """A function model that holds something to release: counts its ``aclose`` calls."""

    def __init__(self, answer: str = "answered") -> None:
        super().__init__(lambda request: answer)
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


@pytest.fixture
def kernel(tether_kernel):
    return tether_kernel(PROFILE, PLUGINS)


async def events(store, session_id):
    return [stored.event for stored in await store.events(session_id)]


def test_a_model_with_aclose_is_closable_and_a_function_model_is_not():
    assert isinstance(ClosableAnswers(), ClosableModel)
    assert not isinstance(FunctionModel(lambda request: "x"), ClosableModel)


async def test_hold_serves_prompts_settles_and_closes_the_model(kernel, tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        runtime = Runtime(kernel, store)
        model = ClosableAnswers()
        agent = await runtime.compose(model=model)
        async with runtime.hold(agent) as held:
            assert isinstance(held, HeldSession)
            assert held.agent is agent
            assert held.session_id == agent.session_id
            assert runtime.live_agents == {agent.session_id: agent}  # registered
            assert (await store.holder(agent.session_id)) is not None  # leased
            assert await held.run(["one", "two"]) == "completed"
            assert model.closed == 0  # open while held
        assert runtime.live_agents == {}
        assert await store.holder(agent.session_id) is None  # the lease went back
        assert model.closed == 1
        log = await events(store, agent.session_id)
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["one", "two"]
        assert log_problems(log) == []
    finally:
        await store.aclose()


async def test_the_model_is_closed_when_the_block_raises_and_the_error_comes_out_unwrapped(
    kernel, tmp_path
):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        runtime = Runtime(kernel, store)
        model = ClosableAnswers()
        agent = await runtime.compose(model=model)

        async def fail_while_held() -> None:
            async with runtime.hold(agent) as held:
                await held.agent.run("hello")
                raise ValueError("the block failed")

        with pytest.raises(ValueError, match="the block failed"):
            await fail_while_held()
        assert model.closed == 1
        assert runtime.live_agents == {}
        assert await store.holder(agent.session_id) is None
        assert log_problems(await events(store, agent.session_id)) == []
    finally:
        await store.aclose()


async def test_close_model_false_leaves_the_model_open(kernel, tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        runtime = Runtime(kernel, store)
        model = ClosableAnswers()
        agent = await runtime.compose(model=model)
        assert await runtime.run_session(agent, ["hi"], close_model=False) == "completed"
        assert model.closed == 0
        assert await runtime.run_session(agent, ["again"]) == "completed"  # entered again
        assert model.closed == 1
    finally:
        await store.aclose()


@pytest.mark.parametrize("open_runtime", [False, True], ids=["agent-keeper", "runtime-keeper"])
async def test_mail_posted_while_held_is_delivered_and_run(kernel, tmp_path, open_runtime):
    # Another process posts to the session while it is held (`tether sessions send` does):
    # the keeper (the agent's own, or the open runtime's) delivers it and it runs here.
    path = tmp_path / "s.db"
    store, other = SQLiteStore(path), SQLiteStore(path)

    async def hold_and_post(runtime: Runtime) -> list[Event]:
        agent = await runtime.compose(
            model=FunctionModel(lambda r: f"seen {r.messages[-1].content}")
        )
        async with runtime.hold(agent) as held:
            await held.run(["first"])
            await other.post(
                agent.session_id,
                InboxAccepted(message_id="msg_posted", content="posted", source=MessageSource()),
            )
            with anyio.fail_after(scaled(10)):
                while agent.turns < 2:
                    await anyio.sleep(0.01)
            await held.settle()
        return await events(store, agent.session_id)

    try:
        if open_runtime:
            async with Runtime.open(kernel, store) as runtime:
                log = await hold_and_post(runtime)
        else:
            log = await hold_and_post(Runtime(kernel, store))
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["first", "posted"]
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed"] * 2
        assert log_problems(log) == []
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_second_host_is_refused_by_the_lease_with_a_clear_error(kernel, tmp_path):
    path = tmp_path / "s.db"
    store, other = SQLiteStore(path), SQLiteStore(path)
    try:
        first = Runtime(kernel, store)
        agent = await first.compose(model=ClosableAnswers())
        async with first.hold(agent) as held:
            # Another host (its own store: another process would be the same) is refused.
            second = Runtime(kernel, other)
            model = ClosableAnswers()
            rival = await second.compose(session_id=agent.session_id, model=model)
            with pytest.raises(StoreError) as caught:
                async with second.hold(rival):
                    pytest.fail("a second host entered a held session")
            assert caught.value.code is ErrorCode.SESSION_BUSY
            assert f'session "{agent.session_id}" is driven by another store' in str(caught.value)
            assert "nothing was written" in str(caught.value)
            assert model.closed == 1  # the refused host's model is closed too
            assert second.live_agents == {}
            # The same session held twice in one runtime is refused before it is touched.
            twice = await first.compose(session_id=agent.session_id, model=ClosableAnswers())
            with pytest.raises(StoreError) as conflict:
                async with first.hold(twice):
                    pytest.fail("one runtime held a session twice")
            assert conflict.value.code is ErrorCode.SESSION_CONFLICT
            assert "already open in this process" in str(conflict.value)
            # The first host is untouched: it still drives the session.
            assert await held.run(["still mine"]) == "completed"
        async with Runtime(kernel, other).hold(rival) as taken:  # released: now it may
            assert await taken.run(["yours now"]) == "completed"
        log = await events(store, agent.session_id)
        assert [e.content for e in log if isinstance(e, UserMessage)] == [
            "still mine",
            "yours now",
        ]
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_stop_scope_cuts_the_block_and_the_session_is_left_whole(kernel, tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        runtime = Runtime(kernel, store)
        started = anyio.Event()

        async def slow(request: ModelRequest) -> str:
            started.set()
            await anyio.sleep(3600)
            return "never"

        agent = await runtime.compose(model=FunctionModel(slow))
        stop = anyio.CancelScope()
        async with runtime.hold(agent, stop=stop) as held:
            await held.send("wait forever")
            await started.wait()
            stop.cancel()
            await held.settle()
            pytest.fail("the stop scope did not cut the block")
        assert stop.cancel_called  # the code after the block goes on
        log = await events(store, agent.session_id)
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["aborted"]
        assert log_problems(log) == []
        assert await store.holder(agent.session_id) is None
    finally:
        await store.aclose()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
async def test_hold_with_recover_picks_up_a_crashed_continuable_child_and_settles(tmp_path):
    # A real process starts a continuable child whose first turn never ends, sends it two
    # follow-ups and is killed; holding its parent here with recover=True runs them.
    db = tmp_path / "s.db"
    command = [sys.executable, str(CRASH_SCRIPT), "first", str(db)]
    parent_id, child_id, *_ = kill_at_ready(command, TIMEOUT)

    def answer(request: ModelRequest) -> str:
        last = request.messages[-1].content
        if request.session_label == "crash child":
            return f"child answer to {last}"
        return "parent noted the notice"

    profile = write_profile(
        db.parent / "profile", PROFILE + '[plugin.subagent]\nbackground = "continuable"\n'
    )
    store = SQLiteStore(db)
    runtime = Runtime(make_kernel(profile, PLUGINS), store)
    try:
        parent = await runtime.compose(model=FunctionModel(answer), session_id=parent_id)
        with anyio.fail_after(TIMEOUT):
            async with runtime.hold(parent, recover=True) as held:
                await held.settle()
        child_log = await events(store, child_id)
        answers = [e.stop_reason for e in child_log if isinstance(e, TurnEnded)]
        assert answers[-2:] == ["completed", "completed"]  # both follow-ups ran
        said = [e.content for e in child_log if isinstance(e, UserMessage)]
        assert said[-2:] == ["follow-up one", "follow-up two"]
        notices = [
            e
            for e in await events(store, parent_id)
            if isinstance(e, UserMessage) and e.source.kind == "notice"
        ]
        assert notices  # the parent heard its child settle, in a turn of its own
        assert await tree_problems(store, parent_id) == {}
        assert runtime.live_agents == {}
    finally:
        await store.aclose()


SEND_PROFILE = """\
[tether]
plugins = ["spawn", "subagent"]

[plugin.subagent]
background = "continuable"

[agent.main]
model = "scripted:script.toml"
"""
# The root delegates a continuable task and answers; its child answers once, then again when
# a person continues it (--model scripted:more.toml, as `tether sessions send --model`).
SEND_SCRIPT = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[steps]]
expect = 'status="completed"'
text = "The subagent is done."

[[tasks.research.steps]]
text = "first findings"
"""
SEND_MORE = """\
[[tasks.research.steps]]
expect = "dig deeper"
text = "deeper findings"
"""


async def test_runtime_send_holds_the_root_and_runs_a_persons_message_to_its_child(tmp_path):
    # Nobody drives the tree: the sender holds the root here, which hosts the child and runs
    # the message; what the turn says reaches `hear`.
    profile = write_profile(tmp_path, SEND_PROFILE)
    (tmp_path / "script.toml").write_text(SEND_SCRIPT)
    (tmp_path / "more.toml").write_text(SEND_MORE)
    kernel = make_kernel(profile, PLUGINS)
    store = SQLiteStore(tmp_path / "s.db")
    try:
        runtime = Runtime(kernel, store)
        root = await runtime.compose()
        assert await runtime.run_session(root, ["go"]) == "completed"
        (child,) = await store.sessions(parent=root.session_id)
        with pytest.raises(SubagentError) as caught:  # a root nobody drives: run it instead
            await Runtime(kernel, store).send(root.session_id, "hello").deliver()
        assert caught.value.code is ErrorCode.NOT_RESUMABLE
        assert await store.mailbox(root.session_id) == []  # nothing was posted
        heard: list[Event] = []
        sent = Runtime(kernel, store).send(
            child.id, "dig deeper", model=f"scripted:{tmp_path / 'more.toml'}", hear=heard.append
        )
        assert (await sent.check()).id == child.id
        assert await sent.deliver() == "completed"
        assert sent.handed_to is None
        assert not sent.left_queued
        assert not sent.stopped_waiting
        said = [e.content for e in heard if isinstance(e, AssistantMessage)]
        assert said == ["deeper findings"]
        assert isinstance(heard[-1], TurnEnded)
        assert await store.holder(root.session_id) is None  # the root was left
        assert await tree_problems(store, root.session_id) == {}
    finally:
        await store.aclose()
