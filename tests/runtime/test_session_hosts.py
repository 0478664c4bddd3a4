"""Session hosts (``tether_session_hosts``): a profile whose plugin offers one runs its
sessions there; ``tether run`` hands each prompt to the host and prints the turn from the
session's log in the shared store.

The host here is a real one that runs each message in a runtime of its own, on its own store
object (another lease owner) over the same SQLite file, as a worker process would."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import pytest

import tether
from tether.agents import Agent
from tether.errors import ErrorCode, PluginError
from tether.runtime import Runtime, SessionHost, follow_turn, profile_session_host, profile_store
from tether.store import (
    InboxAccepted,
    InboxDiscarded,
    SessionStore,
    SQLiteStore,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.testing import scaled

pytestmark = pytest.mark.anyio

PROFILE = """\
[tether]
plugins = ["{name}"]
store = "sqlite:sessions.db"

[agent.main]
model = "scripted:script.toml"
"""
SCRIPT = '[[steps]]\ntext = "first answer"\n\n[[steps]]\ntext = "second answer"\n'


class ElsewhereHost:
    """Runs each message on a store object and runtime of its own (another owner), in a task
    of its own: the caller only sees the log. With :attr:`gate` set to an unset event, a
    message is accepted (in the session's mailbox) and not begun until the event is set."""

    name = "elsewhere"

    def __init__(self) -> None:
        self.kernel: tether.Kernel | None = None
        self.sent: list[tuple[str, str, str | None, bool]] = []
        self.group: anyio.abc.TaskGroup | None = None
        self.driving: dict[str, Agent] = {}
        self.interrupted: list[str] = []
        self.cancelled: list[str] = []
        self.gate: anyio.Event | None = None
        self._one_at_a_time = anyio.Lock()  # a drive held for each message: one at a time

    async def send(
        self,
        session_id: str,
        content: str,
        *,
        agent: str | None = None,
        new: bool = False,
        message_id: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        assert self.kernel is not None
        assert self.group is not None
        self.sent.append((session_id, content, agent, new))
        store = profile_store(self.kernel)
        if new:
            from tether.agents import new_header

            await store.create(new_header(session_id=session_id, agent=agent))
            await store.release(session_id)
        message_id = message_id or f"msg_{len(self.sent)}"
        await store.post(session_id, InboxAccepted(message_id=message_id, content=content))
        self.group.start_soon(self._drive, store, session_id)
        return message_id

    async def _drive(self, store: SessionStore, session_id: str) -> None:
        assert self.kernel is not None
        try:
            if self.gate is not None:
                await self.gate.wait()
            async with self._one_at_a_time, Runtime.open(self.kernel, store) as runtime:
                agent = await runtime.compose(session_id=session_id)
                async with runtime.hold(agent) as held:  # as a worker's drive holds it
                    self.driving[session_id] = agent
                    # Whatever reached the log first (the mail, taken on entering, or by the
                    # runtime's keeper before) runs now.
                    await agent.loop.run_parked()
                    await held.settle()
        finally:
            self.driving.pop(session_id, None)
            await store.aclose()

    async def cancel(self, session_id: str) -> None:
        """As a worker's drive does with a cancel: the running turn aborted, what waits
        dropped (``inbox/discarded``)."""
        assert self.kernel is not None
        self.cancelled.append(session_id)
        agent = self.driving.get(session_id)
        if agent is not None:
            await agent.cancel(keep_inbox=False)
            await agent.when_idle()
            return
        store = profile_store(self.kernel)
        try:
            async with self._one_at_a_time, Runtime.open(self.kernel, store) as runtime:
                agent = await runtime.compose(session_id=session_id)
                async with runtime.hold(agent):
                    await agent.cancel(keep_inbox=False)
        finally:
            await store.aclose()

    async def interrupt(self, session_id: str) -> None:
        self.interrupted.append(session_id)
        agent = self.driving.get(session_id)
        if agent is not None:
            agent.interrupt()
            await agent.when_idle()

    async def aclose(self) -> None:
        pass


class HostPlugin:
    def __init__(self, host: object) -> None:
        self.host = host

    @tether.hookimpl
    def tether_session_hosts(self) -> list[object]:
        return [self.host]


async def test_hook_tether_session_hosts_runs_prompts_elsewhere_and_prints_the_log(
    tether_kernel, tmp_path, monkeypatch, capsys
):
    from tether.cli._run import run_on_host

    (tmp_path / "script.toml").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    host = ElsewhereHost()
    kernel = tether_kernel(PROFILE.format(name="far"), {"far": HostPlugin(host)})
    host.kernel = kernel
    assert profile_session_host(kernel) is host
    async with anyio.create_task_group() as group:
        host.group = group
        stop = await run_on_host(host, kernel, None, None, ["hello", "and again"])
    assert stop == "completed"
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["> hello", "first answer", "> and again", "second answer"]
    (session_id,) = [line.split()[1] for line in out if line.startswith("session ")]
    assert [(s, c, new) for s, c, _, new in host.sent] == [
        (session_id, "hello", True),
        (session_id, "and again", False),
    ]
    assert host.sent[0][2] == "main"  # the profile's agent, resolved
    assert host.cancelled == []  # tether run interrupts, never cancels
    store = profile_store(kernel)
    try:
        log = [s.event for s in await store.events(session_id)]
    finally:
        await store.aclose()
    assert [e.content for e in log if isinstance(e, UserMessage)] == ["hello", "and again"]
    assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed"] * 2


async def test_ctrl_c_on_a_host_interrupts_the_running_turn_and_prints_its_end(
    tether_kernel, tmp_path, monkeypatch, capsys
):
    """Ctrl-C while ``tether run`` follows a turn elsewhere: the host is asked to interrupt it,
    the turn ends ``aborted`` (printed from the log), and the prompts not sent are not."""
    from tether.cli._run import run_on_host

    (tmp_path / "script.toml").write_text('[[steps]]\ntext = "too late"\ndelay = 60\n')
    monkeypatch.chdir(tmp_path)
    host = ElsewhereHost()
    kernel = tether_kernel(PROFILE.format(name="far"), {"far": HostPlugin(host)})
    host.kernel = kernel
    stop_scope = anyio.CancelScope()
    with anyio.fail_after(scaled(30)):
        async with anyio.create_task_group() as group:
            host.group = group

            async def press_ctrl_c() -> None:
                while not host.driving:  # the turn runs on the host
                    await anyio.sleep(0.02)
                await anyio.sleep(0.1)
                stop_scope.cancel()

            group.start_soon(press_ctrl_c)
            stop = await run_on_host(
                host, kernel, None, None, ["hello", "never sent"], stop=stop_scope
            )
    assert stop == "aborted"
    out = capsys.readouterr().out.splitlines()
    (session_id,) = [line.split()[1] for line in out if line.startswith("session ")]
    assert host.interrupted == [session_id]
    assert host.cancelled == []  # what waits stays parked
    assert [content for _, content, _, _ in host.sent] == ["hello"]
    store = profile_store(kernel)
    try:
        log = [s.event for s in await store.events(session_id)]
    finally:
        await store.aclose()
    assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["aborted"]


async def test_runtime_follow_sends_to_the_host_and_hands_on_each_event_once(
    tether_kernel, tmp_path, monkeypatch
):
    """``Runtime.follow``: the host runs the turns; the follower hands each event of the log
    to ``hear`` once, in order, but the messages it sent itself, and knows each turn's end."""
    (tmp_path / "script.toml").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    host = ElsewhereHost()
    kernel = tether_kernel(PROFILE.format(name="far"), {"far": HostPlugin(host)})
    host.kernel = kernel
    store = profile_store(kernel)
    heard: list[object] = []
    sent: list[str] = []
    try:
        runtime = Runtime(kernel, store)
        with anyio.fail_after(scaled(30)):
            async with anyio.create_task_group() as group:
                host.group = group
                async with runtime.follow(host, hear=lambda s: heard.append(s.event)) as followed:
                    assert followed.session_id.startswith("ses_")  # chosen before it exists
                    stop = await followed.run(["hello", "and again"], sent=sent.append)
        assert stop == "completed"
        assert sent == ["hello", "and again"]
        assert not followed.parked
        assert not followed.unfinished
        assert [type(e).__name__ for e in heard if isinstance(e, UserMessage)] == []
        assert [e.stop_reason for e in heard if isinstance(e, TurnEnded)] == ["completed"] * 2
        log = [s.event for s in await store.events(followed.session_id)]
        assert len(heard) == len([e for e in log if not isinstance(e, UserMessage)])
        # A stored session is read first: an unknown one fails before anything is sent.
        with pytest.raises(tether.TetherError) as caught:
            async with runtime.follow(host, "ses_0000000000000000"):
                pytest.fail("followed a session that is not in the store")
        assert caught.value.code is ErrorCode.SESSION_NOT_FOUND
        assert len(host.sent) == 2
    finally:
        await store.aclose()


@pytest.mark.parametrize("drop", [False, True])
async def test_followed_interrupt_parks_or_drops_a_message_not_begun(
    tether_kernel, tmp_path, monkeypatch, drop
):
    """``FollowedSession.interrupt`` before the host began the message: by default it stays
    parked and runs before the next message (Ctrl-C on ``tether run``); with ``drop`` the host
    drops it (``inbox/discarded``) and it never runs (ACP's ``session/cancel``). A session
    named before it exists is followed with ``new``."""
    (tmp_path / "script.toml").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    host = ElsewhereHost()
    kernel = tether_kernel(PROFILE.format(name="far"), {"far": HostPlugin(host)})
    host.kernel = kernel
    store = profile_store(kernel)
    named = "ses_" + "7" * 16
    try:
        runtime = Runtime(kernel, store)
        with anyio.fail_after(scaled(30)):
            async with anyio.create_task_group() as group:
                host.group = group
                host.gate = anyio.Event()  # accepted, not begun
                async with runtime.follow(host, named, new=True) as followed:
                    assert followed.session_id == named
                    first = await followed.send("hello")
                    assert await followed.interrupt(drop=drop) is None
                    assert (followed.parked, followed.dropped) == (not drop, drop)
                    assert followed.running is None
                    host.gate.set()
                    await followed.send("and again")
                    assert await followed.turn() == "completed"
                    assert await followed.interrupt(drop=drop) is None  # nothing runs
        assert host.interrupted == [named]
        assert host.cancelled == ([named] if drop else [])
        log = [s.event for s in await store.events(named)]
        began = [e.message_id for e in log if isinstance(e, TurnStarted)]
        if drop:
            assert first not in began
            assert [e.message_id for e in log if isinstance(e, InboxDiscarded)] == [first]
        else:
            assert began[0] == first  # the parked message ran first
            assert not [e for e in log if isinstance(e, InboxDiscarded)]
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed"] * len(
            began
        )
    finally:
        await store.aclose()


def test_hook_tether_session_hosts_none_means_this_process(tether_kernel):
    kernel = tether_kernel('[tether]\nstore = "memory"\n')
    assert profile_session_host(kernel) is None


def test_hook_tether_session_hosts_checks_what_it_is_given(tether_kernel):
    kernel = tether_kernel(PROFILE.format(name="bad"), {"bad": HostPlugin("not a host")})
    with pytest.raises(PluginError) as info:
        profile_session_host(kernel)
    assert info.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert "SessionHost" in str(info.value)


async def test_follow_turn_waits_for_the_turn_of_its_message(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        from tether.agents import new_header
        from tether.store import TurnStarted

        header = await store.create(new_header())
        heard: list[int] = []

        async def write_later() -> None:
            await anyio.sleep(0.2)
            await store.append(
                header.id,
                [
                    TurnStarted(turn=1, message_id="other"),
                    TurnEnded(turn=1, stop_reason="completed"),
                    TurnStarted(turn=2, message_id="mine"),
                    TurnEnded(turn=2, stop_reason="max-tokens"),
                ],
            )

        async with anyio.create_task_group() as group:
            group.start_soon(write_later)
            with anyio.fail_after(scaled(30)):
                stop, last = await follow_turn(
                    store, header.id, "mine", hear=lambda s: heard.append(s.seq)
                )
        assert (stop, last) == ("max-tokens", 4)
        assert heard == [1, 2, 3, 4]
    finally:
        await store.aclose()


def test_a_session_host_is_a_protocol():
    assert isinstance(ElsewhereHost(), SessionHost)


async def test_follow_turn_hands_on_the_pieces_of_answers_not_in_the_log_yet(tmp_path):
    """A relayed batch is heard while its step's answer is not in the log; one for an answer
    already read (late), or for another message, is dropped; one for a step the log has not
    reached waits until it has."""
    from tether.agents import new_header
    from tether.models import ModelDelta
    from tether.store import AssistantMessage, DeltaBatch, TurnStarted

    store = SQLiteStore(tmp_path / "s.db")
    heard: list[str] = []
    send, receive = anyio.create_memory_object_stream[DeltaBatch](100)

    def batch(message_id: str, step: int, text: str) -> DeltaBatch:
        return DeltaBatch("s", message_id, step, (ModelDelta("text", text),))

    try:
        header = await store.create(new_header())
        send.send_nowait(batch("mine", 1, "one-a"))  # before the turn is in the log
        send.send_nowait(batch("other", 1, "not mine"))
        send.send_nowait(batch("mine", 2, "two-a"))  # the log has not reached step 2

        async def write() -> None:
            await anyio.sleep(0.3)
            await store.append(
                header.id,
                [
                    TurnStarted(turn=1, message_id="mine"),
                    AssistantMessage(content="one"),
                ],
            )
            await anyio.sleep(0.3)
            send.send_nowait(batch("mine", 1, "one-late"))  # its answer was read: dropped
            send.send_nowait(batch("mine", 2, "two-b"))
            await anyio.sleep(0.3)
            await store.append(
                header.id,
                [AssistantMessage(content="two"), TurnEnded(turn=1, stop_reason="completed")],
            )

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            with anyio.fail_after(scaled(30)):
                stop, _ = await follow_turn(
                    store,
                    header.id,
                    "mine",
                    deltas=receive,
                    hear_delta=lambda delta: heard.append(delta.text),
                )
    finally:
        send.close()
        receive.close()
        await store.aclose()
    assert stop == "completed"
    assert heard == ["one-a", "two-a", "two-b"]


async def test_leaving_relayed_deltas_while_a_batch_is_on_its_way_raises_nothing(tmp_path):
    """A batch the relay hands over just as the caller leaves (the pump already woken with it)
    is dropped, never sent into a closed stream (it once failed ``tether sessions send`` with
    ``BrokenResourceError``)."""
    from collections.abc import AsyncIterator, Sequence
    from contextlib import asynccontextmanager

    from tether.models import ModelDelta
    from tether.runtime import relayed_deltas
    from tether.store import DeltaBatch, DeltaRelay

    published, followed = anyio.create_memory_object_stream[DeltaBatch](100)

    class RelayingStore(SQLiteStore):
        """A SQLite store with an in-process relay, as PostgreSQL's LISTEN/NOTIFY is."""

        async def publish_deltas(self, batches: Sequence[DeltaBatch]) -> None:
            for batch in batches:
                published.send_nowait(batch)

        @asynccontextmanager
        async def follow_deltas(self, session_id: str) -> AsyncIterator[AsyncIterator[DeltaBatch]]:
            yield followed

    def batch(text: str) -> DeltaBatch:
        return DeltaBatch("s", "m", 1, (ModelDelta("text", text),))

    store = RelayingStore(tmp_path / "s.db")
    assert isinstance(store, DeltaRelay)
    try:
        with anyio.fail_after(scaled(30)):
            async with relayed_deltas(store, "s") as deltas:
                assert deltas is not None
                await store.publish_deltas([batch("first")])
                assert (await deltas.receive()).deltas[0].text == "first"
                await anyio.sleep(0.05)  # the pump waits for the next batch
                # Wakes the pump with a batch, and leaves before it runs.
                await store.publish_deltas([batch("second")])
    finally:
        published.close()
        followed.close()
        await store.aclose()
