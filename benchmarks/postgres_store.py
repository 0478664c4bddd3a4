"""PostgreSQL store figures, as medians of CPU time and wall time, next to the SQLite store.

    uv run python benchmarks/postgres_store.py [--quick] [--runs 3] [--pools 8,16] [--turns 3]
                                               [--no-nosync]
    uv run python benchmarks/postgres_store.py --server postgresql://postgres@127.0.0.1:5432
    uv run python benchmarks/postgres_store.py --one turn:postgres/8   (one figure, one JSON line)
    uv run python benchmarks/postgres_store.py --profile concurrent:postgres/8

* a one-step text turn on a fresh agent (``FunctionModel`` answering at once, a runtime opened
  once per process, the path of ``benchmarks/turns.py``): the turn alone (``agent.run``; target
  2 ms wall on PostgreSQL) and whole (session and agent made, enter, run, leave), next to the
  same on SQLite;
* 1,000 sessions on one worker, each running ``--turns`` one-step turns in a row against a model
  with 50 ms latency, all sessions at once: wall and CPU time of the turns (enter, the turns,
  leave), and whole (creating the 1,000 sessions and agents first, one after another), for each
  ``--pools`` size. Target: PostgreSQL's wall time of the turns within 2x of SQLite's. Every
  session's log is read back afterwards (untimed): it must hold its turns.

Stores (``STORE`` below): ``sqlite`` (``synchronous=NORMAL``, the default: a commit is not
flushed to disk), ``sqlite-full`` (``FULL``: every commit flushed, as PostgreSQL's default),
``postgres/N`` (``PostgresStore(url, pool_size=N)``, the server's own settings) and
``postgres-nosync/N`` (the same with ``synchronous_commit=off`` for its connections: a commit
does not wait for the WAL flush, so a crash of the server's machine may lose the last ~0.6 s of
commits, about what ``NORMAL`` risks). The two without a flush per commit say what the store
costs; the two with one say what the disk adds (``pg_test_fsync`` gives its flush time).

The script makes a database of its own on ``--server`` (default ``$TETHER_BENCH_POSTGRES``, else
``$TETHER_TEST_POSTGRES``, else ``postgresql://postgres@127.0.0.1:5432``; trust auth or a
password in the URL), a schema in it per figure, and drops the database at the end. Each figure
runs in a fresh interpreter (this script with ``--one FIGURE:STORE``), ``--runs`` times; the
figures are medians over those processes. CPU time is ``time.process_time()`` (this process
only); wall time is ``time.perf_counter()``; "server cpu" is the CPU time of the server processes
serving the benchmark's database, read from ``/proc`` (a server on this machine only; on a
machine of two cores it competes with the worker). ``--profile`` prints a cProfile of one figure.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import psycopg
from deadlines import scenario
from psycopg.conninfo import conninfo_to_dict

from tether.agents import Agent
from tether.models import FunctionModel, ModelRequest
from tether.runtime import Runtime
from tether.store import SessionStore, SQLiteStore
from tether_postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).parent))
from turns import Clock, fresh_turns, new_agent, opened

#: The issue's targets: a turn on PostgreSQL, in ms of wall time; 1,000 concurrent sessions on
#: PostgreSQL against SQLite, a ratio of wall times.
#: Seconds one figure may take (scaled by TETHER_TEST_TIME_SCALE) before it fails as stuck.
FIGURE_DEADLINE = 900.0
TURN_TARGET_MS = 2.0
CONCURRENT_TARGET = 2.0
SESSIONS = 1000
LATENCY = 0.05
FIGURES = ("turn", "concurrent")
SERVER = os.environ.get(
    "TETHER_BENCH_POSTGRES",
    os.environ.get("TETHER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432"),
)


# -- stores -------------------------------------------------------------------------------------


def _parse_store(spec: str) -> tuple[str, int]:
    """``(kind, pool size)`` of a store spec: ``sqlite``, ``sqlite-full``, ``postgres/N`` or
    ``postgres-nosync/N`` (pool size 0 for SQLite)."""
    kind, _, size = spec.partition("/")
    if kind in ("sqlite", "sqlite-full") and not size:
        return kind, 0
    if kind in ("postgres", "postgres-nosync") and size.isdigit() and int(size) > 0:
        return kind, int(size)
    raise ValueError(
        f"expected a store sqlite, sqlite-full, postgres/N or postgres-nosync/N, not {spec!r}"
    )


@contextlib.contextmanager
def database(server: str) -> Iterator[str]:
    """A new database on ``server`` (dropped afterwards, with any connection left to it): its
    URL."""
    name = f"tether_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
        try:
            yield f"{server}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


class ServerClock:
    """CPU time of the server processes connected to the benchmark's database (its backends,
    read from ``/proc``): only for a server on this machine, else (and for SQLite) ``None``."""

    def __init__(self, admin: psycopg.AsyncConnection[Any] | None = None) -> None:
        self.admin = admin
        self.seen: dict[int, float] = {}

    async def _read(self) -> dict[int, float]:
        assert self.admin is not None
        rows = await (
            await self.admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            )
        ).fetchall()
        found: dict[int, float] = {}
        for (pid,) in rows:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            found[int(pid)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return found

    async def lap(self) -> float | None:
        """Server CPU seconds since the last lap, and start the next."""
        if self.admin is None:
            return None
        now = await self._read()
        spent = sum(cpu - self.seen.get(pid, 0.0) for pid, cpu in now.items())
        self.seen = now
        return spent


def _local(url: str) -> bool:
    host = str(conninfo_to_dict(url).get("host") or "")
    return host in ("", "localhost", "127.0.0.1", "::1") or host.startswith("/")


@contextlib.asynccontextmanager
async def store_for(
    spec: str, database_url: str | None
) -> AsyncIterator[tuple[SessionStore, ServerClock]]:
    """The store ``spec`` names, on a fresh file or a fresh schema of ``database_url`` (dropped
    afterwards), closed afterwards; and the clock of its server's CPU time."""
    kind, pool_size = _parse_store(spec)
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as folder:
        if kind.startswith("sqlite"):
            synchronous = "FULL" if kind == "sqlite-full" else "NORMAL"
            store = SQLiteStore(Path(folder) / "s.db", synchronous=synchronous)
            try:
                yield store, ServerClock()
            finally:
                await store.aclose()
            return
        if database_url is None:
            raise SystemExit(f"--database is needed for {spec}")
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
            await admin.execute(f'CREATE SCHEMA "{schema}"'.encode())
            options = f"-csearch_path={schema}"
            if kind == "postgres-nosync":
                options += " -csynchronous_commit=off"
            url = f"{database_url}?options={quote(options, safe='')}"
            store = PostgresStore(url, pool_size=pool_size)
            try:
                yield store, ServerClock(admin if _local(database_url) else None)
            finally:
                await store.aclose()
                await admin.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())


# -- figures ------------------------------------------------------------------------------------


async def concurrent_sessions(
    runtime: Runtime, server: ServerClock, sessions: int, turns: int, latency: float
) -> dict[str, Any]:
    """``sessions`` agents made one after another, then all at once each entered, running
    ``turns`` one-step turns in a row, and left: the turns alone, and whole (making them too);
    the server's CPU seconds in each (``None`` for SQLite)."""

    async def slow(request: ModelRequest) -> str:
        await anyio.sleep(latency)
        return "ok"

    model = FunctionModel(slow)
    await server.lap()
    clock = Clock()
    agents = [await new_agent(runtime, model) for _ in range(sessions)]
    setup = clock.lap()
    server_setup = await server.lap()
    clock.lap()  # not the server's reading

    async def one(agent: Agent) -> None:
        async with runtime.hold(agent):
            for _ in range(turns):
                await agent.run("hi")

    async with anyio.create_task_group() as group:
        for agent in agents:
            group.start_soon(one, agent)
    ran = clock.lap()
    server_turns = await server.lap()
    model.requests.clear()
    await check_logs(runtime, [agent.session_id for agent in agents], turns)
    return {
        "setup": {"cpu": setup[0], "wall": setup[1], "server": server_setup},
        "turns": {"cpu": ran[0], "wall": ran[1], "server": server_turns},
        "whole": {
            "cpu": setup[0] + ran[0],
            "wall": setup[1] + ran[1],
            "server": None if server_turns is None else (server_setup or 0.0) + server_turns,
        },
    }


async def check_logs(runtime: Runtime, sessions: list[str], turns: int) -> None:
    """Fail unless every session's log holds its ``turns`` ended turns (what was timed was
    stored)."""
    store = runtime.store
    assert store is not None
    for session_id in sessions:
        ended = sum(stored.event.type == "turn/end" for stored in await store.events(session_id))
        if ended != turns:
            raise SystemExit(f"session {session_id} logged {ended} ended turns, not {turns}")


async def one_figure(
    figure: str, spec: str, database_url: str | None, quick: bool, turns: int
) -> dict[str, Any]:
    """One figure on one store, in this process."""
    gc.collect()
    async with store_for(spec, database_url) as (store, server), opened(store) as runtime:
        if figure == "turn":
            runs, warmup = (200 if quick else 1000), 20
            await server.lap()
            found = await fresh_turns(runtime, runs, warmup)
            spent = await server.lap()
            # Per whole turn, warm-up included (the server's clock cannot tell them apart).
            found["server"] = None if spent is None else spent / (runs + warmup)
            return found
        return await concurrent_sessions(runtime, server, SESSIONS, turns, LATENCY)


def run_figure(
    figure: str, spec: str, database_url: str, quick: bool, turns: int
) -> dict[str, Any]:
    """One figure in a fresh interpreter: this script with ``--one``; its last line is JSON."""
    command = [sys.executable, __file__, "--one", f"{figure}:{spec}", "--database", database_url]
    command += ["--turns", str(turns), *(["--quick"] if quick else [])]
    with scenario(f"{' '.join(command[1:])}", FIGURE_DEADLINE * 1.2):  # its own deadline first
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the table ----------------------------------------------------------------------------------


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {clock: statistics.median(s[clock] for s in samples) for clock in ("cpu", "wall")}


def _server(samples: list[Any], unit: str) -> str:
    """The median of the server's CPU seconds in ``samples``, in ``unit`` (``ms`` or ``s``);
    empty for SQLite."""
    found = [sample for sample in samples if sample is not None]
    if not found:
        return ""
    scale = 1e3 if unit == "ms" else 1.0
    return f"  server cpu {statistics.median(found) * scale:6.3f} {unit}"


def _ms(times: dict[str, float]) -> str:
    return f"cpu {times['cpu'] * 1e3:6.3f} ms  wall {times['wall'] * 1e3:6.3f} ms"


def _s(times: dict[str, float]) -> str:
    return f"cpu {times['cpu']:6.3f} s  wall {times['wall']:6.3f} s"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def main(server: str, quick: bool, runs: int, pools: list[int], turns: int, nosync: bool) -> None:
    default = pools[0]
    with database(server) as database_url:
        samples = 200 if quick else 1000
        print(
            f"one-step turn on a fresh agent (medians of {samples} turns per process, median "
            f"of {runs} processes; wall min-max over the processes)"
        )
        turn_stores = ["sqlite", "sqlite-full", f"postgres/{default}"]
        turn_stores += [f"postgres-nosync/{default}"] if nosync else []
        walls: dict[str, float] = {}
        for spec in turn_stores:
            results = [run_figure("turn", spec, database_url, quick, turns) for _ in range(runs)]
            turn = _medians([r["turn"] for r in results])
            whole = _medians([r["whole"] for r in results])
            spread = [r["turn"]["wall"] * 1e3 for r in results]
            walls[spec] = turn["wall"]
            verdict = ""
            if spec.startswith("postgres"):
                ok = turn["wall"] * 1e3 <= TURN_TARGET_MS
                verdict = f"  (target {TURN_TARGET_MS:g} ms wall)  {_verdict(ok)}"
            print(
                f"  {spec:<18} turn   {_ms(turn)}  [{min(spread):.3f}-{max(spread):.3f}]{verdict}"
            )
            parts = " + ".join(
                f"{part} {_medians([r[part] for r in results])['wall'] * 1e3:.3f}"
                for part in ("create", "enter", "turn", "leave")
            )
            server_cpu = _server([r["server"] for r in results], "ms")
            print(f"  {'':<18} whole  {_ms(whole)}{server_cpu}  (wall: {parts} ms)")
        for spec in turn_stores[1:]:
            print(f"  turn wall {spec} / sqlite: {walls[spec] / walls['sqlite']:.1f}x")

        print(
            f"{SESSIONS:,} sessions at once, {turns} one-step turns each, "
            f"{LATENCY * 1e3:.0f} ms model latency (median of {runs} processes)"
        )
        concurrent_stores = ["sqlite", "sqlite-full"]
        concurrent_stores += [f"postgres/{size}" for size in pools]
        concurrent_stores += [f"postgres-nosync/{size}" for size in pools] if nosync else []
        found: dict[str, dict[str, dict[str, float]]] = {}
        for spec in concurrent_stores:
            results = [
                run_figure("concurrent", spec, database_url, quick, turns) for _ in range(runs)
            ]
            found[spec] = {
                part: _medians([r[part] for r in results]) for part in ("setup", "turns", "whole")
            }
            spread = [r["turns"]["wall"] for r in results]
            print(
                f"  {spec:<18} turns  {_s(found[spec]['turns'])}  "
                f"[{min(spread):.3f}-{max(spread):.3f}]"
                f"{_server([r['turns']['server'] for r in results], 's')}"
            )
            print(
                f"  {'':<18} whole  {_s(found[spec]['whole'])}"
                f"{_server([r['whole']['server'] for r in results], 's')}  "
                f"(setup of {SESSIONS:,} sessions: wall {found[spec]['setup']['wall']:.3f} s)"
            )
        base = found["sqlite"]
        for spec in concurrent_stores[1:]:
            turn, whole = found[spec]["turns"], found[spec]["whole"]
            ratio = turn["wall"] / base["turns"]["wall"]
            verdict = ""
            if spec.startswith("postgres"):
                verdict = (
                    f"  (target {CONCURRENT_TARGET:g}x)  {_verdict(ratio <= CONCURRENT_TARGET)}"
                )
            print(
                f"  {spec:<18} / sqlite: turns wall {ratio:4.2f}x  cpu "
                f"{turn['cpu'] / base['turns']['cpu']:4.2f}x;  whole wall "
                f"{whole['wall'] / base['whole']['wall']:4.2f}x{verdict}"
            )


def profile(figure: str, spec: str, server: str, turns: int) -> None:
    """cProfile of one figure on one store (in this process): where the time goes."""
    profiler = cProfile.Profile()

    async def go(database_url: str | None) -> None:
        async with store_for(spec, database_url) as (store, clock), opened(store) as runtime:
            if figure == "turn":
                await fresh_turns(runtime, 20, warmup=20)  # imports and first-use caches
                profiler.enable()
                await fresh_turns(runtime, 1000, warmup=0)
            else:
                profiler.enable()
                await concurrent_sessions(runtime, clock, SESSIONS, turns, LATENCY)
            profiler.disable()

    postgres = spec.startswith("postgres")
    with database(server) if postgres else contextlib.nullcontext(None) as database_url:
        wall = time.perf_counter()
        with scenario(f"profiling {figure} on {spec}", FIGURE_DEADLINE):
            anyio.run(go, database_url)
        wall = time.perf_counter() - wall
    stats = pstats.Stats(profiler).strip_dirs()
    total = stats.total_tt  # pyright: ignore[reportAttributeAccessIssue]
    print(f"cProfile of {figure} on {spec}: {total:.2f} s profiled ({wall:.2f} s wall in all)")
    print("by own time")
    stats.sort_stats("tottime").print_stats(30)
    print("by cumulative time")
    stats.sort_stats("cumulative").print_stats(45)


# -- the command line ---------------------------------------------------------------------------


def _parse_one(value: str) -> tuple[str, str]:
    figure, _, spec = value.partition(":")
    if figure not in FIGURES:
        raise argparse.ArgumentTypeError(
            f"expected FIGURE:STORE with FIGURE one of {', '.join(FIGURES)}, not {value!r}"
        )
    try:
        _parse_store(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return figure, spec


def _parse_pools(value: str) -> list[int]:
    try:
        sizes = [int(part) for part in value.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(
            f"expected pool sizes separated by commas, such as 8,16, not {value!r}"
        )
    return sizes


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="PostgreSQL store figures, next to SQLite.")
    parser.add_argument("--quick", action="store_true", help="fewer turns and runs")
    parser.add_argument(
        "--server", default=SERVER, help=f"PostgreSQL server URL, no database (default {SERVER})"
    )
    parser.add_argument(
        "--runs", type=int, help="processes per figure and store (default 3; --quick 1)"
    )
    parser.add_argument(
        "--pools",
        type=_parse_pools,
        default=[8, 16],
        help="pool sizes of the concurrent figure (default 8,16; the first is the turn's)",
    )
    parser.add_argument(
        "--turns", type=int, default=3, help="turns per session in the concurrent figure"
    )
    parser.add_argument(
        "--no-nosync",
        dest="nosync",
        action="store_false",
        help="leave out the postgres-nosync/N rows (synchronous_commit=off)",
    )
    parser.add_argument(
        "--one",
        type=_parse_one,
        metavar="FIGURE:STORE",
        help="run one figure in this process and print it as one JSON line",
    )
    parser.add_argument(
        "--database", help="with --one: the database URL to make a schema in (default: a new one)"
    )
    parser.add_argument(
        "--profile",
        type=_parse_one,
        metavar="FIGURE:STORE",
        help="cProfile one figure on one store and print it",
    )
    arguments = parser.parse_args()
    if arguments.runs is not None and arguments.runs < 1:
        parser.error("--runs must be at least 1")
    if arguments.turns < 1:
        parser.error("--turns must be at least 1")
    if arguments.profile is not None:
        figure, spec = arguments.profile
        profile(figure, spec, arguments.server, arguments.turns)
    elif arguments.one is not None:
        figure, spec = arguments.one
        with contextlib.ExitStack() as stack:
            url = arguments.database
            if url is None and spec.startswith("postgres"):
                url = stack.enter_context(database(arguments.server))
            with scenario(f"{figure} on {spec}", FIGURE_DEADLINE):
                result = anyio.run(one_figure, figure, spec, url, arguments.quick, arguments.turns)
            print(json.dumps(result))
    else:
        main(
            arguments.server,
            arguments.quick,
            arguments.runs or (1 if arguments.quick else 3),
            arguments.pools,
            arguments.turns,
            arguments.nosync,
        )
