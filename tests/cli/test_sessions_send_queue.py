"""Concurrent ``tether sessions send`` to one continuable child: real ``tether`` processes
started at once on a real store (SQLite, and PostgreSQL where the store's mailbox and leases
differ). Every message is queued through the child's mailbox and runs once, in arrival order;
no sender is refused because another one got there first."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durability.conftest import TIMEOUT, Project, kill, new_project, wait_for
from tether.store import InboxAccepted, TurnEnded, TurnStarted, UserMessage

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

SENDERS = 5
#: How long a sender may take on a busy machine: its own turn, and the turns queued before it.
SENDER_TIMEOUT = 4 * TIMEOUT

PROFILE = """\
[tether]
plugins = [{plugins}]
plugin_dirs = ["plugins"]
store = "{store}"

[plugin.subagent]
background = "continuable"

[agent.main]
model = "scripted:script.toml"
"""
# The root delegates and answers; `tether run` waits for the child to settle and takes its
# result as a turn of its own.
SCRIPT = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[steps]]
text = "The subagent is done."

[[tasks.research.steps]]
text = "first findings"
"""
# The child's first turn waits at a gate the test opens; every later message gets an answer
# (the root takes one result per settlement: several, at most one per message).
GATED = (
    """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[tasks.research.steps]]
tool_calls = [{ name = "gate", arguments = { text = "child" } }]

[[tasks.research.steps]]
text = "first findings"
"""
    + '[[steps]]\ntext = "noted"\n\n' * (SENDERS + 1)
    + '[[tasks.research.steps]]\ntext = "more findings"\n\n' * SENDERS
)
# What the child answers a person's message: it names the message, so each sender's answer
# can be told apart whichever process ran it.
REPLIES = """\
def answer(request):
    return "reply to " + request.messages[-1].content
"""
# The same, but the first message waits at a gate (``gated:answer``).
GATED_REPLIES = """\
import os
import time
from pathlib import Path

import anyio


async def answer(request):
    text = request.messages[-1].content
    if text == "first":  # waits for the test without blocking the process's event loop
        markers = Path(os.environ["TETHER_TEST_MARKERS"])
        (markers / "first.started").touch()
        deadline = time.monotonic() + 120
        while not (markers / "first.open").exists() and time.monotonic() < deadline:
            await anyio.sleep(0.02)
    return "reply to " + text
"""


@pytest.fixture(params=["sqlite", "postgres"])
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Project]:
    made = new_project(tmp_path, request, request.param, ["work", "spawn", "subagent"], PROFILE)
    (made.folder / "replies.py").write_text(REPLIES)
    (made.folder / "gated.py").write_text(GATED_REPLIES)
    yield made
    made.close()


def settled_child(project: Project) -> tuple[str, str]:
    """``tether run`` left a root session and its settled continuable child."""
    project.script(SCRIPT)
    done = project.run("run", "go")
    assert done.returncode == 0, done.stdout + done.stderr
    (root,) = project.roots()
    (child,) = project.children(root)
    return root, child


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    code = process.wait(timeout=SENDER_TIMEOUT)
    return code, process.output.read_text()  # type: ignore[attr-defined]


def check_each_message_ran_once_in_arrival_order(project: Project, child: str, sent: list[str]):
    """Each message was accepted once, claimed once by a turn of its own that completed, and
    the turns claimed them in the order the child's inbox accepted them."""
    events = project.events(child)
    accepted = [e.content for e in events if isinstance(e, InboxAccepted) and e.content in sent]
    claimed = [e.content for e in events if isinstance(e, UserMessage) and e.content in sent]
    assert sorted(accepted) == sorted(sent)
    assert claimed == accepted  # arrival order: the mailbox's post order, kept by the turns
    assert project.mailbox(child) == []
    ids = {e.message_id: e.content for e in events if isinstance(e, InboxAccepted)}
    turns = {e.turn: ids.get(e.message_id or "") for e in events if isinstance(e, TurnStarted)}
    ends = {turns[e.turn]: e.stop_reason for e in events if isinstance(e, TurnEnded)}
    assert {text: ends.get(text) for text in sent} == dict.fromkeys(sent, "completed")


def no_refusal(output: str) -> None:
    assert "SESSION_BUSY" not in output
    assert "ERROR" not in output


def test_concurrent_sends_to_an_idle_child_all_queue_and_run_once_in_order(project, processes):
    root, child = settled_child(project)
    root_log = project.events(root)
    sent = [f"message {n}" for n in range(SENDERS)]

    senders = [
        processes(project.start("sessions", "send", "--model", "function:replies:answer", child, m))
        for m in sent
    ]
    results = [finish(process) for process in senders]

    for (code, output), message in zip(results, sent, strict=True):
        assert code == 0, output
        no_refusal(output)
        lines = output.splitlines()
        assert lines[-1] == f"session {child}"
        # Its own answer, or where its message went (a process that ran it for this one).
        if lines[0] == f"> {message}":
            assert lines[1:-1] == [f"reply to {message}"]
        else:
            assert lines[:-1] == [
                line for line in lines[:-1] if line.startswith(f"message accepted for {child}: ")
            ]
            assert len(lines) == 2
    check_each_message_ran_once_in_arrival_order(project, child, sent)
    assert project.events(root) == root_log  # the root only hosted: no notice, no turn
    assert project.problems(root) == {}


def test_concurrent_sends_with_wait_each_print_their_own_answer(project, processes):
    root, child = settled_child(project)
    sent = [f"message {n}" for n in range(SENDERS)]

    senders = [
        processes(
            project.start(
                "sessions", "send", "--wait", "--model", "function:replies:answer", child, m
            )
        )
        for m in sent
    ]
    results = [finish(process) for process in senders]

    for (code, output), message in zip(results, sent, strict=True):
        assert code == 0, output
        assert output.splitlines() == [f"> {message}", f"reply to {message}", f"session {child}"]
    check_each_message_ran_once_in_arrival_order(project, child, sent)
    assert project.problems(root) == {}


def test_concurrent_sends_to_a_child_another_send_drives_queue_behind_its_turn(project, processes):
    root, child = settled_child(project)
    first = processes(
        project.start("sessions", "send", "--model", "function:gated:answer", child, "first")
    )
    wait_for(lambda: (project.markers / "first.started").exists(), "the first send's turn")
    sent = [f"message {n}" for n in range(SENDERS)]

    senders = [
        processes(
            project.start(
                "sessions", "send", "--wait", "--model", "function:gated:answer", child, m
            )
        )
        for m in sent
    ]
    # Every message is in the child's log (the driving send took it) before the gate opens.
    wait_for(
        lambda: (
            len([e for e in project.events(child) if isinstance(e, InboxAccepted)]) >= 2 + SENDERS
        ),
        "the messages to be accepted",
    )
    assert all(process.poll() is None for process in senders)  # waiting for their answers
    (project.markers / "first.open").touch()

    code, output = finish(first)
    assert code == 0, output
    assert output.splitlines() == ["> first", "reply to first", f"session {child}"]
    for process, message in zip(senders, sent, strict=True):
        code, output = finish(process)
        assert code == 0, output
        assert output.splitlines() == [f"> {message}", f"reply to {message}", f"session {child}"]
    check_each_message_ran_once_in_arrival_order(project, child, ["first", *sent])
    assert project.problems(root) == {}


def test_a_sender_killed_while_it_waits_loses_nothing(project, processes):
    root, child = settled_child(project)
    first = processes(
        project.start("sessions", "send", "--model", "function:gated:answer", child, "first")
    )
    wait_for(lambda: (project.markers / "first.started").exists(), "the first send's turn")
    doomed = processes(
        project.start(
            "sessions", "send", "--wait", "--model", "function:gated:answer", child, "doomed"
        )
    )
    wait_for(
        lambda: (
            "doomed" in project.mailbox(child)
            or any(
                isinstance(e, InboxAccepted) and e.content == "doomed"
                for e in project.events(child)
            )
        ),
        "the second message to be posted",
    )
    kill(doomed)
    (project.markers / "first.open").touch()

    code, output = finish(first)

    assert code == 0, output
    check_each_message_ran_once_in_arrival_order(project, child, ["first", "doomed"])
    assert project.problems(root) == {}


def test_concurrent_sends_to_a_child_whose_parent_is_live_are_all_delivered(project, processes):
    project.script(GATED)
    owner = processes(project.start("run", "go"))
    wait_for(lambda: (project.markers / "child.started").exists(), "the child's turn to start")
    (root,) = project.roots()
    (child,) = project.children(root)
    sent = [f"message {n}" for n in range(SENDERS)]

    senders = [processes(project.start("sessions", "send", child, m)) for m in sent]
    results = [finish(process) for process in senders]
    (project.markers / "child.open").touch()

    for code, output in results:
        assert code == 0, output
        first_line, last_line = output.splitlines()
        pattern = (
            rf"message accepted for {child}: the process that drives it "
            rf"\(pid {owner.pid} on .+\) runs it"
        )
        assert re.fullmatch(pattern, first_line), output
        assert last_line == f"session {child}"
    code, output = finish(owner)
    assert code == 0, output
    check_each_message_ran_once_in_arrival_order(project, child, sent)
    assert project.problems(root) == {}


def test_sends_that_race_the_live_parents_exit_are_all_delivered(project, processes):
    # The gate opens as the senders start: the run that drives the child finishes while they
    # post, so some find it gone before it took their message, and one of them drives instead.
    project.script(GATED)
    owner = processes(project.start("run", "go"))
    wait_for(lambda: (project.markers / "child.started").exists(), "the child's turn to start")
    (root,) = project.roots()
    (child,) = project.children(root)
    sent = [f"message {n}" for n in range(SENDERS)]

    # A sender that finds the run gone drives the child itself, on a model of its own (the
    # script's task steps play in call order per process).
    senders = [
        processes(project.start("sessions", "send", "--model", "function:replies:answer", child, m))
        for m in sent
    ]
    (project.markers / "child.open").touch()
    results = [finish(process) for process in senders]

    for code, output in results:
        assert code == 0, output
        no_refusal(output)
        assert output.splitlines()[-1] == f"session {child}"
    assert finish(owner)[0] == 0
    check_each_message_ran_once_in_arrival_order(project, child, sent)
    assert project.problems(root) == {}
