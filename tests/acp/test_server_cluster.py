"""``tether acp`` fronting a cluster, in-process: :class:`tether_acp._cluster.ClusterAcpAgent`
on a session host that runs each message on a runtime and store object of its own (another
lease owner, over the same SQLite file, as a worker would), driven by the ACP methods the SDK
would call. The server only follows (:meth:`tether.runtime.Runtime.follow`); the answers come
from the shared log. ``tests/temporal/test_acp.py`` runs the same against a real cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import acp
import anyio
import pytest

from tests.acp.test_server import Recorder
from tests.runtime.test_session_hosts import PROFILE, ElsewhereHost, HostPlugin
from tether.runtime import Runtime, profile_store
from tether.store import InboxDiscarded, TurnEnded, TurnStarted, UserMessage
from tether.testing import scaled
from tether_acp._cluster import ClusterAcpAgent

pytestmark = pytest.mark.anyio

TIMEOUT = scaled(30.0)


def text(part: str) -> list[Any]:
    return [acp.text_block(part)]


@pytest.fixture
def cluster(tether_kernel, tmp_path, monkeypatch):
    """``(host, build)``: ``build(script)`` writes the model's script and gives the kernel."""
    monkeypatch.chdir(tmp_path)
    host = ElsewhereHost()

    def build(script: str):
        (tmp_path / "script.toml").write_text(script)
        kernel = tether_kernel(PROFILE.format(name="far"), {"far": HostPlugin(host)})
        host.kernel = kernel
        return kernel

    return host, build


async def log_of(kernel: Any, session_id: str) -> list[Any]:
    store = profile_store(kernel)
    try:
        return [s.event for s in await store.events(session_id)]
    finally:
        await store.aclose()


async def test_cluster_server_sends_to_the_host_streams_the_log_and_loads(cluster):
    host, build = cluster
    kernel = build('[[steps]]\ntext = "first answer"\n\n[[steps]]\ntext = "second answer"\n')
    store = profile_store(kernel)
    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                host.group = group
                server = ClusterAcpAgent(Runtime(kernel, store), host)
                client = Recorder()
                server.on_connect(client)
                sid = (await server.new_session(cwd=str(Path.cwd()))).session_id
                reply = await server.prompt(text("hello"), sid)
                assert reply.stop_reason == "end_turn"
                reply = await server.prompt(text("and again"), sid)
                assert reply.stop_reason == "end_turn"
                # The session was created with the id session/new gave, by its first prompt.
                assert [(s, c, a, new) for s, c, a, new in host.sent] == [
                    (sid, "hello", "main", True),
                    (sid, "and again", "main", False),
                ]
                assert client.seen(sid) == [
                    ("agent_message_chunk", "first answer"),
                    ("agent_message_chunk", "second answer"),
                ]
                # A new connection loads the session from the shared store.
                again = ClusterAcpAgent(Runtime(kernel, store), host)
                other = Recorder()
                again.on_connect(other)
                await again.load_session(cwd=str(Path.cwd()), session_id=sid)
                assert other.seen(sid) == [
                    ("user_message_chunk", "hello"),
                    ("agent_message_chunk", "first answer"),
                    ("user_message_chunk", "and again"),
                    ("agent_message_chunk", "second answer"),
                ]
                with pytest.raises(acp.RequestError):
                    await again.prompt(text("hello"), "ses_0000000000000000")
    finally:
        await store.aclose()


async def test_cluster_server_cancel_interrupts_the_running_turn_on_the_host(cluster):
    host, build = cluster
    kernel = build('[[steps]]\ntext = "too late"\ndelay = 60\n\n[[steps]]\ntext = "go on"\n')
    store = profile_store(kernel)
    replies: list[Any] = []
    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                host.group = group
                server = ClusterAcpAgent(Runtime(kernel, store), host)
                client = Recorder()
                server.on_connect(client)
                sid = (await server.new_session(cwd=str(Path.cwd()))).session_id

                async def prompt() -> None:
                    replies.append(await server.prompt(text("hello"), sid))

                group.start_soon(prompt)
                while sid not in host.driving:  # the turn runs on the host
                    await anyio.sleep(0.02)
                await anyio.sleep(0.1)
                await server.cancel(sid)
            assert [r.stop_reason for r in replies] == ["cancelled"]
            assert host.interrupted == [sid]
            assert host.cancelled == []  # begun: interrupted, nothing dropped
            log = await log_of(kernel, sid)
            assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["aborted"]
    finally:
        await store.aclose()


async def test_cluster_server_cancel_drops_a_prompt_not_begun(cluster):
    """A cancel before the host began the prompt's message: the prompt is answered
    ``cancelled`` and the host drops the message (``inbox/discarded``); it never runs later,
    where ``tether run``'s Ctrl-C would leave it parked."""
    host, build = cluster
    kernel = build('[[steps]]\ntext = "first answer"\n')
    store = profile_store(kernel)
    replies: list[Any] = []
    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                host.group = group
                host.gate = anyio.Event()  # accepted, not begun
                server = ClusterAcpAgent(Runtime(kernel, store), host)
                client = Recorder()
                server.on_connect(client)
                sid = (await server.new_session(cwd=str(Path.cwd()))).session_id

                async def prompt() -> None:
                    replies.append(await server.prompt(text("never run"), sid))

                async with anyio.create_task_group() as prompting:
                    prompting.start_soon(prompt)
                    while not host.sent:
                        await anyio.sleep(0.02)
                    await server.cancel(sid)
                assert [r.stop_reason for r in replies] == ["cancelled"]
                assert host.cancelled == [sid]
                host.gate.set()
                reply = await server.prompt(text("go on"), sid)
                assert reply.stop_reason == "end_turn"
                assert client.seen(sid) == [("agent_message_chunk", "first answer")]
        log = await log_of(kernel, sid)
        dropped = host_message(log, "never run")
        assert [e.message_id for e in log if isinstance(e, InboxDiscarded)] == [dropped]
        began = [e.message_id for e in log if isinstance(e, TurnStarted)]
        assert dropped not in began
        assert len(began) == 1
    finally:
        await store.aclose()


def host_message(log: list[Any], content: str) -> str:
    """The id of the message with ``content`` in the session's log (accepted, or run)."""
    from tether.store import InboxAccepted

    for event in log:
        if isinstance(event, InboxAccepted | UserMessage) and event.content == content:
            return event.message_id
    raise AssertionError(f"no message {content!r} in the log")
