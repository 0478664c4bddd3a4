"""A continuable child's accepted follow-ups survive SIGKILL of the process that accepted them.

The parent process (``crash_parent.py``) runs in a real subprocess: it starts a continuable
child whose first turn never ends, sends it two follow-ups, reports READY once both were
acknowledged, and is killed with SIGKILL. A second process reopens the store and recovers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tether.store import (
    AssistantMessage,
    InboxAccepted,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.testing import scaled

from ..processes import kill_at_ready, plugin_env, read_log

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

SCRIPT = Path(__file__).with_name("crash_parent.py")
TIMEOUT = scaled(60.0)


def _crash(db: Path, mode: str = "first") -> tuple[str, str, list[str]]:
    """Run the first process until READY, then SIGKILL it: ``(parent, child, follow-up ids)``."""
    parent, child, *follow_ups = kill_at_ready(
        [sys.executable, str(SCRIPT), mode, str(db)], TIMEOUT
    )
    return parent, child, follow_ups


def _restart(db: Path, parent: str) -> list[list[str]]:
    """Run the second process to the end: what its ``recover`` calls returned."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "second", str(db), parent],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=plugin_env(),
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("RECOVERED "))
    return json.loads(line.removeprefix("RECOVERED "))


@pytest.fixture
def crashed(tmp_path):
    """A store whose parent process was killed with two acknowledged follow-ups queued."""
    db = tmp_path / "sessions.db"
    parent, child, follow_ups = _crash(db)
    return db, parent, child, follow_ups


def test_after_sigkill_every_accepted_follow_up_runs_exactly_once(crashed):
    db, parent, child, follow_ups = crashed
    before = read_log(db, child)
    # What the killed process left: the first turn open, both follow-ups accepted, unclaimed.
    assert [e.message_id for e in before if isinstance(e, InboxAccepted)][1:] == follow_ups
    assert not [e for e in before if isinstance(e, TurnEnded)]
    assert not [e for e in before if isinstance(e, UserMessage) and e.message_id in follow_ups]

    restored, again, after = _restart(db, parent)
    assert restored == [child]
    assert again == []
    assert after == []

    events = read_log(db, child)
    assert events[: len(before)] == before  # the restart only appended
    first_prompt = next(e for e in before if isinstance(e, UserMessage))
    # The crashed turn is closed by the repair, and its message is not run again.
    first_end = next(e for e in events if isinstance(e, TurnEnded))
    assert first_end.turn == 1
    assert first_end.stop_reason == "aborted"
    assert "process stopped" in (first_end.error or "")
    claims = [e for e in events if isinstance(e, UserMessage)]
    assert [e.message_id for e in claims] == [first_prompt.message_id, *follow_ups]
    starts = [e for e in events if isinstance(e, TurnStarted)]
    assert [(s.turn, s.message_id) for s in starts] == [
        (1, first_prompt.message_id),
        (2, follow_ups[0]),
        (3, follow_ups[1]),
    ]
    # Each follow-up's turn ran to completion, in order, after the repaired turn.
    tail = events[len(before) + 1 :]
    kinds = [type(e).__name__ for e in tail]
    assert kinds == [
        "TurnStarted",
        "UserMessage",
        "AssistantMessage",
        "TurnEnded",
        "TurnStarted",
        "UserMessage",
        "AssistantMessage",
        "TurnEnded",
    ]
    answers = [e.content for e in tail if isinstance(e, AssistantMessage)]
    assert answers == ["child answer to follow-up one", "child answer to follow-up two"]
    assert [e.stop_reason for e in tail if isinstance(e, TurnEnded)] == ["completed", "completed"]

    # The parent was told once that the child settled, with its closing message.
    notices = [
        e
        for e in read_log(db, parent)
        if isinstance(e, UserMessage) and e.source.kind == "notice" and e.source.sender == child
    ]
    assert len(notices) == 1
    assert notices[0].content.startswith(f"Background subagent {child} finished")
    assert notices[0].content.endswith("child answer to follow-up two")


def test_a_second_restart_after_recovery_runs_nothing_again(crashed):
    db, parent, child, _ = crashed
    _restart(db, parent)
    child_log, parent_log = read_log(db, child), read_log(db, parent)

    restored, again, after = _restart(db, parent)

    assert (restored, again, after) == ([], [], [])
    assert read_log(db, child) == child_log
    assert read_log(db, parent) == parent_log


def test_after_sigkill_a_grandchilds_accepted_follow_up_runs_exactly_once(tmp_path):
    db = tmp_path / "sessions.db"
    parent, child, (grandchild, message_id) = _crash(db, "nested")
    restored, again, after = _restart(db, parent)
    assert restored == [child, grandchild]  # the child is restored to host its grandchild
    assert again == []
    assert after == []
    events = read_log(db, grandchild)
    claims = [e for e in events if isinstance(e, UserMessage)]
    assert [c.content for c in claims] == ["the first task", "deep"]
    assert [c.message_id for c in claims if c.content == "deep"] == [message_id]
    ends = [e.stop_reason for e in events if isinstance(e, TurnEnded)]
    assert ends == ["aborted", "completed"]
    # The grandchild's notice woke the child, whose own notice reached the parent.
    child_claims = [e.content for e in read_log(db, child) if isinstance(e, UserMessage)]
    assert child_claims[-1].startswith(f"Background subagent {grandchild} finished")
    parent_claims = [e.content for e in read_log(db, parent) if isinstance(e, UserMessage)]
    assert parent_claims[-1].startswith(f"Background subagent {child} finished")
