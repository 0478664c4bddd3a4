"""Real ``tether`` processes on a real store: start, SIGKILL, resume, check the logs.

A project's store is a SQLite file by default; a test that takes the ``store`` fixture with
``@on_both_stores`` runs once on SQLite and once on PostgreSQL (a schema of its own per test,
through the ``postgres`` plugin the profile loads).
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from tether.errors import ErrorCode, StoreError
from tether.store import Event, InboxAccepted, SessionStore, SQLiteStore, parse_event
from tether.testing import scaled, tree_problems

from ..processes import plugin_env

T = TypeVar("T")

PROJECT = Path(__file__).with_name("project")
#: Generous bounds: the suite must pass on a 2-core machine that is busy with other work.
TIMEOUT = scaled(60.0)

#: The stores a project can run on (the ``store`` fixture's values).
STORES = ("sqlite", "postgres")
#: Runs a test once per store: ``test_x[sqlite]``, ``test_x[postgres]``.
on_both_stores = pytest.mark.parametrize("store", STORES, indirect=True)

PROFILE = """\
[tether]
plugins = [{plugins}]
plugin_dirs = ["plugins"]
store = "{store}"

[plugin.subagent]
background = "{background}"

[agent.main]
model = "scripted:script.toml"
"""


class Reader(Protocol):
    """How a test reads a project's store while ``tether`` processes write it."""

    def roots(self) -> list[str]: ...

    def children(self, parent: str) -> list[str]: ...

    def events(self, session_id: str) -> list[Event]: ...

    def mailbox(self, session_id: str) -> list[str]:
        """The contents of the messages posted to the session and not taken yet."""
        ...

    def problems(self, root: str) -> dict[str, list[str]]: ...

    def close(self) -> None: ...


@dataclass
class SQLiteFileReader:
    """Reads the SQLite file the way another program would: a read-only connection per read,
    which never checkpoints or removes the write-ahead log a killed process left behind (the
    next ``tether`` recovers from that file as the killed one left it)."""

    db: Path

    def rows(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        if not self.db.exists():
            return []
        db = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=scaled(5))
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

    def events(self, session_id: str) -> list[Event]:
        query = "SELECT data FROM events WHERE session_id = ? ORDER BY seq"
        return [parse_event(r[0]) for r in self.rows(query, session_id)]

    def mailbox(self, session_id: str) -> list[str]:
        query = "SELECT data FROM mailbox WHERE session_id = ? ORDER BY id"
        return [
            InboxAccepted.model_validate_json(r[0]).content for r in self.rows(query, session_id)
        ]

    def problems(self, root: str) -> dict[str, list[str]]:
        async def check() -> dict[str, list[str]]:
            store = SQLiteStore(self.db)
            try:
                return await tree_problems(store, root)
            finally:
                await store.aclose()

        return anyio.run(check)

    def close(self) -> None:
        pass


class StoreReader:
    """Reads through tether's store API, as another program would: one store object (it takes
    no lease) on an event loop of its own, open until :meth:`close`."""

    def __init__(self, open_store: Callable[[], SessionStore]) -> None:
        self._exit = ExitStack()
        self._portal: BlockingPortal = self._exit.enter_context(start_blocking_portal())
        self._store: SessionStore = self._portal.call(open_store)
        self._exit.callback(self._portal.call, self._store.aclose)  # before the loop ends

    def _call(self, work: Callable[[SessionStore], Awaitable[T]], default: T) -> T:
        async def call() -> T:
            try:
                return await work(self._store)
            except StoreError as exc:
                if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                    raise
                return default  # not created yet

        return self._portal.call(call)

    def roots(self) -> list[str]:
        headers = self._call(lambda store: store.sessions(), [])
        return [h.id for h in headers if h.parent_session is None]

    def children(self, parent: str) -> list[str]:
        headers = self._call(lambda store: store.sessions(parent=parent), [])
        return [h.id for h in reversed(headers)]  # oldest first

    def events(self, session_id: str) -> list[Event]:
        stored = self._call(lambda store: store.events(session_id), [])
        return [s.event for s in stored]

    def mailbox(self, session_id: str) -> list[str]:
        return [m.content for m in self._call(lambda store: store.mailbox(session_id), [])]

    def problems(self, root: str) -> dict[str, list[str]]:
        return self._call(lambda store: tree_problems(store, root), {})

    def close(self) -> None:
        self._exit.close()


@dataclass
class Project:
    """A profile folder with the ``work`` tools, a scripted model and a store: a SQLite file,
    or a PostgreSQL schema (``postgres_url``)."""

    folder: Path
    postgres_url: str | None = None
    """The PostgreSQL schema the profile's store is in; None: the SQLite file ``db``."""
    _reader: Reader | None = field(default=None, init=False, repr=False)

    @property
    def store(self) -> str:
        return "sqlite" if self.postgres_url is None else "postgres"

    @property
    def reader(self) -> Reader:
        """How this test reads the store (opened on first use, until :meth:`close`)."""
        if self._reader is None:
            url = self.postgres_url
            if url is None:
                self._reader = SQLiteFileReader(self.db)
            else:
                self._reader = StoreReader(lambda: postgres_store(url))
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def db(self) -> Path:
        return self.folder / ".tether" / "sessions.db"

    @property
    def markers(self) -> Path:
        return self.folder / "markers"

    def script(self, text: str, name: str = "script.toml") -> None:
        (self.folder / name).write_text(text)

    def env(self) -> dict[str, str]:
        env = plugin_env()
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

    # What the store holds, read while ``tether`` processes write it.

    def roots(self) -> list[str]:
        return self.reader.roots()

    def children(self, parent: str) -> list[str]:
        return self.reader.children(parent)

    def events(self, session_id: str) -> list[Any]:
        return self.reader.events(session_id)

    def mailbox(self, session_id: str) -> list[str]:
        return self.reader.mailbox(session_id)

    def problems(self, root: str) -> dict[str, list[str]]:
        return self.reader.problems(root)


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


def postgres_store(url: str) -> SessionStore:
    from tether_postgres import PostgresStore

    return PostgresStore(url)


def new_project(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    store: str,
    plugins: list[str],
    profile: str,
    **values: str,
) -> Project:
    """A copy of the test project in ``tmp_path/project`` whose ``tether.toml`` is ``profile``
    formatted with ``plugins`` (and ``postgres`` on that store), ``store`` (a spec: a SQLite
    file in the project, or a PostgreSQL schema of the test's own) and ``values``."""
    folder = tmp_path / "project"
    shutil.copytree(PROJECT, folder)
    if store == "postgres":
        url: str = request.getfixturevalue("postgres_url")  # a schema of its own
        project = Project(folder, postgres_url=url)
        plugins = [*plugins, "postgres"]
        spec = url
    else:
        project = Project(folder)
        spec = "sqlite:.tether/sessions.db"
    listed = ", ".join(f'"{p}"' for p in plugins)
    (folder / "tether.toml").write_text(profile.format(plugins=listed, store=spec, **values))
    project.markers.mkdir()
    return project


@pytest.fixture
def store(request: pytest.FixtureRequest) -> str:
    """The store a project runs on: SQLite, unless the test runs ``@on_both_stores``."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def make_project(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Project]]:
    started: list[subprocess.Popen[str]] = []
    projects: list[Project] = []

    def make(background: str = "continuable") -> Project:
        project = new_project(
            tmp_path, request, store, ["work", "spawn", "subagent"], PROFILE, background=background
        )
        projects.append(project)
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
    for project in projects:
        project.close()
