"""Ctrl-C in `tether run`, on real subprocesses: the first SIGINT aborts the running turn
promptly, parks the queued prompts and exits 130 after the session line; a second one exits at
once. The tools and the profile live in tests/cli/interrupt."""

from __future__ import annotations

import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tether.store import (
    AssistantMessage,
    InboxAccepted,
    InboxDiscarded,
    SQLiteStore,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.testing import scaled

from ..processes import needs_sigint, plugin_env

pytestmark = needs_sigint

HERE = Path(__file__).parent / "interrupt"
#: Generous bounds for a busy two-core machine: starting Python and tether, and stopping.
STARTUP = scaled(60.0)
STOPPED_WITHIN = scaled(5.0)  # the naps last 30 s
#: Longer than any bound above, shorter than the tools' 30 s nap: a hung process fails the test.
EXIT_DEADLINE = scaled(20.0)

PROFILE = """\
[tether]
plugins = ["naps"]
plugin_dirs = ["plugins"]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "scripted:script.toml"
"""
# Step 1 of each script runs while SIGINT comes; step 2 answers the parked prompt when the
# session is continued (the aborted turn's assistant message is the first in the history).
ONE_TOOL = """\
[[steps]]
tool_calls = [{ name = "nap" }]

[[steps]]
expect = "second"
text = "second answered"

[[steps]]
expect = "third"
text = "third answered"
"""
TWO_THREADED_TOOLS = """\
[[steps]]
tool_calls = [{ name = "snooze" }, { name = "snooze" }]
"""
SLOW_MODEL = """\
[[steps]]
delay = 60
text = "too late"
"""
STUBBORN_TOOL = """\
[[steps]]
tool_calls = [{ name = "stubborn" }]
"""
# The root starts a continuable child and answers; `tether run` then waits for the child, which
# naps in a tool.
WITH_CHILD_PROFILE = """\
[tether]
plugins = ["naps", "spawn", "subagent"]
plugin_dirs = ["plugins"]
store = "sqlite:.tether/sessions.db"

[plugin.subagent]
background = "continuable"

[agent.main]
model = "scripted:script.toml"
"""
CHILD_NAPS = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "nap" } }]

[[steps]]
text = "I started a subagent."

[[tasks.research.steps]]
tool_calls = [{ name = "nap" }]
"""


@dataclass
class Tether:
    """A ``tether`` subprocess whose output is read line by line as it comes."""

    folder: Path
    args: tuple[str, ...]
    env: dict[str, str] | None = None
    process: subprocess.Popen[str] = field(init=False)
    lines: dict[str, list[str]] = field(default_factory=lambda: {"stdout": [], "stderr": []})
    _queues: dict[str, queue.Queue[str | None]] = field(init=False)
    _readers: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tether", *self.args],
            cwd=self.folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        self._queues = {"stdout": queue.Queue(), "stderr": queue.Queue()}
        for name in ("stdout", "stderr"):
            reader = threading.Thread(target=self._read, args=(name,), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read(self, name: str) -> None:
        stream = getattr(self.process, name)
        for line in stream:
            self._queues[name].put(line.rstrip("\n"))
        self._queues[name].put(None)

    def wait_for(self, name: str, pattern: str, timeout: float = STARTUP) -> str:
        """The first line of ``name`` (stdout or stderr) matching ``pattern``, once it comes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queues[name].get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                pytest.fail(f"no {pattern!r} on {name} in {timeout} s; so far: {self._so_far()}")
            if line is None:
                self._queues[name].put(None)
                pytest.fail(f"{name} ended without {pattern!r}: {self._so_far()}")
            self.lines[name].append(line)
            if re.search(pattern, line):
                return line

    def _so_far(self) -> dict[str, list[str]]:
        """What the process printed until now (for a failure message)."""
        lines = {name: list(seen) for name, seen in self.lines.items()}
        for name, pending in self._queues.items():
            lines[name] += [line for line in list(pending.queue) if line is not None]
        return lines

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def finish(self, timeout: float = EXIT_DEADLINE) -> int:
        """Wait for the exit and read the rest of the output; the exit status."""
        code = self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=timeout)
        for name, lines in self.lines.items():
            while (line := self._queues[name].get_nowait()) is not None:
                lines.append(line)
        return code

    def close(self) -> None:
        """Kill the process if it still runs, and close its pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join(timeout=EXIT_DEADLINE)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plugins").mkdir()
    shutil.copy(HERE / "naps.py", tmp_path / "plugins" / "naps.py")
    (tmp_path / "tether.toml").write_text(PROFILE)
    return tmp_path


def start(project: Path, script: str, *args: str, env: dict[str, str] | None = None) -> Tether:
    (project / "script.toml").write_text(script)
    return Tether(project, ("run", "--profile", "tether.toml", *args), env)


def interrupted_run(project: Path, script: str, started: str, waits: int = 1) -> Tether:
    """Run two prompts, send SIGINT once ``waits`` lines matching ``started`` are printed, and
    check that the process stopped promptly with status 130 after the session line."""
    run = start(project, script, "first", "second")
    try:
        for _ in range(waits):
            run.wait_for("stdout", started)
        sent = time.monotonic()
        run.interrupt()
        code = run.finish()
        elapsed = time.monotonic() - sent
    finally:
        run.close()
    assert code == 130, run.lines
    assert elapsed < STOPPED_WITHIN, run.lines
    assert re.fullmatch(r"session ses_[0-9a-f]{16}", run.lines["stdout"][-1]), run.lines
    assert any(line.startswith("[interrupted") for line in run.lines["stderr"]), run.lines
    assert not list(project.glob("finished-*")), "a tool ran to its end"
    return run


def session_of(run: Tether) -> str:
    return run.lines["stdout"][-1].split()[1]


def log_of(project: Path, session_id: str) -> list[Any]:
    async def read() -> list[Any]:
        store = SQLiteStore(project / ".tether" / "sessions.db")
        try:
            return [stored.event for stored in await store.events(session_id)]
        finally:
            await store.aclose()

    return anyio.run(read)


def sessions_in(project: Path) -> list[str]:
    async def read() -> list[str]:
        store = SQLiteStore(project / ".tether" / "sessions.db")
        try:
            return [header.id for header in await store.sessions()]
        finally:
            await store.aclose()

    return anyio.run(read)


def assert_aborted_with_second_prompt_parked(events: list[Any]) -> None:
    """One turn, ended ``aborted``; every call answered once; "second" accepted, unclaimed."""
    assert [e.turn for e in events if isinstance(e, TurnStarted)] == [1]
    ends = [e for e in events if isinstance(e, TurnEnded)]
    assert [e.stop_reason for e in ends] == ["aborted"]
    assert events[-1] == ends[0]
    calls = [call.id for e in events if isinstance(e, AssistantMessage) for call in e.tool_calls]
    answered = [e.tool_call_id for e in events if isinstance(e, ToolResult)]
    assert sorted(answered) == sorted(calls)
    accepted = {e.content: e.message_id for e in events if isinstance(e, InboxAccepted)}
    assert list(accepted) == ["first", "second"]
    claimed = {e.message_id for e in events if isinstance(e, UserMessage)}
    assert accepted["first"] in claimed
    assert accepted["second"] not in claimed
    assert not [e for e in events if isinstance(e, InboxDiscarded)]


def test_ctrl_c_during_a_sync_tool_aborts_the_turn_and_parks_the_queued_prompt(project):
    run = interrupted_run(project, ONE_TOOL, r"^\[nap call_1_1 started\]$")
    events = log_of(project, session_of(run))
    assert_aborted_with_second_prompt_parked(events)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error
    assert result.content != "rested"
    assert "[turn 1 stopped: aborted]" in run.lines["stdout"]


def test_the_parked_prompt_runs_first_when_the_session_is_continued(project):
    run = interrupted_run(project, ONE_TOOL, r"^\[nap call_1_1 started\]$")
    session = session_of(run)
    again = Tether(project, ("run", "--profile", "tether.toml", "--session", session, "third"))
    try:
        assert again.finish() == 0, again.lines
    finally:
        again.close()
    assert again.lines["stdout"] == [
        "> second",
        "second answered",
        "> third",
        "third answered",
        f"session {session}",
    ]


def test_ctrl_c_during_threaded_safe_tools_aborts_the_turn(project):
    run = interrupted_run(project, TWO_THREADED_TOOLS, r"^\[snooze call_1_\d started\]$", 2)
    events = log_of(project, session_of(run))
    assert_aborted_with_second_prompt_parked(events)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [True, True]


def test_ctrl_c_during_a_model_request_aborts_the_turn(project):
    # "> first" is printed when the turn claims its message, just before the request.
    run = interrupted_run(project, SLOW_MODEL, r"^> first$")
    events = log_of(project, session_of(run))
    assert_aborted_with_second_prompt_parked(events)
    assert not [e for e in events if isinstance(e, AssistantMessage)]


def test_ctrl_c_does_not_wait_for_a_continuable_child_and_aborts_its_turn(project):
    (project / "tether.toml").write_text(WITH_CHILD_PROFILE)
    # The first-party plugins spawn and subagent load through their entry points.
    env = plugin_env()
    run = start(project, CHILD_NAPS, "go", env=env)
    try:
        run.wait_for("stdout", r"^\[nap call_1_1 started\]$")
        sent = time.monotonic()
        run.interrupt()
        code = run.finish()
        elapsed = time.monotonic() - sent
    finally:
        run.close()
    assert code == 130, run.lines
    assert elapsed < STOPPED_WITHIN, run.lines
    assert not list(project.glob("finished-*"))
    root = session_of(run)
    (child,) = [s for s in sessions_in(project) if s != root]
    child_log = log_of(project, child)
    assert [e.stop_reason for e in child_log if isinstance(e, TurnEnded)] == ["aborted"]
    calls = [c.id for e in child_log if isinstance(e, AssistantMessage) for c in e.tool_calls]
    assert sorted(e.tool_call_id for e in child_log if isinstance(e, ToolResult)) == calls
    # The root's one turn had completed; the child's end reached it as context, not a turn.
    root_log = log_of(project, root)
    assert [e.stop_reason for e in root_log if isinstance(e, TurnEnded)] == ["completed"]


def test_a_second_ctrl_c_exits_at_once(project):
    run = start(project, STUBBORN_TOOL, "first", "second")
    try:
        run.wait_for("stdout", r"^\[stubborn call_1_1 started\]$")
        run.interrupt()
        # The first Ctrl-C is being handled: the tool ignores the cancellation, so the turn
        # cannot close for the 30 s of its nap.
        run.wait_for("stderr", r"^\[interrupted")
        sent = time.monotonic()
        run.interrupt()
        code = run.finish()
        elapsed = time.monotonic() - sent
    finally:
        run.close()
    assert code == 130, run.lines
    assert elapsed < STOPPED_WITHIN, run.lines
    assert not list(project.glob("finished-*"))
    assert any(line.startswith("[interrupted again") for line in run.lines["stderr"])
    # Nothing waited for the turn to close: it is left open in the log, and continuing the
    # session closes it (crash recovery).
    (session,) = sessions_in(project)
    assert not [e for e in log_of(project, session) if isinstance(e, TurnEnded)]
