"""SIGKILL while a guardrail's check awaits, then a restore: nothing checked is lost, nothing
unchecked goes through, nothing runs twice (docs/guardrails.md, "A crash mid-check").

The first process (``crash_check.py``) is killed while its ``hold`` guardrail awaits (a judge
that never answers); a second process reopens the session on the same SQLite file with a
``hold`` that answers, and drives it until it is quiet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tether.store import (
    AssistantMessage,
    GuardEvent,
    InboxAccepted,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.testing import scaled

from ..processes import kill_at_ready, plugin_env, read_log

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

SCRIPT = Path(__file__).with_name("crash_check.py")
TIMEOUT = scaled(60.0)
PROMPT = "write the report"


def _crash(db: Path, kind: str, tool: str) -> str:
    """The first process, killed once its check awaits: the session's id."""
    command = [sys.executable, str(SCRIPT), "first", kind, tool, str(db)]
    (session,) = kill_at_ready(command, TIMEOUT, db.with_name("first.err"))
    return session


def _restore(db: Path, kind: str, tool: str, session: str) -> list[list[str]]:
    """The second process, to its end: what its guardrail was asked."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "second", kind, tool, str(db), session],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=plugin_env(),
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("ASKED "))
    return json.loads(line.removeprefix("ASKED "))


def _ran(db: Path) -> list[str]:
    ran = db.with_name(db.name + ".ran")
    return ran.read_text(encoding="utf-8").splitlines() if ran.exists() else []


def test_killed_while_a_message_is_checked_its_turn_runs_again_checked(tmp_path):
    """The check awaits alongside the first request; the turn's opening batch is stored with
    the first answer only once the message is let through: a kill before that leaves the
    message accepted and unclaimed, and the restore runs it as a turn, checked again."""
    db = tmp_path / "sessions.db"
    session = _crash(db, "input", "note")
    before = read_log(db, session)
    accepted = [e for e in before if isinstance(e, InboxAccepted)]
    assert [e.content for e in accepted] == [PROMPT]
    assert not [e for e in before if isinstance(e, (TurnStarted, UserMessage, AssistantMessage))]
    assert _ran(db) == []

    asked = _restore(db, "input", "note", session)

    events = read_log(db, session)
    assert events[: len(before)] == before  # the restore only appended
    starts = [e for e in events if isinstance(e, TurnStarted)]
    assert [(s.turn, s.message_id) for s in starts] == [(1, accepted[0].message_id)]
    # Checked again, and only what the check let through was claimed and seen.
    assert asked == [["input", PROMPT]]
    (claim,) = [e for e in events if isinstance(e, UserMessage)]
    assert claim.content == f"[checked] {PROMPT}"
    (record,) = [e for e in events if isinstance(e, GuardEvent)]
    assert (record.action, record.target) == ("replace", claim.message_id)
    assert _ran(db) == ['note {"text": "report"}']
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["completed"]


def test_killed_while_an_answer_is_checked_it_is_never_stored(tmp_path):
    """The answer after the tool's result is checked before it is stored: killed there, the
    restore closes the cut turn (``aborted``) without the answer, and nothing runs again."""
    db = tmp_path / "sessions.db"
    session = _crash(db, "output", "note")
    before = read_log(db, session)
    assert [type(e).__name__ for e in before if isinstance(e, (AssistantMessage, ToolResult))] == [
        "AssistantMessage",
        "ToolResult",
    ]
    assert _ran(db) == ['note {"text": "report"}']

    asked = _restore(db, "output", "note", session)

    events = read_log(db, session)
    assert events[: len(before)] == before
    assert asked == []  # no new turn: the cut one was closed
    assert not [e for e in events if isinstance(e, AssistantMessage) and e.content]
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["aborted"]
    assert _ran(db) == ['note {"text": "report"}']


@pytest.mark.parametrize(
    ("tool", "goes_on"), [("note", True), ("write", False)], ids=["idempotent", "not-idempotent"]
)
def test_killed_while_a_tool_call_is_checked_the_call_never_runs_unchecked(tmp_path, tool, goes_on):
    """The call was stored with the answer that asked for it; its check awaited. An
    idempotent tool's call goes on after the restore and is checked again before it runs; any
    other call is closed unrun (the tool may or may not have run: here it never did)."""
    db = tmp_path / "sessions.db"
    session = _crash(db, "tool_call", tool)
    before = read_log(db, session)
    assert [type(e).__name__ for e in before if isinstance(e, (TurnStarted, AssistantMessage))] == [
        "TurnStarted",
        "AssistantMessage",
    ]
    assert _ran(db) == []  # the check never answered: the tool did not run

    asked = _restore(db, "tool_call", tool, session)

    events = read_log(db, session)
    assert events[: len(before)] == before
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    (end,) = [e for e in events if isinstance(e, TurnEnded)]
    if goes_on:
        assert asked == [["tool_call", '{"text":"report"}']]
        assert _ran(db) == [f'{tool} {{"text": "report"}}']
        assert not result.is_error
        assert end.stop_reason == "completed"
    else:
        assert asked == []
        assert _ran(db) == []
        assert result.is_error
        assert end.stop_reason == "aborted"
    assert len([e for e in events if isinstance(e, TurnStarted)]) == 1
