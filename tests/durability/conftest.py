"""Real ``tether`` processes on a real SQLite file: start, SIGKILL, resume, check the logs."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tether.store import SQLiteStore, parse_event
from tether.testing import tree_problems

PROJECT = Path(__file__).with_name("project")
#: Generous bounds: the suite must pass on a 2-core machine that is busy with other work.
TIMEOUT = 60.0

PROFILE = """\
[tether]
plugins = ["work", "spawn", "subagent"]
plugin_dirs = ["plugins"]
store = "sqlite:.tether/sessions.db"

[plugin.subagent]
background = "{background}"

[agent.main]
model = "scripted:script.toml"
"""


@dataclass
class Project:
    """A profile folder with the ``work`` tools, a scripted model and a SQLite store."""

    folder: Path

    @property
    def db(self) -> Path:
        return self.folder / ".tether" / "sessions.db"

    @property
    def markers(self) -> Path:
        return self.folder / "markers"

    def script(self, text: str, name: str = "script.toml") -> None:
        (self.folder / name).write_text(text)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}
        env["TETHER_TEST_MARKERS"] = str(self.markers)
        return env

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``tether ARGS`` in the background (stdout and stderr to files)."""
        path = self.folder / f"out-{time.monotonic_ns()}.txt"
        with path.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "tether", *args],
                cwd=self.folder,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=self.env(),
            )  # the child keeps its own copy of the file
        process.output = path  # type: ignore[attr-defined]
        return process

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``tether ARGS`` to its end."""
        return subprocess.run(
            [sys.executable, "-m", "tether", *args],
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=self.env(),
        )

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the store the way another program would (read-only, its own connection)."""
        if not self.db.exists():
            return []
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute(query, params).fetchall()
        except sqlite3.OperationalError:
            return []  # not created yet
        finally:
            db.close()

    def roots(self) -> list[str]:
        return [r[0] for r in self.rows("SELECT id FROM sessions WHERE parent_session IS NULL")]

    def children(self, parent: str) -> list[str]:
        query = "SELECT id FROM sessions WHERE parent_session = ? ORDER BY created_at"
        return [r[0] for r in self.rows(query, parent)]

    def events(self, session_id: str) -> list[Any]:
        query = "SELECT data FROM events WHERE session_id = ? ORDER BY seq"
        return [parse_event(r[0]) for r in self.rows(query, session_id)]

    def problems(self, root: str) -> dict[str, list[str]]:
        async def check() -> dict[str, list[str]]:
            store = SQLiteStore(self.db)
            try:
                return await tree_problems(store, root)
            finally:
                await store.aclose()

        return anyio.run(check)


def wait_for(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    """Poll ``condition`` until it is truthy; its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def printed(process: subprocess.Popen[str], line: str) -> bool:
    """Whether the process has printed ``line`` (stdout and stderr, as they come)."""
    return line in process.output.read_text().splitlines()  # type: ignore[attr-defined]


def kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL, and reap it."""
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=TIMEOUT) == -signal.SIGKILL


@pytest.fixture
def make_project(tmp_path) -> Iterator[Callable[..., Project]]:
    started: list[subprocess.Popen[str]] = []

    def make(background: str = "continuable") -> Project:
        folder = tmp_path / "project"
        shutil.copytree(PROJECT, folder)
        (folder / "tether.toml").write_text(PROFILE.format(background=background))
        project = Project(folder)
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
