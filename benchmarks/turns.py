"""Turn-loop figures of issues 3 and 14, as medians of CPU time and wall time.

    uv run python benchmarks/turns.py [--quick] [--profile [memory|sqlite]]
    uv run python benchmarks/turns.py --one fresh:memory      (one figure, one JSON line)

* a one-step text turn on a fresh agent, ``FunctionModel``, in-memory store and SQLite store (a
  real file in a temporary folder), two ways:
  - whole: session + agent + enter + run + leave, what a peer's ``run()`` includes
    (issue 14 targets: 80 µs memory, 200 µs SQLite), in a runtime opened once per process
    (``Runtime.open``, as an application or ``tether run`` opens it);
  - turn only: ``await agent.run(prompt)`` on the entered agent (issue 3 budgets: 150 µs
    memory, 400 µs SQLite);
* turn 1,000 of one long session against turn 1, both stores                (budget 1.5x)
* 1,000 sessions running one turn each concurrently, 50 ms model latency: the turns alone
  (budget 1.0 s wall), and whole (creating the sessions and agents too).

A "turn" is ``await agent.run(prompt)``: the message is durably accepted into the inbox, the
loop claims it, one model request, the answer and ``turn/end`` are stored, the agent is idle.

Each figure runs in a fresh interpreter (this script with ``--one FIGURE:STORE``), so one
figure's garbage, caches and grown heap never bleed into the next. CPU time is
``time.process_time()``; wall time is ``time.perf_counter()``. Verdicts use the CPU median, the
steadier one on a busy machine, except where the figure waits on model latency (wall).
``--profile [STORE]`` prints a cProfile of the whole fresh turn instead.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from deadlines import scenario

from tether import load_kernel
from tether.agents import Agent
from tether.models import FunctionModel, Model, ModelRequest
from tether.runtime import Runtime
from tether.store import MemoryStore, SessionStore, SQLiteStore

#: Issue 14's targets for the whole fresh turn, in µs.
#: Seconds one figure may take (scaled by TETHER_TEST_TIME_SCALE) before it fails as stuck.
FIGURE_DEADLINE = 900.0
WHOLE_TARGET = {"memory": 80.0, "sqlite": 200.0}
#: Issue 3's budgets for the fresh turn alone, in µs.
TURN_BUDGET = {"memory": 150.0, "sqlite": 400.0}
FIGURES = ("fresh", "long", "concurrent")
STORES = ("memory", "sqlite")


def answer(request: ModelRequest) -> str:
    return "ok"


@contextlib.asynccontextmanager
async def opened(store: SessionStore) -> AsyncIterator[Runtime]:
    """The process's runtime on ``store``, on a kernel of an empty profile, opened once (as a
    peer's agent definition is made once, and as an application opens it once): what each
    sample pays is the session and the agent. Inside ``Runtime.open`` one keeper renews the
    leases of every session of the process, so an agent starts no task of its own for it."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as folder:
        (Path(folder) / "tether.toml").write_text("[tether]\n", encoding="utf-8")
        kernel = load_kernel(Path(folder) / "tether.toml", entry_points=False)
        async with Runtime.open(kernel, store) as runtime:
            yield runtime


async def new_agent(runtime: Runtime, model: Model) -> Agent:
    """A new session and its agent, not yet entered: the setup half of a peer's ``run()``
    (``runtime.compose``: the session is created, its agent composed from the preset).
    The one place to change when agents are made another way."""
    return await runtime.compose(model=model)


class Clock:
    """CPU and wall time since it was made (or last read)."""

    def __init__(self) -> None:
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def lap(self) -> tuple[float, float]:
        """``(cpu, wall)`` seconds since the last lap, and start the next."""
        cpu, wall = time.process_time(), time.perf_counter()
        lap = (cpu - self.cpu, wall - self.wall)
        self.cpu, self.wall = cpu, wall
        return lap


def _medians(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "cpu": statistics.median(s[0] for s in samples),
        "wall": statistics.median(s[1] for s in samples),
    }


async def fresh_turns(runtime: Runtime, runs: int, warmup: int = 20) -> dict[str, Any]:
    """Medians of one text turn, each on a fresh agent and session: whole, turn only, and the
    whole's parts (the session and agent made, entering, the turn, leaving)."""
    model = FunctionModel(answer)
    parts: dict[str, list[tuple[float, float]]] = {
        "whole": [],
        "create": [],
        "enter": [],
        "turn": [],
        "leave": [],
    }
    for n in range(warmup + runs):
        clock = Clock()
        agent = await new_agent(runtime, model)
        create = clock.lap()
        async with runtime.hold(agent):
            enter = clock.lap()
            await agent.run("hi")
            turn = clock.lap()
        leave = clock.lap()
        model.requests.clear()  # the benchmark's own record, not the agent's
        if n >= warmup:
            laps = {"create": create, "enter": enter, "turn": turn, "leave": leave}
            for name, lap in laps.items():
                parts[name].append(lap)
            parts["whole"].append(
                (sum(lap[0] for lap in laps.values()), sum(lap[1] for lap in laps.values()))
            )
    return {name: _medians(samples) for name, samples in parts.items()}


async def long_session(runtime: Runtime, turns: int) -> dict[str, Any]:
    """Medians of turns 1-20 and of the last 20 of one ``turns``-long session."""
    model = FunctionModel(answer)
    agent = await new_agent(runtime, model)
    samples: list[tuple[float, float]] = []
    async with runtime.hold(agent):
        for _ in range(turns):
            clock = Clock()
            await agent.run("hi")
            samples.append(clock.lap())
            model.requests.clear()
    return {"first": _medians(samples[:20]), "last": _medians(samples[-20:])}


async def concurrent_sessions(runtime: Runtime, sessions: int, latency: float) -> dict[str, Any]:
    """``sessions`` agents each running one turn, all at once: the turns alone, and whole
    (creating the sessions and agents too)."""

    async def slow(request: ModelRequest) -> str:
        await anyio.sleep(latency)
        return "ok"

    model = FunctionModel(slow)
    clock = Clock()
    agents = [await new_agent(runtime, model) for _ in range(sessions)]
    setup = clock.lap()

    async def one(agent: Agent) -> None:
        async with runtime.hold(agent):
            await agent.run("hi")

    async with anyio.create_task_group() as group:
        for agent in agents:
            group.start_soon(one, agent)
    turns = clock.lap()
    return {
        "turns": {"cpu": turns[0], "wall": turns[1]},
        "whole": {"cpu": setup[0] + turns[0], "wall": setup[1] + turns[1]},
    }


async def one_figure(figure: str, store_name: str, quick: bool) -> dict[str, Any]:
    """One figure on one store, in this process."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        store: SessionStore = (
            MemoryStore() if store_name == "memory" else SQLiteStore(Path(tmp) / "s.db")
        )
        gc.collect()
        try:
            async with opened(store) as runtime:
                if figure == "fresh":
                    return await fresh_turns(runtime, 300 if quick else 2000)
                if figure == "long":
                    return await long_session(runtime, 300 if quick else 1000)
                walls = [
                    await concurrent_sessions(runtime, 1000, 0.05) for _ in range(1 if quick else 3)
                ]
            return {
                part: {
                    clock: statistics.median(w[part][clock] for w in walls)
                    for clock in ("cpu", "wall")
                }
                for part in ("turns", "whole")
            }
        finally:
            await store.aclose()


def run_figure(figure: str, store: str, quick: bool) -> dict[str, Any]:
    """One figure in a fresh interpreter: this script with ``--one``; its last line is JSON."""
    command = [sys.executable, __file__, "--one", f"{figure}:{store}"]
    with scenario(f"{figure} on {store} (in a fresh interpreter)", FIGURE_DEADLINE * 1.2):
        done = subprocess.run(
            [*command, *(["--quick"] if quick else [])], capture_output=True, text=True
        )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _us(times: dict[str, float]) -> str:
    return f"cpu {times['cpu'] * 1e6:7.1f} µs  wall {times['wall'] * 1e6:7.1f} µs"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def main(quick: bool) -> None:
    runs = 300 if quick else 2000
    print(f"one-step text turn on a fresh agent (medians of {runs}, one process per store)")
    for store in STORES:
        result = run_figure("fresh", store, quick)
        whole, turn = result["whole"], result["turn"]
        target, budget = WHOLE_TARGET[store], TURN_BUDGET[store]
        print(
            f"  {store:<7} whole      {_us(whole)}  (target {target:.0f} µs)  "
            f"{_verdict(whole['cpu'] * 1e6 <= target)}"
        )
        print(
            f"  {store:<7} turn only  {_us(turn)}  (budget {budget:.0f} µs)  "
            f"{_verdict(turn['cpu'] * 1e6 <= budget)}"
        )
        print(
            f"  {'':<7} whole = session and agent {result['create']['cpu'] * 1e6:.1f} + enter "
            f"{result['enter']['cpu'] * 1e6:.1f} + turn {turn['cpu'] * 1e6:.1f} + leave "
            f"{result['leave']['cpu'] * 1e6:.1f} µs (CPU medians; medians do not add up exactly)"
        )
    turns = 300 if quick else 1000
    print(f"turn {turns} of one session against turn 1 (medians of 20 turns each)")
    for store in STORES:
        result = run_figure("long", store, quick)
        first, last = result["first"], result["last"]
        ratio = last["cpu"] / first["cpu"]
        print(
            f"  {store:<7} first {_us(first)}\n"
            f"  {'':<7} last  {_us(last)}  cpu ratio {ratio:4.2f}  (budget 1.5)  "
            f"{_verdict(ratio <= 1.5)}"
        )
    repeats = 1 if quick else 3
    print(f"1,000 sessions, one turn each, concurrently, 50 ms model latency (median of {repeats})")
    for store in STORES:
        result = run_figure("concurrent", store, quick)
        turn, whole = result["turns"], result["whole"]
        print(
            f"  {store:<7} turns  cpu {turn['cpu']:6.3f} s  wall {turn['wall']:6.3f} s  "
            f"(budget 1.0 s wall)  {_verdict(turn['wall'] <= 1.0)}"
        )
        print(f"  {'':<7} whole  cpu {whole['cpu']:6.3f} s  wall {whole['wall']:6.3f} s")


def profile(store_name: str, runs: int = 3000) -> None:
    """cProfile of ``runs`` whole fresh turns (after a warm-up): where the time goes. Time the
    garbage collector takes lands in whatever function allocated; it is also given alone."""

    async def turns(folder: Path) -> None:
        store = MemoryStore() if store_name == "memory" else SQLiteStore(folder / "s.db")
        model = FunctionModel(answer)
        async with opened(store) as runtime:
            for n in range(runs + 50):
                if n == 50:  # after imports and first-use caches
                    gc.callbacks.append(collector)
                    profiler.enable()
                agent = await new_agent(runtime, model)
                async with runtime.hold(agent):
                    await agent.run("hi")
                model.requests.clear()
            profiler.disable()
            gc.callbacks.remove(collector)
        await store.aclose()

    collected = [0.0, 0.0]  # seconds in the collector, start of the current collection

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected[1] = time.thread_time()
        else:
            collected[0] += time.thread_time() - collected[1]

    profiler = cProfile.Profile()
    with (
        tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp,
        scenario("profiling fresh turns", FIGURE_DEADLINE),
    ):
        anyio.run(turns, Path(tmp))
    stats = pstats.Stats(profiler).strip_dirs()
    total = stats.total_tt  # pyright: ignore[reportAttributeAccessIssue]
    print(
        f"cProfile of {runs} whole fresh turns ({store_name} store): {total:.2f} s profiled, "
        f"of which {collected[0]:.2f} s in the garbage collector"
    )
    print("by own time")
    stats.sort_stats("tottime").print_stats(35)
    print("by cumulative time")
    stats.sort_stats("cumulative").print_stats(50)


def _parse_one(value: str) -> tuple[str, str]:
    figure, _, store = value.partition(":")
    if figure not in FIGURES or store not in STORES:
        raise argparse.ArgumentTypeError(
            f"expected FIGURE:STORE with FIGURE one of {', '.join(FIGURES)} and STORE one of "
            f"{', '.join(STORES)}, not {value!r}"
        )
    return figure, store


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Turn-loop figures of issues 3 and 14 (medians).")
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke check")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="memory",
        choices=STORES,
        help="cProfile the whole fresh turn on STORE (default memory) and print it",
    )
    parser.add_argument(
        "--one",
        type=_parse_one,
        metavar="FIGURE:STORE",
        help="run one figure in this process and print it as one JSON line",
    )
    arguments = parser.parse_args()
    if arguments.profile is not None:
        profile(arguments.profile)
    elif arguments.one is not None:
        figure, store = arguments.one
        with scenario(f"{figure} on {store}", FIGURE_DEADLINE):
            result = anyio.run(one_figure, figure, store, arguments.quick)
        print(json.dumps(result))
    else:
        main(arguments.quick)
