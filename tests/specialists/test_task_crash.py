"""A task's parent killed with SIGKILL in the middle of ``task_wait``, and two processes on one
parent while it waits (issue 16: "a crash in the middle of a task wait resumes correctly").

Real ``tether`` processes on a real SQLite file, with the ``function:`` models of
:mod:`tests.specialists.crash_brains`: ``main`` starts a ``writer`` task and waits for it with
``task_wait``; the writer blocks (in its model request until the test writes ``release``, or in
the ``slow`` tool) while the test kills the process, or drives the same session from another.
Then ``tether run --session ROOT`` resumes it, and the logs are checked: the task is still known
(its id is the child's session id), its work is recovered, the parent reads exactly one
``<task_result>`` for it, the interrupted ``task_wait`` call has its one result, and ``taskId``
still continues the task.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.durability.conftest import PROJECT, TIMEOUT, Project, kill, wait_for

from . import crash_brains

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX"),
    # Several `tether` processes per test, each a few seconds on a busy 2-core machine.
    pytest.mark.timeout(600),
]

#: The repository's root: the subprocesses import ``tests.specialists.crash_brains`` from it.
ROOT = Path(__file__).resolve().parents[2]

PROFILE = """\
[tether]
plugins = [{plugins}]
plugin_dirs = ["plugins"]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "function:tests.specialists.crash_brains:main"
subagents = ["writer"]

[agent.writer]
description = "Writes short texts on request."
model = "function:tests.specialists.crash_brains:writer"
"""

#: The plugins of the default profile: ``work`` gives the writer its ``slow`` tool.
PLUGINS = ("work", "spawn", "subagent")


@dataclass
class TaskProject(Project):
    """The durability tests' project (the ``work`` tools, a SQLite store), with the
    specialists' profile and models."""

    def env(self) -> dict[str, str]:
        env = super().env()
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)
        return env

    def release(self) -> None:
        """Let every blocked and future writer request answer."""
        (self.markers / "release").touch()

    def blocked(self, process: subprocess.Popen[str]) -> bool:
        """Whether the writer is blocked in its model request in ``process``."""
        return (self.markers / f"writer.blocked.{process.pid}").exists()

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def make_project(tmp_path: Path) -> Iterator[Callable[..., TaskProject]]:
    started: list[subprocess.Popen[str]] = []

    def make(plugins: tuple[str, ...] = PLUGINS) -> TaskProject:
        folder = tmp_path / "project"
        shutil.copytree(PROJECT, folder)
        listed = ", ".join(f'"{p}"' for p in plugins)
        (folder / "tether.toml").write_text(PROFILE.format(plugins=listed))
        project = TaskProject(folder)
        project.markers.mkdir()
        original = project.start

        def start(*args: str) -> subprocess.Popen[str]:
            process = original(*args)
            started.append(process)
            return process

        project.start = start  # type: ignore[method-assign]
        return project

    yield make
    for process in started:  # nothing outlives its test
        if process.poll() is None:
            process.kill()
            process.wait()


# ---------------------------------------------------------------------- reading the logs


def of_type(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def calls(events: list[Any], name: str) -> list[Any]:
    return [c for e in of_type(events, "assistant/message") for c in e.tool_calls if c.name == name]


def result_of(events: list[Any], call_id: str) -> list[str]:
    return [e.content for e in of_type(events, "tool/result") if e.tool_call_id == call_id]


def claims(events: list[Any]) -> list[str]:
    return [e.content for e in of_type(events, "user/message")]


def ends(events: list[Any]) -> list[str]:
    return [e.stop_reason for e in of_type(events, "turn/end")]


def task_results(events: list[Any], task_id: str) -> list[str]:
    """The ``<task_result>`` messages for ``task_id`` the parent read."""
    return [
        e.content
        for e in of_type(events, "user/message")
        if e.content.startswith(f'<task_result id="{task_id}"')
    ]


def told(events: list[Any], child: str) -> list[str]:
    """Every message the parent read from ``child`` (results and notices)."""
    return [
        e.content
        for e in of_type(events, "user/message")
        if e.source.kind == "notice" and e.source.sender == child
    ]


def result(task_id: str, status: str, body: str) -> str:
    return f'<task_result id="{task_id}" tool="writer" status="{status}">{body}</task_result>'


def waiting_in_task_wait(project: TaskProject, process: subprocess.Popen[str]) -> tuple[str, str]:
    """Wait until the root of ``process`` has called ``task_wait`` on its one task while the
    writer is blocked; ``(root, task id)``."""
    root = wait_for(lambda: project.roots(), "the root session")[0]
    child = wait_for(lambda: project.children(root), "the task's child session")[0]
    wait_for(lambda: calls(project.events(root), "task_wait"), "the call of task_wait")
    (wait_call,) = calls(project.events(root), "task_wait")
    assert wait_call.arguments["taskIds"] == [child]
    assert process.poll() is None, process.output.read_text()  # type: ignore[attr-defined]
    return root, child


# ---------------------------------------------------------------------- the tests


def crash_in_task_wait(project: TaskProject, message: str) -> tuple[str, str]:
    """``tether run "go: MESSAGE"``: the root starts a writer task and waits for it; killed with
    SIGKILL while it waits and the writer is blocked (in its model request, or in the ``slow``
    tool when ``MESSAGE`` asks for it). ``(root, task id)``."""
    first = project.start("run", f"go: {message}")
    if message == crash_brains.USE_THE_TOOL:
        wait_for(lambda: (project.markers / "writer.started").exists(), "the slow tool to start")
    else:
        wait_for(lambda: project.blocked(first), "the writer to block in its model request")
    root, child = waiting_in_task_wait(project, first)
    kill(first)
    # Killed: the wait has no result yet.
    events = project.events(root)
    (wait_call,) = calls(events, "task_wait")
    assert result_of(events, wait_call.id) == []
    (receipt,) = [e.content for e in of_type(events, "tool/result")]
    assert receipt.startswith(f"Started task {child}. ")
    return root, child


def check_interrupted_wait(events: list[Any]) -> None:
    """The ``task_wait`` call the kill interrupted has exactly one result, an error saying so,
    and its turn ended ``aborted``."""
    wait_call = calls(events, "task_wait")[0]
    (interrupted,) = result_of(events, wait_call.id)
    assert interrupted.startswith("error: interrupted: the process stopped")
    assert ends(events)[0] == "aborted"


def check_continuation(project: TaskProject, root: str, child: str) -> None:
    """``taskId`` still continues the task after the crash: the receipt, one more result."""
    project.release()
    done = project.run("run", "--session", root, f"continue {child}")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    continued = [c for c in calls(events, "writer") if c.arguments.get("taskId") == child]
    (call,) = continued
    (sent,) = result_of(events, call.id)
    assert sent == f"Sent to task {child}. Its reply will arrive in a <task_result> message."
    last_wait = calls(events, "task_wait")[-1]
    (settled,) = result_of(events, last_wait.id)
    assert settled.startswith(f"settled: {child}.")
    assert task_results(events, child)[-1] == result(
        child, "completed", f"draft: {crash_brains.SHORTER}"
    )
    assert claims(project.events(child))[-1] == crash_brains.SHORTER
    assert project.problems(root) == {}


def test_killed_in_task_wait_the_task_runs_again_and_reports_once(make_project):
    # The writer was killed in its first model request: its message was never claimed (a turn's
    # claim is stored with its first answer), so the next driver runs it again, once.
    project = make_project()
    root, child = crash_in_task_wait(project, "Draft the intro.")
    assert claims(project.events(child)) == []

    # The task is known and working again (restored from its log) when the next driver's first
    # turn starts: the [Tasks] note lists it, and task_wait waits for it.
    second = project.start("run", "--session", root, f"wait {child}")
    wait_for(lambda: project.blocked(second), "the restored writer to block again")
    wait_for(lambda: len(calls(project.events(root), "task_wait")) == 2, "the second task_wait")
    project.release()
    assert second.wait(timeout=TIMEOUT) == 0, second.output.read_text()  # type: ignore[attr-defined]

    events = project.events(root)
    check_interrupted_wait(events)
    (note,) = [e.content for e in of_type(events, "context/message") if e.origin == "tasks"]
    assert f"- {child} (writer): writer: Draft the intro." in note.splitlines()
    (settled,) = result_of(events, calls(events, "task_wait")[1].id)
    assert settled.startswith(f"settled: {child}.")
    # Exactly one result, and nothing else from the task (no orphan notice besides it).
    assert told(events, child) == [result(child, "completed", "draft: Draft the intro.")]
    child_events = project.events(child)
    assert claims(child_events) == ["Draft the intro."]
    assert ends(child_events) == ["completed"]
    assert project.problems(root) == {}

    # The task id is the child's session id, and sessions show opens it.
    shown = project.json("sessions", "show", child)
    assert shown["header"]["parent_session"] == root
    assert shown["header"]["agent"] == "writer"

    # task_output reads the result from the task's log in a process that never held it.
    done = project.run("run", "--session", root, f"output {child}")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert result_of(events, calls(events, "task_output")[0].id) == ["draft: Draft the intro."]

    check_continuation(project, root, child)
    assert len(task_results(project.events(root), child)) == 2


def test_specialists_without_a_delegation_plugin_are_recovered_too(make_project):
    # Declared subagents need no plugin (the kernel's own provider starts them); their
    # recovery must not need one either.
    project = make_project(("work",))
    root, child = crash_in_task_wait(project, "Draft the intro.")
    project.release()
    done = project.run("run", "--session", root, f"wait {child}")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    check_interrupted_wait(events)
    assert told(events, child) == [result(child, "completed", "draft: Draft the intro.")]
    assert claims(project.events(child)) == ["Draft the intro."]
    assert project.problems(root) == {}


def test_killed_in_task_wait_while_the_task_is_in_a_tool_it_is_repaired_and_told_once(
    make_project,
):
    # The writer was killed in a tool call: its turn had begun, so it is not run again; the
    # next driver closes it (the call answered as interrupted, the turn aborted) and tells the
    # parent once.
    project = make_project()
    root, child = crash_in_task_wait(project, crash_brains.USE_THE_TOOL)

    done = project.run("run", "--session", root, f"wait {child}")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    check_interrupted_wait(events)
    (settled,) = result_of(events, calls(events, "task_wait")[1].id)
    assert settled.startswith(f"settled: {child}.")  # known, and no longer working
    (notice,) = told(events, child)
    assert "was stopped before it finished" in notice
    child_events = project.events(child)
    assert ends(child_events) == ["aborted"]
    (slow,) = result_of(child_events, calls(child_events, "slow")[0].id)
    assert slow.startswith("error: interrupted")
    assert project.problems(root) == {}

    # Resuming again repairs nothing and tells nobody twice.
    again = project.run("run", "--session", root, "anything new?")
    assert again.returncode == 0, again.stdout + again.stderr
    assert told(project.events(root), child) == [notice]

    check_continuation(project, root, child)
    assert claims(project.events(child)) == [crash_brains.USE_THE_TOOL, crash_brains.SHORTER]
    assert ends(project.events(child)) == ["aborted", "completed"]


def test_a_task_repaired_after_a_crash_reports_as_a_failed_task_result(make_project):
    project = make_project()
    root, child = crash_in_task_wait(project, crash_brains.USE_THE_TOOL)
    done = project.run("run", "--session", root, f"wait {child}")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert told(events, child) == [
        result(child, "failed", "The task was stopped before it finished.")
    ]


def test_a_one_shot_task_killed_before_its_first_answer_reports_as_failed_once(make_project):
    # A one-shot task (output_schema) killed in its first model request: its log holds its
    # prompt and no turn yet. The next driver drops the prompt (one-shot: nobody runs it again)
    # and tells the parent once, as a failed task result.
    project = make_project()
    first = project.start("run", "verdict: Is the intro good?")
    wait_for(lambda: project.blocked(first), "the writer to block in its model request")
    root, child = waiting_in_task_wait(project, first)
    kill(first)
    (receipt,) = [e.content for e in of_type(project.events(root), "tool/result")]
    assert receipt == f"Started task {child}. Its result will arrive in a <task_result> message."
    assert ends(project.events(child)) == []  # no turn was ever written

    for _ in range(2):  # a second resume repairs nothing and tells nobody again
        done = project.run("run", "--session", root, "anything new?")
        assert done.returncode == 0, done.stdout + done.stderr
        events = project.events(root)
        assert told(events, child) == [
            result(
                child,
                "failed",
                "The task was stopped before it finished. The process running it stopped.",
            )
        ]
    assert of_type(project.events(child), "inbox/discarded")  # its prompt will never run
    assert project.problems(root) == {}


def test_killed_while_reading_the_result_the_result_is_read_once(make_project):
    # task_wait returned and the result was delivered; the parent was killed in the model
    # request that reads it. The next driver gives it the result once (not lost, not twice).
    project = make_project()
    (project.markers / "hold-main").touch()
    first = project.start("run", "go: Draft the intro.")
    wait_for(lambda: project.blocked(first), "the writer to block in its model request")
    root, child = waiting_in_task_wait(project, first)
    project.release()
    wait_for(
        lambda: (project.markers / f"main.blocked.{first.pid}").exists(),
        "the root to block reading the result",
    )
    kill(first)
    events = project.events(root)
    (settled,) = result_of(events, calls(events, "task_wait")[0].id)
    assert settled.startswith(f"settled: {child}.")

    (project.markers / "release-main").touch()
    done = project.run("run", "--session", root, "anything new?")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert task_results(events, child) == [result(child, "completed", "draft: Draft the intro.")]
    assert told(events, child) == task_results(events, child)
    assert claims(project.events(child)) == ["Draft the intro."]
    assert project.problems(root) == {}
    check_continuation(project, root, child)


def test_a_second_process_is_refused_while_the_parent_waits_and_send_reaches_the_task(
    make_project,
):
    project = make_project()
    first = project.start("run", "go: Draft the intro.")
    wait_for(lambda: project.blocked(first), "the writer to block in its model request")
    root, child = waiting_in_task_wait(project, first)
    before = (project.events(root), project.events(child))

    # Another driver of the waiting parent is refused and touches nothing.
    intruder = project.run("run", "--session", root, "intruder")
    assert intruder.returncode == 2, intruder.stdout + intruder.stderr
    assert "SESSION_BUSY" in intruder.stderr
    assert f"pid {first.pid}" in intruder.stderr
    assert (project.events(root), project.events(child)) == before

    # The task is in the tree, under its id.
    tree = project.json("sessions", "tree", root)
    assert [(c["id"], c["agent"]) for c in tree["children"]] == [(child, "writer")]

    # A message sent to the task goes through the process that waits for it.
    sent = project.run("sessions", "send", child, "Also add a title.")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert f"pid {first.pid}" in sent.stdout
    assert sent.stdout.splitlines()[-1] == f"session {child}"
    accepted = [e.content for e in of_type(project.events(child), "inbox/accepted")]
    assert accepted == ["Draft the intro.", "Also add a title."]

    project.release()
    assert first.wait(timeout=TIMEOUT) == 0, first.output.read_text()  # type: ignore[attr-defined]
    events = project.events(root)
    (settled,) = result_of(events, calls(events, "task_wait")[0].id)
    assert settled.startswith(f"settled: {child}.")
    # One result, after both of the task's turns.
    assert told(events, child) == [result(child, "completed", "draft: Also add a title.")]
    assert claims(project.events(child)) == ["Draft the intro.", "Also add a title."]
    assert project.problems(root) == {}
