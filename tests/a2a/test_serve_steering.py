"""A message on a working task steers its turn (issue 43): ``tether a2a serve`` in a process of
its own, spoken to by the a2a-sdk's own client.

The served model (:mod:`tests.a2a.peers.served`) holds a turn's first step until the test
lets it go (``hold NAME``: the turn then has a second step; ``wait NAME``: it ends), so a
steer arrives while the turn runs, at a known point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.helpers import new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf import json_format

from tether.store import InboxAccepted, InboxDiscarded, TurnEnded, TurnStarted, UserMessage

from .test_serve import (
    MODEL,
    PEERS,
    TIMEOUT,
    Server,
    answer,
    client_of,
    free_port,
    message,
    send,
    served_profile,
    stored,
)
from .test_serve_callers import RPC, assert_refused

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    running = Server(served_profile(tmp_path), free_port())
    try:
        yield running
    finally:
        for go in tmp_path.glob("*.held"):  # a held model step must not outlive its test
            go.with_suffix(".go").touch()
        running.stop()


async def until_file(path: Path) -> None:
    """Wait until the served model made ``path`` (a step of it holds)."""
    with anyio.fail_after(TIMEOUT):
        while not path.exists():
            await anyio.sleep(0.02)


async def the_task(client: Any) -> Task:
    """The one task the server lists, once it does: a streamed request's task is stored as the
    stream's first event is taken, which a busy machine may do after the turn's tool began."""
    with anyio.fail_after(TIMEOUT):
        while not (tasks := (await client.list_tasks(ListTasksRequest())).tasks):
            await anyio.sleep(0.02)
    (task,) = tasks
    return task


async def events_of(server: Server, session_id: str) -> list[Any]:
    _, events = await stored(server.log.parent / "served.db", session_id)
    return events


async def until_steer_accepted(server: Server, session_id: str) -> InboxAccepted:
    """The steer the session's log records accepted, once it does."""
    with anyio.fail_after(TIMEOUT):
        while True:
            for event in await events_of(server, session_id):
                if isinstance(event, InboxAccepted) and event.source.kind == "steer":
                    return event
            await anyio.sleep(0.05)


async def send_whole(client: Any, request: SendMessageRequest) -> Task:
    """The task a non-streaming ``SendMessage`` answers with."""
    with anyio.fail_after(TIMEOUT):
        (response,) = [r async for r in client.send_message(request)]
    assert response.HasField("task")
    return response.task


async def first_working(client: Any, request: SendMessageRequest) -> Task:
    """Send ``request`` (``returnImmediately``): the task it started, not ended."""
    request.configuration.return_immediately = True
    task = await send_whole(client, request)
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    return task


def steer_of(task: Task, text: str) -> SendMessageRequest:
    return message(text, task.context_id, task.id)


async def test_a_message_on_a_working_task_is_seen_by_its_turns_next_model_request(
    server, tmp_path
):
    async with client_of(server.url, streaming=False) as sdk:
        task = await first_working(sdk, message("hold one"))
        await until_file(tmp_path / "one.held")
        results: dict[str, Task] = {}

        async def blocking(name: str, request: SendMessageRequest) -> None:
            results[name] = await send_whole(sdk, request)

        async with anyio.create_task_group() as group:
            # The original's answer is awaited by a blocking request on the same task (the
            # SDK answers a message on a working task when the task ends), as the steer's is.
            group.start_soon(blocking, "steer", steer_of(task, "echo left"))
            accepted = await until_steer_accepted(server, task.context_id)
            (tmp_path / "one.go").touch()
        steered = results["steer"]
    assert steered.id == task.id
    assert steered.status.state == TaskState.TASK_STATE_COMPLETED
    # The turn's second step saw the steer after its tool's result: its answer is the steer's.
    assert answer(steered) == "echo: left (message 2)"
    assert [m.parts[0].text for m in steered.history] == ["hold one", "echo left"]
    events = await events_of(server, task.context_id)
    assert accepted.delivery == "step"
    claims = [e for e in events if isinstance(e, UserMessage)]
    assert [(c.message_id, c.source.kind) for c in claims][-1] == (accepted.message_id, "steer")
    # One turn: the steer was claimed inside it, before it ended.
    assert len([e for e in events if isinstance(e, TurnStarted)]) == 1
    claimed_at = events.index(claims[-1])
    (end,) = [e for e in events if isinstance(e, TurnEnded)]
    assert claimed_at < events.index(end)
    assert end.stop_reason == "completed"


async def test_the_original_request_gets_the_steered_answer_too(server, tmp_path):
    async with client_of(server.url, streaming=False) as sdk:
        results: dict[str, Task] = {}

        async def blocking(name: str, request: SendMessageRequest) -> None:
            results[name] = await send_whole(sdk, request)

        async with anyio.create_task_group() as group:
            group.start_soon(blocking, "original", message("hold two"))
            await until_file(tmp_path / "two.held")
            listed = await the_task(sdk)
            group.start_soon(blocking, "steer", steer_of(listed, "echo right"))
            await until_steer_accepted(server, listed.context_id)
            (tmp_path / "two.go").touch()
    original, steered = results["original"], results["steer"]
    assert original.id == steered.id == listed.id
    for task in (original, steered):
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer(task) == "echo: right (message 2)"


async def test_a_steer_after_the_last_step_is_a_turn_of_its_own_in_the_same_task(server, tmp_path):
    seen: list[StreamResponse] = []
    async with client_of(server.url) as streaming, client_of(server.url, streaming=False) as sdk:

        async def original() -> None:
            with anyio.fail_after(TIMEOUT):
                async for response in streaming.send_message(message("wait three")):
                    seen.append(response)

        async with anyio.create_task_group() as group:
            group.start_soon(original)
            await until_file(tmp_path / "three.held")
            task = await the_task(sdk)
            request = steer_of(task, "echo again")
            request.configuration.return_immediately = True
            now = await send_whole(sdk, request)
            # At once: the same task, working, the steer in its history.
            assert now.id == task.id
            assert now.status.state == TaskState.TASK_STATE_WORKING
            assert [m.parts[0].text for m in now.history] == ["wait three", "echo again"]
            (tmp_path / "three.go").touch()
    # The original's stream went on through the steer's turn, to the task's end.
    last = seen[-1]
    assert last.HasField("status_update")
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    pieces = [
        r.artifact_update.artifact.parts[0].text for r in seen if r.HasField("artifact_update")
    ]
    assert pieces[-1] == "echo: again (message 2)"
    ended = await _get(server, task.id)
    assert answer(ended) == "echo: again (message 2)"
    events = await events_of(server, task.context_id)
    starts = [e for e in events if isinstance(e, TurnStarted)]
    accepted = next(e for e in events if isinstance(e, InboxAccepted) and e.source.kind == "steer")
    assert len(starts) == 2
    assert starts[1].message_id == accepted.message_id
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["completed"] * 2


async def _get(server: Server, task_id: str) -> Task:
    async with client_of(server.url, streaming=False) as sdk:
        return await sdk.get_task(GetTaskRequest(id=task_id))


async def test_a_streamed_steer_follows_the_task_until_it_ends(server, tmp_path):
    seen: list[StreamResponse] = []
    async with client_of(server.url) as streaming, client_of(server.url, streaming=False) as sdk:
        task = await first_working(sdk, message("hold four"))
        await until_file(tmp_path / "four.held")

        async def steer() -> None:
            with anyio.fail_after(TIMEOUT):
                async for response in streaming.send_message(steer_of(task, "echo streamed")):
                    seen.append(response)

        async with anyio.create_task_group() as group:
            group.start_soon(steer)
            await until_steer_accepted(server, task.context_id)
            (tmp_path / "four.go").touch()
    # The task as it was, then its updates: the steer taken, the answer, the end.
    assert seen[0].HasField("task")
    assert seen[0].task.id == task.id
    assert seen[0].task.status.state == TaskState.TASK_STATE_WORKING
    taken = [
        r.status_update.status.message.parts[0].text
        for r in seen
        if r.HasField("status_update") and r.status_update.status.HasField("message")
    ]
    assert taken == ["echo streamed"]
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    pieces = [
        r.artifact_update.artifact.parts[0].text for r in seen if r.HasField("artifact_update")
    ]
    assert pieces[-1] == "echo: streamed (message 2)"


async def test_a_task_that_asks_still_takes_the_next_message_as_its_answer(server):
    async with client_of(server.url) as sdk:
        asked, _ = await send(sdk, "publish the notes")
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        with anyio.fail_after(TIMEOUT):
            async for _ in sdk.send_message(steer_of(asked, "allow")):
                pass
    answered = await _get(server, asked.id)
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(answered) == "the tool said: published the notes"
    events = await events_of(server, asked.context_id)
    assert not [e for e in events if isinstance(e, InboxAccepted) and e.source.kind == "steer"]


async def test_a_message_on_a_completed_task_keeps_the_sdks_error(server):
    async with client_of(server.url, streaming=False) as sdk:
        done, _ = await send(sdk, "echo once")
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(A2AError, match="terminal state"):
            await send_whole(sdk, steer_of(done, "echo twice"))
    events = await events_of(server, done.context_id)
    assert [e.content for e in events if isinstance(e, UserMessage)] == ["echo once"]


async def test_a_message_naming_a_working_task_of_another_context_keeps_the_sdks_error(
    server, tmp_path
):
    async with client_of(server.url, streaming=False) as sdk:
        other, _ = await send(sdk, "echo elsewhere")
        task = await first_working(sdk, message("hold seven"))
        await until_file(tmp_path / "seven.held")
        with pytest.raises(A2AError, match="does not match context"):
            await send_whole(sdk, message("echo left", other.context_id, task.id))
        (tmp_path / "seven.go").touch()
    events = await events_of(server, task.context_id)
    assert not [e for e in events if isinstance(e, InboxAccepted) and e.source.kind == "steer"]


async def test_cancel_during_a_steered_turn_discards_the_steer(server, tmp_path):
    async with client_of(server.url, streaming=False) as sdk:
        task = await first_working(sdk, message("hold five"))
        await until_file(tmp_path / "five.held")
        request = steer_of(task, "echo never")
        request.configuration.return_immediately = True
        await send_whole(sdk, request)
        with anyio.fail_after(TIMEOUT):
            cancelled = await sdk.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        (tmp_path / "five.go").touch()
        with anyio.fail_after(TIMEOUT):
            while not any(
                isinstance(e, TurnEnded) for e in await events_of(server, task.context_id)
            ):
                await anyio.sleep(0.05)
        # The context goes on; the steer never runs.
        after, _ = await send(sdk, "echo after", context_id=task.context_id)
    assert answer(after) == "echo: after (message 2)"
    events = await events_of(server, task.context_id)
    accepted = next(e for e in events if isinstance(e, InboxAccepted) and e.source.kind == "steer")
    discarded = [e.message_id for e in events if isinstance(e, InboxDiscarded)]
    assert accepted.message_id in discarded
    assert "echo never" not in [e.content for e in events if isinstance(e, UserMessage)]
    ends = [e.stop_reason for e in events if isinstance(e, TurnEnded)]
    assert ends == ["aborted", "completed"]


async def test_a_steer_the_gate_refuses_gets_403_and_nothing_is_accepted(tmp_path):
    plugins = json.dumps(str(PEERS / "plugins"))
    profile = tmp_path / "served.toml"
    profile.write_text(
        f'[tether]\nplugins = ["a2a", "publishing", "team_skills"]\nstore = "sqlite:served.db"\n'
        f"plugin_dirs = [{plugins}]\nallow_outside = [{plugins}]\n"
        '[plugin.a2a.serve.tokens_env]\npilot = "PILOT_TOKEN"\n'
        "[plugin.a2a.serve.callers]\npilot = { claims = { steers = false } }\n"
        f'[agent.main]\nmodel = "{MODEL}"\n'
    )
    server = Server(profile, free_port(), {"PILOT_TOKEN": "t-pilot"})
    try:
        async with client_of(server.url, streaming=False, token="t-pilot") as sdk:
            task = await first_working(sdk, message("hold six"))
            await until_file(tmp_path / "six.held")
            sent = new_text_message("echo left", role=Role.ROLE_USER)
            sent.context_id, sent.task_id = task.context_id, task.id
            params = json_format.MessageToDict(SendMessageRequest(message=sent))
            headers = {**RPC, "authorization": "Bearer t-pilot"}
            async with httpx.AsyncClient(timeout=TIMEOUT) as http:
                for method in ("SendMessage", "SendStreamingMessage"):
                    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                    refused = await http.post(server.url, headers=headers, json=body)
                    message_text = assert_refused(refused, "a2a:pilot")
                    assert 'this caller does not steer (refused by gate "readonly")' in message_text
            (tmp_path / "six.go").touch()
            with anyio.fail_after(TIMEOUT):
                while (done := await sdk.get_task(GetTaskRequest(id=task.id))).status.state in (
                    TaskState.TASK_STATE_SUBMITTED,
                    TaskState.TASK_STATE_WORKING,
                ):
                    await anyio.sleep(0.05)
    finally:
        server.stop()
    # The turn went on unsteered; nothing of the refused steer is in the log.
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(done).startswith("done: ")
    assert [m.parts[0].text for m in done.history] == ["hold six"]
    events = await events_of(server, task.context_id)
    assert not [e for e in events if isinstance(e, InboxAccepted) and e.source.kind == "steer"]
    assert "echo left" not in [e.content for e in events if isinstance(e, UserMessage)]
