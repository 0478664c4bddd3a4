"""``tether sessions steer``: a person steers a turn another process runs, from a second
terminal, through the session's mailbox (real ``tether`` processes on a real SQLite file, and
PostgreSQL, whose mailbox and leases differ)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.durability.conftest import TIMEOUT, Project, new_project, wait_for
from tether.store import AssistantMessage, InboxAccepted, ToolResult, TurnEnded, UserMessage

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

PROFILE = """\
[tether]
plugins = [{plugins}]
plugin_dirs = ["plugins"]
store = "{store}"

[agent.main]
model = "function:steered:answer"
callers = {{ allow = ["alice", "carol"] }}
"""
# The first request of a turn waits in the `gate` tool; the next says what the person said.
STEERED = """\
from tether.models import ModelResponse, ToolCall


def answer(request):
    said = [m.content for m in request.messages if m.role == "user"]
    if request.messages[-1].role == "user" and not said[-1].startswith("also"):
        call = ToolCall(id="g%d" % len(said), name="gate", arguments={"text": "turn"})
        return ModelResponse(tool_calls=[call])
    return "saw: " + " | ".join(said)
"""


@pytest.fixture(params=["sqlite", "postgres"])
def project(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Project]:
    made = new_project(tmp_path, request, request.param, ["work"], PROFILE)
    (made.folder / "steered.py").write_text(STEERED)
    yield made
    made.close()


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    code = process.wait(timeout=TIMEOUT)
    return code, process.output.read_text()  # type: ignore[attr-defined]


def running_turn(project: Project, keep) -> tuple[subprocess.Popen[str], str]:  # type: ignore[no-untyped-def]
    """A ``tether run`` whose first turn waits in its tool, and its root session."""
    run = keep(project.start("run", "--caller", "alice", "first"))
    wait_for(lambda: (project.markers / "turn.started").exists(), "the turn to wait in its tool")
    (root,) = project.roots()
    return run, root


def test_a_steer_from_a_second_process_reaches_the_running_turn(project, processes):
    run, root = running_turn(project, processes)

    steered = project.run("sessions", "steer", "--caller", "carol", root, "also the fine print")
    assert steered.returncode == 0, steered.stdout + steered.stderr
    lines = steered.stdout.splitlines()
    assert re.fullmatch(
        rf"steer accepted for {root}: the process that drives it \(pid {run.pid} on .+\) "
        r"takes it at its running turn's next step",
        lines[0],
    ), lines
    assert lines[1:] == [f"session {root}"]

    (project.markers / "turn.open").touch()
    code, output = finish(run)
    assert code == 0, output
    # The turn's next request saw the steer after what the turn did so far: one turn, not two.
    assert output.splitlines()[:5] == [
        "> first",
        '-> gate({"text": "turn"})',
        "<- gate: gate opened",
        "> (steer) also the fine print",
        "saw: first | also the fine print",
    ]
    events = project.events(root)
    assert [e.turn for e in events if isinstance(e, TurnEnded)] == [1]
    kinds = [type(e).__name__ for e in events if not isinstance(e, InboxAccepted)]
    tail = kinds[kinds.index("ToolResult") :]
    assert tail[:3] == ["ToolResult", "UserMessage", "AssistantMessage"]
    (steer,) = [e for e in events if isinstance(e, UserMessage) and e.source.kind == "steer"]
    assert steer.content == "also the fine print"
    (accepted,) = [e for e in events if isinstance(e, InboxAccepted) and e.source.kind == "steer"]
    assert accepted.delivery == "step"
    assert accepted.source.caller is not None
    assert accepted.source.caller.id == "carol"
    assert project.mailbox(root) == []
    assert project.problems(root) == {}


def test_steer_with_wait_prints_the_turn_from_the_step_that_takes_it(project, processes):
    run, root = running_turn(project, processes)

    steer = processes(
        project.start("sessions", "steer", "--wait", "--caller", "carol", root, "also this")
    )
    wait_for(
        lambda: any(
            isinstance(e, InboxAccepted) and e.content == "also this" for e in project.events(root)
        ),
        "the driving process to take the steer",
    )
    assert steer.poll() is None  # waits for the turn, which waits in its tool
    (project.markers / "turn.open").touch()

    code, output = finish(steer)
    assert code == 0, output
    assert output.splitlines() == [
        "> (steer) also this",
        "saw: first | also this",
        f"session {root}",
    ]
    code, output = finish(run)
    assert code == 0, output
    assert project.problems(root) == {}


def test_a_refused_caller_steers_nothing(project, processes):
    run, root = running_turn(project, processes)
    before = project.events(root)

    refused = project.run("sessions", "steer", "--caller", "mallory", root, "stop everything")
    assert refused.returncode != 0
    assert "[CALLER_REFUSED]" in refused.stderr
    assert project.mailbox(root) == []
    assert project.events(root) == before

    (project.markers / "turn.open").touch()
    code, output = finish(run)
    assert code == 0, output
    assert "stop everything" not in output


def test_a_root_nobody_drives_cannot_be_steered(project):
    (project.markers / "turn.open").touch()  # the turn does not wait
    done = project.run("run", "--caller", "alice", "first")
    assert done.returncode == 0, done.stdout + done.stderr
    (root,) = project.roots()
    before = project.events(root)

    refused = project.run("sessions", "steer", "--caller", "carol", root, "too late")
    assert refused.returncode != 0
    assert "[NOT_RESUMABLE]" in refused.stderr
    assert f"tether run --session {root}" in refused.stderr
    assert project.mailbox(root) == []
    assert project.events(root) == before
    last = [e for e in before if isinstance(e, AssistantMessage)][-1]
    assert last.content == "saw: first"
    assert any(isinstance(e, ToolResult) for e in before)
