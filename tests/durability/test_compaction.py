"""A 200-turn scripted session with a small window: it compacts many times, is killed with
SIGKILL in the middle of a compaction, and resumes in another process with every question
answered once, in order, and the compacted view intact (docs/compaction.md)."""

from __future__ import annotations

import shutil
import sys

import pytest

from tether.store import AssistantMessage, CompactionEvent, UserMessage
from tether.store.replay import fold

from .conftest import kill, printed, wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

TURNS = 200
FILLER = "and so on " * 20  # an answer of about 60 tokens


def script(turns: int, *, hang_in_summary: bool) -> str:
    """One step per question (each expects its question: answered in order), and, for the
    process to kill, a first summary that never comes."""
    steps = [
        f"[[steps]]\nexpect = 'question {n}'\ntext = 'answer {n} {FILLER}'\n"
        for n in range(1, turns + 1)
    ]
    if hang_in_summary:
        steps.append("[[summaries]]\ndelay = 600\ntext = 'never written'\n")
    return "\n".join(steps)


def test_a_long_session_compacts_and_survives_a_kill_in_the_middle_of_a_compaction(
    make_project,
):
    project = make_project()
    profile = project.folder / "tether.toml"
    profile.write_text(profile.read_text() + "context_window = 3000\n")
    questions = [f"question {n}" for n in range(1, TURNS + 1)]

    # A dry run finds the turn whose first step compacts first (the script is deterministic).
    project.script(script(TURNS, hang_in_summary=False))
    dry = project.run("run", *questions)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    lines = dry.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("[compacted (auto)"))
    compacting = next(line for line in reversed(lines[:first]) if line.startswith("> question"))
    assert sum(line.startswith("[compacted") for line in lines) >= 5
    shutil.rmtree(project.folder / ".tether")

    # The real run: killed while the summary request of that turn is out.
    project.script(script(TURNS, hang_in_summary=True), "hang.toml")
    process = project.start("run", "--model", "scripted:hang.toml", *questions)
    wait_for(lambda: printed(process, compacting), f"{compacting!r} to start and compact")
    (root,) = project.roots()
    kill(process)
    before = project.events(root)
    assert not any(isinstance(e, CompactionEvent) for e in before)  # nothing half-written

    project.script(script(TURNS + 1, hang_in_summary=False), "resume.toml")
    final = f"question {TURNS + 1}"
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", final)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "more step" not in done.stderr  # the resumed run played the whole script

    events = project.events(root)
    claimed = [e.content for e in events if isinstance(e, UserMessage) and e.source.kind == "user"]
    assert claimed == [*questions, final]  # each once, in order
    answers = [e.content for e in events if isinstance(e, AssistantMessage)]
    assert [a.split()[1] for a in answers] == [str(n) for n in range(1, TURNS + 2)]
    stored = [e for e in events if isinstance(e, CompactionEvent)]
    assert len(stored) >= 5
    assert project.problems(root) == {}
    # The view a restore rebuilds starts with the last summary and ends with the last answer.
    view = fold(events).history
    assert view[0].content.startswith("<conversation_summary>")
    assert stored[-1].summary in view[0].content
    assert view[-1].content == answers[-1]

    shown = project.run("context", "--session", root)
    assert shown.returncode == 0, shown.stderr
    assert "compacted at event" in shown.stdout
    assert "3000 tokens (agent)" in shown.stdout


def test_sessions_compact_is_refused_while_another_process_drives_the_session(make_project):
    project = make_project()
    project.script('[[steps]]\ndelay = 60\ntext = "never"\n')
    process = project.start("run", "first")
    wait_for(lambda: printed(process, "> first"), "the turn to start its request")
    (root,) = project.roots()
    before = project.events(root)
    refused = project.run("sessions", "compact", root)
    assert refused.returncode == 2
    assert "[SESSION_BUSY]" in refused.stderr
    assert project.events(root) == before  # the second process touched nothing
    kill(process)
