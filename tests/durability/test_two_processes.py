"""Two processes on one session: one drives it, the other is refused or delivers through it."""

from __future__ import annotations

import re
import sys

import pytest

from tether.store import InboxAccepted, TurnStarted, UserMessage
from tether.testing import scaled

from .conftest import on_both_stores, printed, wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

SLOW_TURN = '[[steps]]\ndelay = 60\ntext = "never"\n'


def claims(events) -> list[str]:
    return [e.content for e in events if isinstance(e, UserMessage)]


@on_both_stores
def test_a_second_run_on_a_live_session_is_refused_and_touches_nothing(make_project, store):
    project = make_project()
    project.script('[[steps]]\ntext = "one"\n')
    first = project.run("run", "hello")
    assert first.returncode == 0, first.stdout + first.stderr
    (root,) = project.roots()
    project.script('[[steps]]\ntext = "x"\n\n' + SLOW_TURN, "slow.toml")
    owner = project.start("run", "--session", root, "--model", "scripted:slow.toml", "busy")
    wait_for(lambda: printed(owner, "> busy"), "the owner's turn to start")
    before = project.events(root)

    second = project.run("run", "--session", root, "--model", "scripted:slow.toml", "intruder")

    assert second.returncode == 2
    assert second.stdout == ""
    *noise, line = second.stderr.splitlines()
    assert line.startswith("ERROR: ")
    assert "SESSION_BUSY" in line
    assert f"pid {owner.pid}" in line
    assert project.events(root) == before  # not a single event: no repair, no message
    assert owner.poll() is None  # the owner is untouched and still running
    assert noise == []  # the error is all it prints


def test_a_run_is_refused_while_sessions_send_drives_the_tree(make_project):
    project = make_project()
    project.script(
        "[[steps]]\n"
        'tool_calls = [{ name = "subagent", arguments = { description = "research", '
        'prompt = "look" } }]\n\n[[steps]]\ntext = "started"\n\n[[steps]]\ntext = "noted"\n\n'
        '[[tasks.research.steps]]\ntext = "found"\n'
    )
    first = project.run("run", "go")
    assert first.returncode == 0, first.stdout + first.stderr
    (root,) = project.roots()
    (child,) = project.children(root)
    slow_child = SLOW_TURN.replace("steps", "tasks.research.steps")
    project.script(slow_child * 2, "slow.toml")
    sender = project.start("sessions", "send", "--model", "scripted:slow.toml", child, "more")
    wait_for(lambda: printed(sender, "> more"), "the child's turn to start")

    second = project.run("run", "--session", root, "again")

    assert second.returncode == 2
    assert "SESSION_BUSY" in second.stderr
    assert sender.poll() is None


HOSTED = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[steps]]
text = "The subagent is done."

[[tasks.research.steps]]
tool_calls = [{ name = "gate", arguments = { text = "child" } }]

[[tasks.research.steps]]
text = "first findings"

[[tasks.research.steps]]
expect = "dig deeper"
text = "deeper findings"
"""


@on_both_stores
def test_sessions_send_to_a_child_hosted_by_a_live_run_is_delivered_and_run_once(make_project):
    # The child's first turn waits at a gate until the message is sent: the run still drives
    # the child however long `tether sessions send` takes to start (after it, the run is done).
    project = make_project()
    project.script(HOSTED)
    owner = project.start("run", "go")
    wait_for(lambda: (project.markers / "child.started").exists(), "the child's turn to start")
    (root,) = project.roots()
    (child,) = project.children(root)

    sent = project.run("sessions", "send", child, "dig deeper")
    (project.markers / "child.open").touch()

    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert re.search(rf"pid {owner.pid}\b", sent.stdout)
    assert sent.stdout.splitlines()[-1] == f"session {child}"
    assert owner.wait(timeout=scaled(60)) == 0
    child_events = project.events(child)
    assert claims(child_events) == ["look", "dig deeper"]
    starts = [e for e in child_events if isinstance(e, TurnStarted)]
    assert len(starts) == 2
    accepted = [e.content for e in child_events if isinstance(e, InboxAccepted)]
    assert accepted.count("dig deeper") == 1
    # The parent was told once, when the child settled after both turns.
    notices = [
        e for e in project.events(root) if isinstance(e, UserMessage) and e.source.kind == "notice"
    ]
    assert len(notices) == 1
    assert notices[0].content.endswith('status="completed">deeper findings</task_result>')
    assert project.problems(root) == {}


def test_sessions_send_to_a_root_another_run_drives_is_accepted_into_its_log(make_project):
    project = make_project()
    project.script('[[steps]]\ntext = "one"\n')
    first = project.run("run", "hello")
    assert first.returncode == 0, first.stdout + first.stderr
    (root,) = project.roots()
    project.script('[[steps]]\ntext = "x"\n\n' + SLOW_TURN, "slow.toml")
    owner = project.start("run", "--session", root, "--model", "scripted:slow.toml", "busy")
    wait_for(lambda: printed(owner, "> busy"), "the owner's turn to start")

    sent = project.run("sessions", "send", root, "from outside")

    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert f"pid {owner.pid}" in sent.stdout
    accepted = [e.content for e in project.events(root) if isinstance(e, InboxAccepted)]
    assert accepted.count("from outside") == 1  # queued behind the running turn, once
    assert owner.poll() is None


def test_sessions_send_to_a_root_nobody_drives_is_refused(make_project):
    project = make_project()
    project.script('[[steps]]\ntext = "one"\n')
    first = project.run("run", "hello")
    (root,) = project.roots()
    sent = project.run("sessions", "send", root, "hello again")
    assert sent.returncode == 2
    assert "NOT_RESUMABLE" in sent.stderr
    assert first.returncode == 0
