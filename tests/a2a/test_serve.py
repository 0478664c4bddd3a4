"""``tether a2a serve`` as a process of its own, spoken to by the a2a-sdk's own client and by
another tether (tether-a2a's client direction): the card, streamed answers, contexts that are
sessions, tasks kept across a ``kill -9`` of the server, cancel, refusals, authentication."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.helpers import get_artifact_text, new_raw_part, new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

import tether_a2a
import tether_subagent_tools
from tether.runtime import compose_agent
from tether.store import DescriptorEvent, SQLiteStore, TurnEnded, UserMessage
from tether.testing import make_runtime, scaled, write_profile

from ..acp.test_provider import delegating, results, task_of, tool_results
from ..processes import plugin_env
from .test_provider import agent_table

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[2]
PEERS = Path(__file__).parent / "peers"
MODEL = "function:tests.a2a.peers.served:brain"
#: The served process's environment: plugins found by entry point, as a user's are.
ENV = {
    **plugin_env(),
    "PYTHONPATH": str(ROOT),
}
#: Generous for a busy machine: everything here takes well under a second when idle.
TIMEOUT = scaled(60)


def served_profile(folder: Path, serve: str = "", skills: bool = False) -> Path:
    """A profile whose agent ``main`` answers with :mod:`tests.a2a.peers.served`; ``skills``:
    with one skill folder (read by tether-skills-fs)."""
    plugins = ['"publishing"'] + (['"a2a"'] if serve else []) + (['"skills-fs"'] if skills else [])
    text = (
        f'[tether]\nplugins = [{", ".join(plugins)}]\nstore = "sqlite:served.db"\n'
        f"plugin_dirs = [{json.dumps(str(PEERS / 'plugins'))}]\n"
        f"allow_outside = [{json.dumps(str(PEERS / 'plugins'))}]\n"
    )
    if serve:
        text += f"[plugin.a2a.serve]\n{serve}\n"
    if skills:
        text += '[plugin.skills-fs]\nroots = ["skills"]\nproject = false\nuser = false\n'
        skill = folder / "skills" / "release-notes"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(
            "---\nname: release-notes\ndescription: Writes release notes from a changelog.\n"
            "---\nRead the changelog, then write the notes.\n"
        )
    text += f'[agent.main]\ndescription = "Echoes what it is told."\nmodel = "{MODEL}"\n'
    path = folder / "served.toml"
    path.write_text(text)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """``tether a2a serve`` in a process of its own, on ``port``."""

    def __init__(
        self,
        profile: Path,
        port: int,
        env: dict[str, str] | None = None,
        *,
        descriptors: int | None = None,
    ) -> None:
        """``descriptors``: the server's descriptor limit (``ulimit -n``)."""
        self.log = profile.parent / f"serve-{time.monotonic_ns()}.err"
        command = ["tether", "a2a", "serve", "--profile", str(profile), "--port", str(port)]

        def limited() -> None:
            if descriptors is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

        with self.log.open("w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, "-m", *command],
                cwd=profile.parent,
                env={**ENV, **(env or {})},
                stdout=subprocess.DEVNULL,
                stderr=errors,
                preexec_fn=limited if descriptors is not None else None,
            )
        deadline = time.monotonic() + TIMEOUT
        while "tether a2a serve:" not in self.stderr():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tether a2a serve did not start: {self.stderr()}")
            time.sleep(0.05)
        self.url = self.stderr().split(" at ", 1)[1].split()[0]

    def stderr(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def kill(self) -> None:
        self.process.kill()  # kill -9: nothing is flushed or closed
        self.process.wait(timeout=TIMEOUT)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=TIMEOUT)
        return self.process.returncode


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    running = Server(served_profile(tmp_path, skills=True), free_port())
    try:
        yield running
    finally:
        running.stop()


@contextlib.asynccontextmanager
async def client_of(
    url: str,
    *,
    streaming: bool = True,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    binding: str = "JSONRPC",
) -> AsyncIterator[Any]:
    """The a2a-sdk's own client for the agent at ``url``, speaking ``binding``."""
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=TIMEOUT, headers=headers) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
        )
        client = ClientFactory(config).create(card)
        try:
            yield client
        finally:
            await client.close()


@pytest.fixture
async def sdk(server) -> AsyncIterator[Any]:
    async with client_of(server.url) as client:
        yield client


def message(text: str, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    sent = new_text_message(text, role=Role.ROLE_USER)
    sent.context_id, sent.task_id = context_id, task_id
    return SendMessageRequest(message=sent)


async def send(client: Any, text: str, context_id: str = "") -> tuple[Task, list[Any]]:
    """The task ``text`` ends as, and every stream response on the way."""
    seen: list[Any] = []
    task: Task | None = None
    with anyio.fail_after(TIMEOUT):
        async for response in client.send_message(message(text, context_id)):
            seen.append(response)
            if response.HasField("task"):
                task = response.task
    if not seen[-1].HasField("task"):  # streamed: read the task it became
        task = await client.get_task(GetTaskRequest(id=seen[0].task.id))
    assert task is not None
    return task, seen


async def stored(path: Path, session_id: str) -> tuple[Any, list[Any]]:
    """The header and events of a session in the SQLite file ``path`` (another process's)."""
    store = SQLiteStore(path)
    try:
        return await store.header(session_id), [s.event for s in await store.events(session_id)]
    finally:
        await store.aclose()


def answer(task: Task) -> str:
    (artifact,) = task.artifacts
    return get_artifact_text(artifact)


# ------------------------------------------------------------------ the card and a turn


async def test_the_card_names_the_agent_its_skills_and_its_interfaces(server):
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        card = await A2ACardResolver(http, server.url).get_agent_card()
    assert card.name == "main"
    assert card.description == "Echoes what it is told."
    assert [(s.id, s.description) for s in card.skills] == [
        ("release-notes", "Writes release notes from a changelog.")
    ]
    # Each binding in 1.0, then in 0.3 (the same endpoints: the a2a-sdk's compatibility).
    interfaces = card.supported_interfaces
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in interfaces] == [
        (server.url, "JSONRPC", "1.0"),
        (server.url + "rest", "HTTP+JSON", "1.0"),
        (server.url, "JSONRPC", "0.3"),
        (server.url + "rest", "HTTP+JSON", "0.3"),
    ]
    assert [tuple(s.input_modes) for s in card.skills] == [("text/plain", "application/json")]
    assert card.capabilities.streaming
    assert not card.security_requirements


async def test_a_streamed_answer_comes_in_pieces_and_the_context_is_a_session(server, sdk):
    task, seen = await send(sdk, "echo hello there")
    pieces = [r.artifact_update for r in seen if r.HasField("artifact_update")]
    whole = "echo: hello there (message 1)"
    # Two pieces as the model writes them, then the whole answer replaces them (one part).
    assert [p.artifact.parts[0].text for p in pieces] == [whole[:14], whole[14:], whole]
    assert [(p.append, p.last_chunk) for p in pieces] == [
        (False, False),
        (True, False),
        (False, True),
    ]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "echo: hello there (message 1)"
    # The context is the session: a message to it continues the conversation.
    again, _ = await send(sdk, "echo more", context_id=task.context_id)
    assert answer(again) == "echo: more (message 2)"
    assert again.context_id == task.context_id
    assert again.id != task.id
    header, events = await stored(server.log.parent / "served.db", task.context_id)
    assert (header.agent, header.label) == ("main", "a2a")
    said = [e.content for e in events if isinstance(e, UserMessage)]
    assert said == ["echo hello there", "echo more"]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("streaming", [True, False])
async def test_both_http_bindings_answer_streamed_or_whole(server, binding, streaming):
    async with client_of(server.url, streaming=streaming, binding=binding) as client:
        task, seen = await send(client, "echo plain")
        again, _ = await send(client, "echo twice", context_id=task.context_id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "echo: plain (message 1)"
    assert answer(again) == "echo: twice (message 2)"
    assert len(seen) > 1 if streaming else len(seen) == 1


async def test_a_failed_turn_fails_the_task_with_the_reason(sdk):
    task, _ = await send(sdk, "fail")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    reason = task.status.message.parts[0].text
    assert "the served model failed on purpose" in reason


async def test_refused_requests_say_why_and_start_nothing(server, sdk):
    with pytest.raises(A2AError, match="is not known here"):
        await send(sdk, "echo hi", context_id="ses_0000000000000000")
    request = message("")
    request.message.parts.append(new_raw_part(b"\x00\x01", media_type="application/octet-stream"))
    with pytest.raises(A2AError, match="'application/octet-stream' is not taken"):
        await _send_request(sdk, request)
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        wrong = await http.post(server.url, content=b"{}", headers={"content-type": "text/plain"})

        async def chunks() -> AsyncIterator[bytes]:
            yield b"{}"

        unsized = await http.post(
            server.url, content=chunks(), headers={"content-type": "application/json"}
        )
    assert (wrong.status_code, unsized.status_code) == (415, 411)
    # 60 MB announced: refused before a byte of it is read.
    port = int(server.url.rsplit(":", 1)[1].strip("/"))
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
        raw.sendall(
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
            b"Content-Length: 60000000\r\n\r\n"
        )
        assert raw.recv(100).startswith(b"HTTP/1.1 413 ")
    store = SQLiteStore(server.log.parent / "served.db")
    try:
        assert await store.sessions() == []
    finally:
        await store.aclose()


async def test_raw_text_parts_are_read_as_text(sdk):
    request = message("echo")
    request.message.parts.append(new_raw_part(b" from a file", media_type="text/plain"))
    task: Task | None = None
    with anyio.fail_after(TIMEOUT):
        async for response in sdk.send_message(request):
            task = response.task if response.HasField("task") else task
    assert task is not None
    got = await sdk.get_task(GetTaskRequest(id=task.id))
    # The model read "echo\n from a file": its first word is "echo\n".
    assert answer(got) == "echo: from a file (message 1)"


async def _send_request(client: Any, request: SendMessageRequest) -> None:
    with anyio.fail_after(TIMEOUT):
        async for _ in client.send_message(request):
            pass


async def test_cancel_aborts_the_turn_and_the_task_is_canceled(server, sdk):
    started: Task | None = None
    with anyio.fail_after(TIMEOUT):
        async for response in sdk.send_message(message("slow")):
            if response.HasField("status_update") and (
                response.status_update.status.state == TaskState.TASK_STATE_WORKING
            ):
                started = await sdk.get_task(GetTaskRequest(id=response.status_update.task_id))
                break
    assert started is not None
    with anyio.fail_after(TIMEOUT):
        cancelled = await sdk.cancel_task(CancelTaskRequest(id=started.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    with anyio.fail_after(TIMEOUT):
        while True:
            _, events = await stored(server.log.parent / "served.db", started.context_id)
            ends = [e for e in events if isinstance(e, TurnEnded)]
            if ends:
                break
            await anyio.sleep(0.05)
    assert ends[-1].stop_reason == "aborted"


# ------------------------------------------------------------------ questions

#: The plugins of a tether that delegates to the served one.
CALLER_PLUGINS = {"a2a": tether_a2a, "subagent": tether_subagent_tools.SubagentToolsPlugin}


def caller_profile(folder: Path, url: str) -> Path:
    """A profile whose ``subagent`` tool delegates to the A2A agent at ``url``, its children
    continuable."""
    return write_profile(
        folder,
        '[tether]\nplugins = ["a2a", "subagent"]\n[plugin.a2a]\n'
        + agent_table("remote", url)
        + '[plugin.subagent]\nprovider = "remote"\nmax_depth = "provider-managed"\n'
        + 'background = "continuable"\n[agent.main]\n',
    )


async def send_to(client: Any, text: str, task: Task) -> Task:
    """The task after ``text`` was sent on ``task`` (an answer to its question)."""
    with anyio.fail_after(TIMEOUT):
        async for _ in client.send_message(message(text, task.context_id, task.id)):
            pass
        return await client.get_task(GetTaskRequest(id=task.id))


@pytest.mark.parametrize(("reply", "outcome"), [("allow", "published the notes"), ("no", "")])
async def test_a_tool_that_needs_approval_makes_the_task_ask_and_the_reply_answers(
    sdk, reply, outcome
):
    asked, _ = await send(sdk, "publish the notes")
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    question = asked.status.message.parts[0].text
    assert question.startswith('publish({"what": "the notes"}) needs approval')
    assert "Answer with one of: allow (Allow once), reject (Reject)." in question
    answered = await send_to(sdk, reply, asked)
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    said = answer(answered)
    assert said.startswith("the tool said: ")
    assert outcome in said if outcome else "published" not in said


async def test_a_context_waiting_for_an_answer_takes_no_other_task_until_cancelled(sdk):
    asked, _ = await send(sdk, "publish the notes")
    with pytest.raises(A2AError, match="waits for input"):
        await send(sdk, "echo meanwhile", context_id=asked.context_id)
    with anyio.fail_after(TIMEOUT):
        cancelled = await sdk.cancel_task(CancelTaskRequest(id=asked.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    after, _ = await send(sdk, "echo after", context_id=asked.context_id)
    assert answer(after) == "echo: after (message 2)"


async def test_a_question_goes_up_a_chain_of_tethers_and_the_parent_answers_it(tmp_path):
    """tether to tether: the served agent's tool asks; the parent's A2A child answers its turn
    with the question, and the parent's follow-up to the child answers it."""
    served = tmp_path / "served"
    served.mkdir()
    server = Server(served_profile(served), free_port())
    parent_profile = caller_profile(tmp_path, server.url)
    store = SQLiteStore(tmp_path / "parent.db")
    try:
        runtime = make_runtime(parent_profile, CALLER_PLUGINS)
        parent = await compose_agent(
            runtime, store, model=delegating("publish the notes", background=True)
        )
        manager = runtime.subagents.continuation
        async with parent:
            with anyio.fail_after(TIMEOUT):
                await parent.run("go")
                child_id = task_of(tool_results(parent)[0])
                await manager.wait_quiet(parent)
                await manager.followup(parent, child_id, "allow")
                await manager.wait_quiet(parent)
    finally:
        await store.aclose()
        assert server.stop() == 0
    question, answered = results(parent)
    assert question.startswith('publish({"what": "the notes"}) needs approval')
    assert answered == "the tool said: published the notes"


# ------------------------------------------------------------------ restarts


async def test_tasks_survive_a_kill_9_of_the_server(tmp_path):
    profile = served_profile(tmp_path)
    port = free_port()
    first = Server(profile, port)
    try:
        async with client_of(first.url) as client:
            done, _ = await send(client, "echo kept")
            asking, _ = await send(client, "publish the notes")  # waits for input: lost too
            assert asking.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            # A task running when the server dies: the SDK's stream is left mid-way.
            with anyio.fail_after(TIMEOUT):
                async for response in client.send_message(message("slow", done.context_id)):
                    if response.HasField("status_update"):
                        running_id = response.status_update.task_id
                        break
    finally:
        first.kill()
    second = Server(profile, port)
    try:
        async with client_of(second.url) as client:
            await after_the_kill(client, done, running_id)
            waited = await client.get_task(GetTaskRequest(id=asking.id))
            assert waited.status.state == TaskState.TASK_STATE_FAILED
    finally:
        assert second.stop() == 0


async def after_the_kill(client: Any, done: Task, running_id: str) -> None:
    # The context goes on first (its new task is the first this server keeps in memory): the
    # turn the kill left open was closed, the history kept, and the older tasks still found.
    after, _ = await send(client, "echo on", context_id=done.context_id)
    assert answer(after) == "echo: on (message 3)"
    kept = await client.get_task(GetTaskRequest(id=done.id))
    assert kept.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(kept) == "echo: kept (message 1)"
    lost = await client.get_task(GetTaskRequest(id=running_id))
    assert lost.status.state == TaskState.TASK_STATE_FAILED
    assert "stopped before this task ended" in lost.status.message.parts[0].text
    listed = await client.list_tasks(ListTasksRequest(context_id=done.context_id))
    assert {t.id for t in listed.tasks} == {done.id, running_id, after.id}


async def test_stopping_the_server_cancels_its_running_tasks(tmp_path):
    profile = served_profile(tmp_path)
    port = free_port()
    first = Server(profile, port)
    try:
        async with client_of(first.url) as client:
            with anyio.fail_after(TIMEOUT):
                async for response in client.send_message(message("slow")):
                    if response.HasField("status_update"):
                        running_id = response.status_update.task_id
                        break
            assert first.stop() == 0  # SIGTERM while the task runs
    finally:
        first.stop()
    second = Server(profile, port)
    try:
        async with client_of(second.url) as client:
            task = await client.get_task(GetTaskRequest(id=running_id))
        assert task.status.state == TaskState.TASK_STATE_CANCELED
    finally:
        assert second.stop() == 0


async def test_an_idle_context_is_closed_and_opened_again_when_used(tmp_path):
    profile = served_profile(tmp_path, serve="idle_close = 0.5")
    server = Server(profile, free_port())
    try:
        async with client_of(server.url) as client:
            first, _ = await send(client, "echo one")
            store = SQLiteStore(tmp_path / "served.db")
            try:
                with anyio.fail_after(TIMEOUT):  # the session's lease is let go once idle
                    while await store.holder(first.context_id) is not None:
                        await anyio.sleep(0.1)
            finally:
                await store.aclose()
            kept = await client.get_task(GetTaskRequest(id=first.id))
            assert answer(kept) == "echo: one (message 1)"
            again, _ = await send(client, "echo two", context_id=first.context_id)
            assert answer(again) == "echo: two (message 2)"
    finally:
        assert server.stop() == 0


async def test_a_continuable_child_over_a2a_survives_a_restart_of_the_serving_tether(tmp_path):
    """tether to tether: the parent's continuable child is a context of the served agent; the
    serving process is killed and started again, and the child's follow-up continues."""
    served = tmp_path / "served"
    served.mkdir()
    profile = served_profile(served)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    parent_profile = caller_profile(tmp_path, url)
    store = SQLiteStore(tmp_path / "parent.db")
    try:
        first = Server(profile, port)
        try:
            runtime = make_runtime(parent_profile, CALLER_PLUGINS)
            parent = await compose_agent(
                runtime, store, model=delegating("echo one", background=True)
            )
            manager = runtime.subagents.continuation
            async with parent:
                with anyio.fail_after(TIMEOUT):
                    await parent.run("go")
                    child_id = task_of(tool_results(parent)[0])
                    await manager.wait_quiet(parent)
        finally:
            first.kill()
        second = Server(profile, port)
        try:
            again = make_runtime(parent_profile, CALLER_PLUGINS)
            restored = await compose_agent(
                again, store, session_id=parent.session_id, model=delegating("unused")
            )
            async with restored:
                with anyio.fail_after(TIMEOUT):
                    await again.subagents.continuation.followup(restored, child_id, "echo two")
                    await again.subagents.continuation.wait_quiet(restored)
        finally:
            assert second.stop() == 0
        events = [s.event for s in await store.events(child_id)]
    finally:
        await store.aclose()
    assert results(restored) == ["echo: one (message 1)", "echo: two (message 2)"]
    (context,) = {
        e.data["context_id"]
        for e in events
        if isinstance(e, DescriptorEvent) and e.kind == tether_a2a.CONTEXT_DESCRIPTOR
    }
    _, served_events = await stored(served / "served.db", context)
    said = [e.content for e in served_events if isinstance(e, UserMessage)]
    assert said == ["echo one", "echo two"]


# ------------------------------------------------------------------ authentication


async def test_callers_authenticate_and_see_only_their_own_tasks(tmp_path):
    profile = served_profile(
        tmp_path, serve='tokens_env = { alice = "ALICE_TOKEN", bob = "BOB_TOKEN" }'
    )
    env = {"ALICE_TOKEN": "a-secret", "BOB_TOKEN": "b-secret"}
    server = Server(profile, free_port(), env)
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            card = await A2ACardResolver(http, server.url).get_agent_card()  # public
            refused = await http.post(server.url, json={"jsonrpc": "2.0", "id": 1})
        assert "bearer" in card.security_schemes
        assert card.security_requirements
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        async with (
            client_of(server.url, token="a-secret") as alice,
            client_of(server.url, token="b-secret") as bob,
        ):
            await two_callers(alice, bob)
    finally:
        assert server.stop() == 0


async def two_callers(alice: Any, bob: Any) -> None:
    task, _ = await send(alice, "echo mine")
    assert answer(task) == "echo: mine (message 1)"
    with pytest.raises(A2AError, match="not found"):
        await bob.get_task(GetTaskRequest(id=task.id))
    with pytest.raises(A2AError, match="is not known here"):
        await send(bob, "echo intruding", context_id=task.context_id)
    assert [t.id for t in (await bob.list_tasks(ListTasksRequest())).tasks] == []
    assert [t.id for t in (await alice.list_tasks(ListTasksRequest())).tasks] == [task.id]


def test_a_token_variable_that_is_not_set_stops_the_server_at_start(tmp_path):
    profile = served_profile(tmp_path, serve='tokens_env = { alice = "UNSET_A2A_TOKEN" }')
    command = ["tether", "a2a", "serve", "--profile", str(profile), "--port", "0"]
    done = subprocess.run(
        [sys.executable, "-m", *command],
        env={k: v for k, v in ENV.items() if k != "UNSET_A2A_TOKEN"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode != 0
    assert "UNSET_A2A_TOKEN" in done.stderr
    assert "PLUGIN_SETTINGS_INVALID" in done.stderr


async def test_an_authenticator_callable_names_the_caller(tmp_path):
    profile = served_profile(
        tmp_path, serve='authenticator = "tests.a2a.peers.served:authenticate"'
    )
    server = Server(profile, free_port())
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            refused = await http.post(server.url, headers={"x-api-key": "wrong"}, json={})
        assert refused.status_code == 401
        async with client_of(server.url, headers={"x-api-key": "k-carol"}) as carol:
            task, _ = await send(carol, "echo keyed")
            assert answer(task) == "echo: keyed (message 1)"
        _, events = await stored(tmp_path / "served.db", task.context_id)
        owners = [e.data for e in events if getattr(e, "kind", "") == "a2a/owner"]
        assert owners == [{"owner": "carol"}]
    finally:
        assert server.stop() == 0


def test_a_port_in_use_stops_the_server_at_start_saying_which(tmp_path):
    profile = served_profile(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = ["tether", "a2a", "serve", "--profile", str(profile), "--port", str(port)]
        done = subprocess.run(
            [sys.executable, "-m", *command],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert done.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "--port 0 takes a free one" in done.stderr


# ------------------------------------------------------------------ the example


def test_the_example_runs_as_its_readme_says(tmp_path):
    """examples/a2a: the quickstart's agent served, and an agent that delegates to it."""
    import shutil

    examples = ROOT / "examples"
    for name in ("quickstart", "a2a"):
        shutil.copytree(examples / name, tmp_path / "examples" / name, ignore=_no_store)
    caller = tmp_path / "examples" / "a2a" / "tether.toml"
    # --port 0, and the URL it printed passed on in NOTES_A2A_URL: no port is fixed.
    server = Server(tmp_path / "examples" / "quickstart" / "tether.toml", 0)
    try:
        command = ["tether", "run", "--profile", str(caller), "What notes do I have?"]
        done = subprocess.run(
            [sys.executable, "-m", *command],
            cwd=tmp_path,
            env={**ENV, "NOTES_A2A_URL": server.url},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    finally:
        assert server.stop() == 0
    assert done.returncode == 0, done.stderr
    assert "<- subagent: You have two notes: launch.md" in done.stdout
    assert done.stdout.strip().splitlines()[-2].startswith("The notes agent says")


def _no_store(folder: str, names: list[str]) -> list[str]:
    return [name for name in names if name == ".tether"]


async def test_a_context_another_server_holds_is_refused_saying_so(tmp_path):
    """Two servers on one store: a context the first holds open is refused by the second
    (its session's lease), and the first keeps serving it."""
    profile = served_profile(tmp_path)
    first, second = Server(profile, free_port()), Server(profile, free_port())
    try:
        async with client_of(first.url) as one, client_of(second.url) as two:
            task, _ = await send(one, "echo mine")
            with pytest.raises(A2AError) as refused:
                await send(two, "echo stolen", context_id=task.context_id)
            assert task.context_id in str(refused.value)
            assert "SESSION_BUSY" in str(refused.value)
            again, _ = await send(one, "echo still mine", context_id=task.context_id)
            assert answer(again) == "echo: still mine (message 2)"
    finally:
        assert first.stop() == 0
        assert second.stop() == 0


def test_a_url_that_is_not_http_is_refused_before_anything_starts(tmp_path):
    command = ["tether", "a2a", "serve", "--profile", str(served_profile(tmp_path))]
    done = subprocess.run(
        [sys.executable, "-m", *command, "--url", "ftp://agents.example.com"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2
    assert "Invalid value for --url: an http or https URL" in done.stderr
