"""Declared subagents (specialists) figures of issue 16, as medians over fresh interpreters.

    uv run python benchmarks/specialists.py [--quick] [--procs 5] [--runs 200]
    uv run python benchmarks/specialists.py --one compose        (one process, one JSON line;
                                                                  compose:lazy, trip:sqlite, ...)
    uv run python benchmarks/specialists.py --profile compose     (cProfile of one cold compose)
    uv run python benchmarks/specialists.py --profile trip:sqlite (cProfile of the round trips)

1. **Composing an agent folder with 10 specialists** (targets: 20 ms cold, 1 ms cached). The
   profile is ``[tether] agents = ["agents"]`` with ``agents/main/`` (agent.toml with a
   ``function:`` model, instructions.md, a tiny model module) and ``subagents/s0`` ..
   ``s9`` (agent.toml with a description, every other one a ``function:`` model, and
   instructions.md). *Cold* is, in a fresh interpreter, after ``import tether`` and the
   modules tether imports lazily on this path (``jsonschema``, ``importlib.metadata`` and the
   standard library modules they use: ``LAZY_IMPORTS``): ``load_kernel`` (find the profile,
   read the TOML and the agent folders, validate, discover installed plugins by entry points
   as ``tether run`` does, load the layers), ``Runtime.preset("main")`` (build the preset and
   its 13 specialist and task tools) and ``Runtime.compose(agent="main")`` on a
   ``MemoryStore`` (resolve the ``function:`` model, importing its module, create the session
   header, build the agent). The modules the cold compose still imported are listed with the
   figure. "cold, lazy imports too" is the same in a process that did not import
   ``LAZY_IMPORTS`` first (where site-packages have no ``.pyc`` files, as with
   ``PYTHONDONTWRITEBYTECODE``, that includes compiling them); "new tree, warm process" is a
   second, identical folder tree at another path in the same process (nothing of that tree
   cached, every process-wide cache warm). *Cached* is ``Runtime.compose(agent="main")``
   again in the same runtime (the preset cached; a new session each time): the median of the
   second and later composes. Each figure is the median over ``--procs`` processes; the
   verdicts read CPU time (``time.process_time()``), which a busy machine does not inflate.

2. **A declared subagent's delegation round trip against the ``subagent`` tool's spawn round
   trip** (target: within 10 %). A fresh parent (composed outside the clock) is sent "go"; its
   model (a ``FunctionModel``, the same object serves the child: a specialist without a model
   of its own runs on its host's) calls the tool once; the call returns a receipt; the child
   answers in one step; its result reaches the parent as a message (``<task_result>``, or the
   settlement notice the ``subagent`` tool gave before issue 16) and the parent answers. The
   clock runs from the prompt to the ``turn/end`` of the parent's final answer ("answer"),
   and on until ``Runtime.settle`` returns ("quiet"). Cases, on a SQLite store in a temporary
   folder:

   * ``continuable``: a specialist call (no ``output_schema``: a continuable child, eve's
     receipt, ``<task_result>``) against ``subagent`` with ``background = "continuable"``;
   * ``one-shot``: a specialist call with ``output_schema`` (a one-shot task, JSON result)
     against ``subagent`` with ``run_in_background = true`` (a one-shot background child),
     and against the same with ``[plugin.subagent] output_schema`` (JSON checked both sides);

   and on a ``MemoryStore`` (where a specialist call is always one-shot): ``one-shot`` (no
   schema) against the spawn one-shot background job, and ``one-shot+schema``. All variants
   run in one process with a runtime each, interleaved (the order rotates every round), after
   10 warm-up rounds; each process reports medians of CPU time (``time.process_time()``) and
   wall time (``time.perf_counter()``), and the table shows the median over ``--procs``
   processes, with the ratio of medians specialist / spawn (the verdict reads CPU time).
   Every trip is checked: the receipt says what kind of child started, exactly one result
   arrived with the child's answer, and the parent's last message is its answer.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from deadlines import scenario

from tether import load_kernel
from tether.agents import Agent
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import AssistantMessage, Event, MemoryStore, SessionStore, SQLiteStore, TurnEnded
from tether.testing import write_profile

#: Seconds one figure may take (scaled by TETHER_TEST_TIME_SCALE) before it fails as stuck.
FIGURE_DEADLINE = 900.0
SPECIALISTS = 10
COMPOSE_TARGET_MS = {"cold": 20.0, "cached": 1.0}
#: A specialist's round trip may cost at most this much more than spawn's.
TRIP_TARGET = 1.10
WARMUP = 10
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["verdict"],
    "properties": {"verdict": {"type": "string"}},
}
RESULT_MARKS = ("<task_result", "Background subagent ", "Background subagent task ")
STORES = ("sqlite", "memory")
#: What tether imports lazily on the way to a composed folder agent (outside the cold clock).
LAZY_IMPORTS = ("jsonschema", "importlib.metadata", "email.parser", "encodings.utf_8_sig")


def _ms(seconds: float) -> float:
    return seconds * 1e3


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


def _medians(samples: list[dict[str, float]]) -> dict[str, float]:
    return {clock: statistics.median(s[clock] for s in samples) for clock in samples[0]}


# ---------------------------------------------------------------------- 1. compose


BRAINS = '''\
"""Models of the benchmark's folder agents (never called while composing)."""


def main(request):
    return "main answer"


def child(request):
    return "child answer"
'''


def agent_tree(root: Path, tag: str) -> Path:
    """``root/tether.toml`` with ``agents/main`` and its ``SPECIALISTS`` subagent folders;
    the model module is named after ``tag`` (each tree imports its own)."""
    main = root / "agents" / "main"
    main.mkdir(parents=True)
    module = f"brains_{tag}"
    (main / f"{module}.py").write_text(BRAINS)
    (main / "agent.toml").write_text(
        f'description = "Runs the show."\nmodel = "function:{module}:main"\n'
    )
    (main / "instructions.md").write_text("You run the show; delegate to your specialists.\n")
    for n in range(SPECIALISTS):
        folder = main / "subagents" / f"s{n}"
        folder.mkdir(parents=True)
        toml = f'description = "Specialist {n}: answers questions about topic {n}."\n'
        if n % 2 == 0:  # "maybe model": every other one has its own
            (folder / f"{module}_{n}.py").write_text(BRAINS)
            toml += f'model = "function:{module}_{n}:child"\n'
        (folder / "agent.toml").write_text(toml)
        (folder / "instructions.md").write_text(f"You know everything about topic {n}.\n")
    return write_profile(root, '[tether]\nagents = ["agents"]\n')


async def compose_cold(profile: Path) -> tuple[dict[str, dict[str, float]], Runtime]:
    """Load ``profile`` and compose its main agent once: the laps, and the runtime."""
    clock = Clock()
    kernel = load_kernel(profile)
    load = clock.lap()
    runtime = Runtime(kernel, MemoryStore())
    preset = runtime.preset("main")
    build = clock.lap()
    agent = await runtime.compose(agent="main")
    compose = clock.lap()
    names = [tool.name for tool in agent.tools]
    if len(preset.specialists) != SPECIALISTS or names[:SPECIALISTS] != [
        f"s{n}" for n in range(SPECIALISTS)
    ]:
        raise AssertionError(f"expected {SPECIALISTS} specialist tools, got {names}")
    total = {clock: load[clock] + build[clock] + compose[clock] for clock in load}
    return {"load": load, "preset": build, "compose": compose, "total": total}, runtime


async def compose_figure(runs: int, lazy: bool) -> dict[str, Any]:
    """One process: cold (the first compose in the process; ``lazy``: without importing
    ``LAZY_IMPORTS`` first), a new tree in the warm process, and cached composes."""
    if not lazy:
        for module in LAZY_IMPORTS:
            importlib.import_module(module)
    with tempfile.TemporaryDirectory(prefix="tether-specialists-") as tmp:
        profile = agent_tree(Path(tmp) / "a", "a")
        before = set(sys.modules)
        first, _ = await compose_cold(profile)
        imported = sorted({name.split(".")[0] for name in set(sys.modules) - before})
        warm, runtime = await compose_cold(agent_tree(Path(tmp) / "b", "b"))
        samples: list[dict[str, float]] = []
        for _ in range(runs):
            clock = Clock()
            await runtime.compose(agent="main")
            samples.append(clock.lap())
    return {"first": first, "imported": imported, "warm": warm, "cached": _medians(samples)}


# ---------------------------------------------------------------------- 2. round trips


@dataclass(frozen=True)
class Variant:
    """One way to delegate: a profile, the tool call the parent makes, what the child says."""

    name: str
    profile: Callable[[Path], Path]
    call: ToolCall
    child_answer: str
    receipts: dict[str, str]
    """By store: the pattern of the tool's answer (what kind of child it started)."""


def _specialist_profile(folder: Path) -> Path:
    main = folder / "agents" / "main"
    helper = main / "subagents" / "helper"
    helper.mkdir(parents=True)
    (main / "instructions.md").write_text("You run the show.\n")
    (helper / "agent.toml").write_text('description = "Does small tasks on request."\n')
    (helper / "instructions.md").write_text("You do small tasks.\n")
    return write_profile(folder, '[tether]\nagents = ["agents"]\n')


def _spawn_profile(background: str, schema: bool) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        (folder / "main.md").write_text("You run the show.\n")
        text = f"""
            [tether]
            plugins = ["spawn", "subagent"]
            [plugin.subagent]
            provider = "spawn"
            background = "{background}"
            [agent.main]
            instructions = "main.md"
            """
        if schema:
            text += """
            [plugin.subagent.output_schema]
            type = "object"
            required = ["verdict"]
            [plugin.subagent.output_schema.properties.verdict]
            type = "string"
            """
        return write_profile(folder, text)

    return write


def _specialist_call(schema: bool) -> ToolCall:
    arguments: dict[str, Any] = {"message": "a small task"}
    if schema:
        arguments["output_schema"] = SCHEMA
    return ToolCall(id="d0", name="helper", arguments=arguments)


def _spawn_call(background: bool) -> ToolCall:
    arguments: dict[str, Any] = {"description": "a small task", "prompt": "a small task"}
    if background:
        arguments["run_in_background"] = True
    return ToolCall(id="d0", name="subagent", arguments=arguments)


TEXT, JSON = "child answer", json.dumps({"verdict": "ok"})
#: The receipts (patterns): a continuable task names taskId; a one-shot one does not. The
#: ``subagent`` tool answers with task receipts too, or (before issue 16) with its own texts.
ONE_SHOT_TASK = r"Started task \S+\. Its result will arrive in a <task_result> message\."
CONTINUABLE_TASK = ONE_SHOT_TASK + r" To send it another message, call (helper|subagent) again "
CONTINUABLE_TASK += r"with taskId \S+\."
SPAWN_JOB = rf"started background subagent task \S+|{ONE_SHOT_TASK}"
SPAWN_CONTINUABLE_TASK = rf"started subagent \S+|{CONTINUABLE_TASK}"
SPECIALIST = Variant(
    "specialist",
    _specialist_profile,
    _specialist_call(False),
    TEXT,
    {"sqlite": CONTINUABLE_TASK, "memory": ONE_SHOT_TASK},
)
SPECIALIST_SCHEMA = Variant(
    "specialist+schema",
    _specialist_profile,
    _specialist_call(True),
    JSON,
    {"sqlite": ONE_SHOT_TASK, "memory": ONE_SHOT_TASK},
)
SPAWN_CONTINUABLE = Variant(
    "spawn continuable",
    _spawn_profile("continuable", False),
    _spawn_call(True),
    TEXT,
    {"sqlite": SPAWN_CONTINUABLE_TASK},
)
SPAWN_ONE_SHOT = Variant(
    "spawn one-shot bg",
    _spawn_profile("one-shot", False),
    _spawn_call(True),
    TEXT,
    {"sqlite": SPAWN_JOB, "memory": SPAWN_JOB},
)
SPAWN_SCHEMA = Variant(
    "spawn one-shot bg+schema",
    _spawn_profile("one-shot", True),
    _spawn_call(True),
    JSON,
    {"sqlite": SPAWN_JOB, "memory": SPAWN_JOB},
)

#: Per store: (case, specialist variant, the spawn variants it is compared with).
CASES: dict[str, list[tuple[str, Variant, list[Variant]]]] = {
    "sqlite": [
        ("continuable", SPECIALIST, [SPAWN_CONTINUABLE]),
        ("one-shot", SPECIALIST_SCHEMA, [SPAWN_ONE_SHOT, SPAWN_SCHEMA]),
    ],
    "memory": [
        ("one-shot", SPECIALIST, [SPAWN_ONE_SHOT]),
        ("one-shot+schema", SPECIALIST_SCHEMA, [SPAWN_SCHEMA]),
    ],
}


def _variants(store: str) -> list[Variant]:
    found: dict[str, Variant] = {}
    for _, special, spawns in CASES[store]:
        for variant in (special, *spawns):
            found[variant.name] = variant
    return list(found.values())


class Trip:
    """One variant's runtime and the parent model, with the clock of the current trip."""

    def __init__(self, variant: Variant, runtime: Runtime, store: str) -> None:
        self.variant = variant
        self.receipt = variant.receipts[store]
        self.runtime = runtime
        self.model = FunctionModel(self.answer)
        self.answered = anyio.Event()
        self.final = False
        self.end: tuple[float, float] = (0.0, 0.0)
        self.child_calls = 0

    def answer(self, request: ModelRequest) -> ModelResponse | str:
        if request.session_label is not None:
            self.child_calls += 1
            return self.variant.child_answer
        if len(request.messages) == 1:
            return ModelResponse(tool_calls=(self.variant.call,), finish_reason="tool_calls")
        if any(m.content.startswith(RESULT_MARKS) for m in request.messages if m.role == "user"):
            self.final = True
            return "parent answer"
        return "waiting"

    def hear(self, event: Event) -> None:
        if isinstance(event, AssistantMessage) and event.content == "parent answer":
            self.final = True
        elif isinstance(event, TurnEnded) and self.final and not self.answered.is_set():
            self.end = (time.process_time(), time.perf_counter())
            self.answered.set()

    async def once(self) -> dict[str, float]:
        """One round trip on a fresh parent: answer and quiet laps."""
        self.answered, self.final = anyio.Event(), False
        parent: Agent = await self.runtime.compose(agent="main", model=self.model)
        unlisten = parent.listen(self.hear)
        async with self.runtime.hold(parent):
            start = (time.process_time(), time.perf_counter())
            await parent.followup("go")
            with anyio.fail_after(30):
                await self.answered.wait()
                await self.runtime.settle(parent)
            quiet = (time.process_time(), time.perf_counter())
        unlisten()
        # Each trip is what it claims: the kind of child (its receipt), one result, the answer.
        (receipt,) = [m.content for m in parent.messages if m.role == "tool"]
        results = [m.content for m in parent.messages if m.content.startswith(RESULT_MARKS)]
        if not re.fullmatch(self.receipt, receipt):
            raise AssertionError(f"{self.variant.name}: receipt {receipt!r}")
        if len(results) != 1 or self.variant.child_answer not in results[0]:
            raise AssertionError(f"{self.variant.name}: expected one result, got {results}")
        if parent.messages[-1].content != "parent answer":
            raise AssertionError(f"{self.variant.name}: the parent ended on {parent.messages[-1]}")
        return {
            "cpu": self.end[0] - start[0],
            "wall": self.end[1] - start[1],
            "quiet_cpu": quiet[0] - start[0],
            "quiet_wall": quiet[1] - start[1],
        }


@asynccontextmanager
async def _trips(folder: Path, store: str) -> AsyncIterator[list[Trip]]:
    async with AsyncExitStack() as stack:
        trips: list[Trip] = []
        for n, variant in enumerate(_variants(store)):
            home = folder / f"v{n}"
            home.mkdir()
            kernel = load_kernel(variant.profile(home), entry_points=True)
            sessions: SessionStore = (
                SQLiteStore(home / "sessions.db") if store == "sqlite" else MemoryStore()
            )
            stack.push_async_callback(sessions.aclose)
            runtime = await stack.enter_async_context(Runtime.open(kernel, sessions))
            trips.append(Trip(variant, runtime, store))
        yield trips


async def trip_figure(store: str, runs: int) -> dict[str, dict[str, float]]:
    """One process: every variant of ``store``, interleaved; medians by variant."""
    samples: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tether-specialists-") as tmp:
        async with _trips(Path(tmp), store) as trips:
            for n in range(WARMUP + runs):
                shift = n % len(trips)
                for trip in trips[shift:] + trips[:shift]:
                    lap = await trip.once()
                    if n >= WARMUP:
                        samples.setdefault(trip.variant.name, []).append(lap)
            for trip in trips:
                if trip.child_calls != WARMUP + runs:
                    raise AssertionError(f"{trip.variant.name}: {trip.child_calls} child calls")
    return {name: _medians(laps) for name, laps in samples.items()}


# ---------------------------------------------------------------------- processes


def run_one(figure: str, runs: int) -> dict[str, Any]:
    """One figure in a fresh interpreter: this script with ``--one``; its last line is JSON."""
    command = [sys.executable, __file__, "--one", figure, "--runs", str(runs)]
    with scenario(f"{' '.join(command[1:])}", FIGURE_DEADLINE * 1.2):  # its own deadline first
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def one(figure: str, runs: int) -> dict[str, Any]:
    if figure.startswith("compose"):
        return anyio.run(compose_figure, runs, figure == "compose:lazy")
    return anyio.run(trip_figure, figure.partition(":")[2], runs)


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def _median_of(results: list[dict[str, Any]], *path: str) -> float:
    values: list[float] = []
    for result in results:
        value: Any = result
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def main(quick: bool, procs: int, runs: int | None) -> None:
    compose_runs = runs or (50 if quick else 200)
    print(
        f"1. compose an agent folder with {SPECIALISTS} specialists (medians of {procs} fresh "
        f"processes; cached: median of {compose_runs} composes per process)"
    )
    composed = [run_one("compose", compose_runs) for _ in range(procs)]
    lazy = [run_one("compose:lazy", compose_runs) for _ in range(procs)]
    target = COMPOSE_TARGET_MS["cold"]
    for results, key, title in (
        (composed, "first", "cold"),
        (lazy, "first", "cold, lazy imports too"),
        (composed, "warm", "new tree, warm process"),
    ):
        parts = "  ".join(
            f"{part} {_ms(_median_of(results, key, part, 'cpu')):6.2f}"
            for part in ("load", "preset", "compose")
        )
        wall = _ms(_median_of(results, key, "total", "wall"))
        cpu = _ms(_median_of(results, key, "total", "cpu"))
        print(
            f"  {title:<24} cpu {cpu:7.3f} ms  wall {wall:7.3f} ms  (target {target:g} ms) "
            f"{_verdict(cpu <= target)}\n  {'':<24} cpu by part: {parts} ms"
        )
        if key == "first":
            print(f"  {'':<24} imported during it: {', '.join(results[0]['imported'])}")
    wall = _ms(_median_of(composed, "cached", "wall"))
    cpu = _ms(_median_of(composed, "cached", "cpu"))
    target = COMPOSE_TARGET_MS["cached"]
    print(
        f"  {'cached (2nd+ compose)':<24} cpu {cpu:7.3f} ms  wall {wall:7.3f} ms  "
        f"(target {target:g} ms) {_verdict(cpu <= target)}"
    )

    trip_runs = runs or (40 if quick else 200)
    print(
        f"2. delegation round trip, prompt -> parent's final answer (medians of {trip_runs} "
        f"per variant per process, then of {procs} processes; ms)"
    )
    for store in STORES:
        results = [run_one(f"trip:{store}", trip_runs) for _ in range(procs)]
        for case, special, spawns in CASES[store]:
            print(f"  {store} / {case}")
            rows = [special, *spawns]
            figures = {
                v.name: {
                    k: _ms(_median_of(results, v.name, k))
                    for k in ("cpu", "wall", "quiet_cpu", "quiet_wall")
                }
                for v in rows
            }
            for variant in rows:
                f = figures[variant.name]
                line = (
                    f"    {variant.name:<26} cpu {f['cpu']:7.3f}  wall {f['wall']:7.3f}"
                    f"   (until quiet: cpu {f['quiet_cpu']:7.3f}  wall {f['quiet_wall']:7.3f})"
                )
                if variant is not special:
                    base = figures[special.name]
                    cpu_ratio = base["cpu"] / f["cpu"]
                    wall_ratio = base["wall"] / f["wall"]
                    line += (
                        f"\n    {'':<26} specialist / this: cpu {cpu_ratio:5.2f}  wall "
                        f"{wall_ratio:5.2f}  (target <= {TRIP_TARGET:.2f}) "
                        f"{_verdict(cpu_ratio <= TRIP_TARGET)}"
                    )
                print(line)


# ---------------------------------------------------------------------- profile


def profile(figure: str, runs: int) -> None:
    """cProfile of one cold compose (``LAZY_IMPORTS`` imported first), or of ``runs`` round
    trips of every variant of a store."""
    import cProfile
    import pstats

    if figure == "compose":
        profiler = cProfile.Profile()

        async def cold() -> None:
            for module in LAZY_IMPORTS:
                importlib.import_module(module)
            with tempfile.TemporaryDirectory(prefix="tether-specialists-") as tmp:
                profile_path = agent_tree(Path(tmp), "p")
                profiler.enable()
                await compose_cold(profile_path)
                profiler.disable()

        with scenario("profiling a cold compose", FIGURE_DEADLINE):
            anyio.run(cold)
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(20)
        return

    store = figure.partition(":")[2]

    async def trips() -> None:
        with tempfile.TemporaryDirectory(prefix="tether-specialists-") as tmp:
            async with _trips(Path(tmp), store) as found:
                for trip in found:
                    for _ in range(WARMUP):
                        await trip.once()
                for trip in found:
                    one = cProfile.Profile()
                    one.enable()
                    for _ in range(runs):
                        await trip.once()
                    one.disable()
                    print(f"==== {trip.variant.name}: {runs} round trips")
                    stats = pstats.Stats(one)
                    stats.sort_stats("tottime").print_stats(25)

    with scenario(f"profiling round trips ({store})", FIGURE_DEADLINE):
        anyio.run(trips)


def _parse_figure(value: str) -> str:
    if value in ("compose", "compose:lazy") or value in {f"trip:{s}" for s in STORES}:
        return value
    raise argparse.ArgumentTypeError(
        f"expected compose, compose:lazy, trip:sqlite or trip:memory, not {value!r}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Declared subagents figures of issue 16.")
    parser.add_argument("--quick", action="store_true", help="fewer runs and processes")
    parser.add_argument("--procs", type=int, help="fresh processes per figure (default 5; quick 2)")
    parser.add_argument("--runs", type=int, help="composes / round trips per variant per process")
    parser.add_argument("--one", type=_parse_figure, help="one figure in this process (JSON)")
    parser.add_argument("--profile", type=_parse_figure, help="cProfile one figure")
    arguments = parser.parse_args()
    if arguments.one:
        with scenario(arguments.one, FIGURE_DEADLINE):
            result = one(arguments.one, arguments.runs or 200)
        print(json.dumps(result))
    elif arguments.profile:
        profile(arguments.profile, arguments.runs or 50)
    else:
        procs = arguments.procs or (2 if arguments.quick else 5)
        main(arguments.quick, procs, arguments.runs)
