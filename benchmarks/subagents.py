"""Delegation figures of issues 5 and 14, as medians of CPU time and wall time.

    uv run python benchmarks/subagents.py [--quick] [--children 1000,2000,4000] [--runs 3]
    uv run python benchmarks/subagents.py --one background:4000   (one figure, one JSON line)

* a delegation round trip: the parent calls the ``subagent`` tool (spawn provider), the child
  answers in one step, the parent answers; ``FunctionModel``; in-memory and SQLite stores. Two
  ways: the turn alone (``agent.run``; budgets 0.5 ms and 1 ms) and whole (compose the parent,
  enter, run, leave);
* concurrent children: N background one-shot children started by one step of N ``subagent``
  calls, 50 ms model latency per child request, for N = 1,000, 2,000 and 4,000: the wall and CPU
  time from the parent's prompt until every child has ended (budget 1.0 s wall at 1,000), the
  whole cost (compose, enter, the same, leave), resident memory added, and the share of CPU spent
  in the garbage collector (``gc.callbacks``, with the collections per generation). The ratio of
  the largest to the smallest N says whether the cost is linear (issue 14: 4,000 / 1,000 at most
  4.4; issue 5: 2,000 / 1,000 at most 2.2);
* a fork child's first request against the parent's request prefix: the share of the parent's
  prefix bytes (system blocks, tool schemas, messages through its last completed turn) that the
  child's first request starts with (target 100 %).

Every figure, and every run of every N, runs in a fresh interpreter (this script with
``--one FIGURE:ARGUMENT``), so one size's garbage, caches and grown heap never bleed into the
next; the concurrent-children figures are medians over ``--runs`` processes. CPU time is
``time.process_time()``; wall time is ``time.perf_counter()``. ``benchmarks/child_footprint.py``
breaks a live child's memory down by the line that allocates it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from deadlines import refused, scenario

from tether import load_kernel
from tether.agents import AgentLimits
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import MemoryStore, SessionStore, SQLiteStore
from tether.testing import write_profile

ROUND_TRIP_BUDGET_MS = {"memory": 0.5, "sqlite": 1.0}
#: Seconds one figure may take (scaled by TETHER_TEST_TIME_SCALE) before it fails as stuck.
FIGURE_DEADLINE = 600.0
LATENCY = 0.05
#: Issue 14: wall time of the largest N over the smallest, for 4,000 over 1,000.
LINEAR_TARGET = 4.4
FIGURES = ("round-trip", "background", "fork-prefix")
STORES = ("memory", "sqlite")


def _profile(folder: Path, provider: str = "spawn") -> Path:
    return write_profile(
        folder,
        f"""
        [tether]
        plugins = ["spawn", "fork", "subagent"]
        [plugin.subagent]
        provider = "{provider}"
        [agent.main]
        """,
        name=f"{provider}.toml",
    )


def _delegate(background: bool = False, count: int = 1) -> ModelResponse:
    calls = tuple(
        ToolCall(
            id=f"d{n}",
            name="subagent",
            arguments={"description": "a small task", "prompt": f"task {n}"}
            | ({"run_in_background": True} if background else {}),
        )
        for n in range(count)
    )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


class Clock:
    """CPU and wall time since it was made (or last read)."""

    def __init__(self) -> None:
        self.cpu = time.process_time()
        self.wall = time.perf_counter()

    def lap(self) -> dict[str, float]:
        """CPU and wall seconds since the last lap, and start the next."""
        cpu, wall = time.process_time(), time.perf_counter()
        lap = {"cpu": cpu - self.cpu, "wall": wall - self.wall}
        self.cpu, self.wall = cpu, wall
        return lap


def _add(*laps: dict[str, float]) -> dict[str, float]:
    return {clock: sum(lap[clock] for lap in laps) for clock in ("cpu", "wall")}


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {clock: statistics.median(s[clock] for s in samples) for clock in ("cpu", "wall")}


class CollectorClock:
    """Time spent in the garbage collector, per generation, through ``gc.callbacks`` (CPU
    time of the collecting thread)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started
            self.collections[info["generation"]] += 1


async def round_trips(folder: Path, store: SessionStore, runs: int) -> dict[str, Any]:
    """Medians of one delegation round trip on a fresh parent: the turn alone, and whole."""
    kernel = load_kernel(_profile(folder), entry_points=True)

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.session_label is not None:
            return "child answer"  # the child
        last = request.messages[-1]
        return "parent answer" if last.role == "tool" else _delegate()

    whole: list[dict[str, float]] = []
    turn: list[dict[str, float]] = []
    async with Runtime.open(kernel, store) as runtime:  # once per process, as tether run does
        for n in range(runs + 10):  # the first ten warm caches up
            clock = Clock()
            agent = await runtime.compose(model=FunctionModel(answer))
            async with runtime.hold(agent):
                setup = clock.lap()
                await agent.run("go")
                run = clock.lap()
            leave = clock.lap()
            if n >= 10:
                turn.append(run)
                whole.append(_add(setup, run, leave))
    return {"whole": _medians(whole), "turn": _medians(turn)}


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def background(
    folder: Path, count: int, latency: float, working: int | None = None
) -> dict[str, Any]:
    """``count`` background children started at once: the children alone (from the prompt
    until every child has ended), whole (compose, enter, the same, leave), memory, GC. The
    parent may have ``working`` tasks at once (default ``count``); a refused call fails the
    benchmark at once instead of waiting for a child that never started."""
    kernel = load_kernel(_profile(folder), entry_points=True)
    ended = anyio.Event()
    finished = 0
    answers: list[str] = []

    async def answer(request: ModelRequest) -> ModelResponse | str:
        if request.session_label is not None:
            await anyio.sleep(latency)
            return "child answer"
        if len(request.messages) == 1:
            return _delegate(background=True, count=count)
        if not answers:  # the step after the calls: their receipts, or refusals
            answers.extend(m.content for m in request.messages if m.role == "tool")
            if any(not text.startswith("Started task ") for text in answers):
                ended.set()  # no use waiting: some children never started
        return "noted"

    def on_event(event: object) -> None:
        nonlocal finished
        if getattr(event, "kind", None) == "end":
            finished += 1
            if finished == count:
                ended.set()

    gc.collect()
    before = _rss_mb()
    with CollectorClock() as collector:
        clock = Clock()
        # Opened as tether run opens it: the collector tuned while it is open.
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            runtime.subagents.on_event(on_event)
            limits = AgentLimits(max_steps=10_000, max_working_tasks=working or count)
            agent = await runtime.compose(model=FunctionModel(answer), limits=limits)
            async with runtime.hold(agent):
                setup = clock.lap()
                gc_before = collector.seconds
                await agent.followup("start them all")
                await ended.wait()
                refused(answers, f"{count} background children")
                children = clock.lap()
                gc_children = collector.seconds - gc_before
                memory = _rss_mb() - before
                await agent.when_idle()
            leave = clock.lap()
    whole = _add(setup, children, leave)
    return {
        "children": children,
        "whole": whole,
        "rss_mb": memory,
        "gc_share": gc_children / children["cpu"] if children["cpu"] else 0.0,
        "gc_share_whole": collector.seconds / whole["cpu"] if whole["cpu"] else 0.0,
        "collections": collector.collections,
    }


async def fork_prefix(folder: Path) -> dict[str, Any]:
    kernel = load_kernel(_profile(folder, "fork"), entry_points=True)
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse | str:
        requests.append(request)
        if request.session_label is not None:
            return "child answer"
        last = request.messages[-1]
        if last.role == "user" and last.content == "now delegate":
            return _delegate()
        return "parent answer"

    async with Runtime.open(kernel, MemoryStore()) as runtime:
        agent = await runtime.compose(model=FunctionModel(answer))
        async with runtime.hold(agent):
            await agent.run("first question")
            await agent.run("second question")
            await agent.run("now delegate")
    parent = next(r for r in requests if r.messages[-1].content == "now delegate")
    child = next(r for r in requests if r.session_label is not None)
    completed = len(parent.messages) - 1  # the delegating turn's own message is not inherited

    def blob(request: ModelRequest, messages: int) -> bytes:
        head = {
            "system": list(request.system),
            "tools": [t.model_dump() for t in request.tools],
        }
        body = [m.model_dump() for m in request.messages[:messages]]
        return json.dumps(head).encode() + b"".join(json.dumps(m).encode() for m in body)

    prefix = blob(parent, completed)
    child_bytes = blob(child, len(child.messages))
    shared = 0
    for a, b in zip(prefix, child_bytes, strict=False):
        if a != b:
            break
        shared += 1
    return {"share": shared / len(prefix)}


async def one_figure(
    figure: str, argument: str, quick: bool, working: int | None = None
) -> dict[str, Any]:
    """One figure, in this process."""
    with tempfile.TemporaryDirectory(prefix="tether-subagents-") as tmp:
        folder = Path(tmp)
        if figure == "round-trip":
            store = MemoryStore() if argument == "memory" else SQLiteStore(folder / "s.db")
            try:
                return await round_trips(folder, store, 100 if quick else 500)
            finally:
                await store.aclose()
        if figure == "background":
            return await background(folder, int(argument), LATENCY, working)
        return await fork_prefix(folder)


def run_figure(
    figure: str, argument: str, quick: bool, working: int | None = None
) -> dict[str, Any]:
    """One figure in a fresh interpreter: this script with ``--one``; its last line is JSON.
    The child has its own deadline; this one only catches a child that cannot even stop."""
    command = [sys.executable, __file__, "--one", f"{figure}:{argument}"]
    if quick:
        command.append("--quick")
    if working is not None:
        command += ["--max-working-tasks", str(working)]
    with scenario(f"{figure} {argument} (in {' '.join(command[1:])})", FIGURE_DEADLINE * 1.2):
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ms(times: dict[str, float]) -> str:
    return f"cpu {times['cpu'] * 1e3:7.3f} ms  wall {times['wall'] * 1e3:7.3f} ms"


def _s(times: dict[str, float]) -> str:
    return f"cpu {times['cpu']:6.3f} s  wall {times['wall']:6.3f} s"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def main(quick: bool, counts: list[int], runs: int, working: int | None) -> None:
    trips = 100 if quick else 500
    print(f"delegation round trip, spawn (medians of {trips}, one process per store)")
    for store in STORES:
        result = run_figure("round-trip", store, quick)
        budget = ROUND_TRIP_BUDGET_MS[store]
        turn = result["turn"]
        print(f"  {store:<7} whole      {_ms(result['whole'])}")
        print(
            f"  {store:<7} turn only  {_ms(turn)}  (budget {budget} ms)  "
            f"{_verdict(turn['cpu'] * 1e3 <= budget)}"
        )
    print(
        f"background one-shot children, {LATENCY * 1e3:.0f} ms model latency "
        f"(medians of {runs} processes per size)"
    )
    walls: dict[int, dict[str, float]] = {}
    for count in counts:
        samples = [run_figure("background", str(count), quick, working) for _ in range(runs)]
        children = _medians([s["children"] for s in samples])
        whole = _medians([s["whole"] for s in samples])
        share = statistics.median(s["gc_share"] for s in samples)
        collections = samples[len(samples) // 2]["collections"]
        memory = statistics.median(s["rss_mb"] for s in samples)
        walls[count] = children
        print(f"  {count:>5} children  {_s(children)}  +{memory:6.1f} MB resident")
        print(
            f"  {'':>5}   whole     {_s(whole)}  GC {share:5.1%} of CPU "
            f"(collections by generation {collections})"
        )
    first = counts[0]
    for count in counts[1:]:
        wall = walls[count]["wall"] / walls[first]["wall"]
        cpu = walls[count]["cpu"] / walls[first]["cpu"]
        scale = count / first
        target = LINEAR_TARGET / 4 * scale  # 4.4 for four times the children, 2.2 for twice
        print(
            f"  ratio {count}/{first}: wall {wall:.2f}  cpu {cpu:.2f}  "
            f"(target {target:.2f}; linear {scale:.2f})  {_verdict(wall <= target)}"
        )
    share = run_figure("fork-prefix", "-", quick)["share"]
    print(f"fork child's first request reuses {share:.1%} of the parent's prefix bytes")


def _parse_one(value: str) -> tuple[str, str]:
    figure, _, argument = value.partition(":")
    ok = (
        (figure == "round-trip" and argument in STORES)
        or (figure == "background" and argument.isdigit() and int(argument) > 0)
        or figure == "fork-prefix"
    )
    if not ok:
        raise argparse.ArgumentTypeError(
            "expected round-trip:memory, round-trip:sqlite, background:N (N > 0) or "
            f"fork-prefix, not {value!r}"
        )
    return figure, argument


def _parse_counts(value: str) -> list[int]:
    try:
        counts = [int(part) for part in value.split(",")]
    except ValueError:
        counts = []
    if not counts or any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(
            f"expected child counts separated by commas, such as 1000,2000,4000, not {value!r}"
        )
    return sorted(counts)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Delegation figures of issues 5 and 14.")
    parser.add_argument("--quick", action="store_true", help="fewer runs and children")
    parser.add_argument(
        "--children",
        type=_parse_counts,
        help="concurrent-children sizes (default 1000,2000,4000; --quick 200,400,800)",
    )
    parser.add_argument(
        "--runs", type=int, help="processes per concurrent-children size (default 3; --quick 1)"
    )
    parser.add_argument(
        "--max-working-tasks",
        type=int,
        metavar="N",
        help="the parent's working-task limit (default: as many as it starts children)",
    )
    parser.add_argument(
        "--one",
        type=_parse_one,
        metavar="FIGURE:ARGUMENT",
        help="run one figure in this process and print it as one JSON line",
    )
    arguments = parser.parse_args()
    if arguments.runs is not None and arguments.runs < 1:
        parser.error("--runs must be at least 1")
    if arguments.max_working_tasks is not None and arguments.max_working_tasks < 1:
        parser.error("--max-working-tasks must be at least 1")
    working = arguments.max_working_tasks
    if arguments.one is not None:
        figure, argument = arguments.one
        with scenario(f"{figure} {argument}", FIGURE_DEADLINE):
            result = anyio.run(one_figure, figure, argument, arguments.quick, working)
        print(json.dumps(result))
    else:
        quick = arguments.quick
        counts = arguments.children or ([200, 400, 800] if quick else [1000, 2000, 4000])
        main(quick, counts, arguments.runs or (1 if quick else 3), working)
