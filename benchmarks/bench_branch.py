"""What a branch of a long session costs (issue 43: at most 50 ms for 1,000 turns on SQLite).

    uv run python benchmarks/bench_branch.py [--quick] [--turns N] [--runs N]

A session of ``--turns`` real turns (``agent.run`` on a ``FunctionModel``: a prompt of about
200 characters, an answer of about 400, one step each: five events a turn) is written to a
SQLite file (``synchronous=NORMAL``, the default). Then ``tether.runtime.branch_session`` is
timed, wall clock, ``--runs`` times each way:

* ``whole``: the branch of the whole session (``tether sessions branch ID``);
* ``half``: the branch at the middle turn (``--at TURN``).

A branch reads the original's log, folds it once (where each turn ends, what its prefix left
unclaimed), and creates the new session with its copied prefix in one transaction. A rewind
(``tether sessions rewind``) is timed too: it reads and folds the log and appends one event.
The figures are medians of wall time (``time.perf_counter``, and the slowest run) and of CPU
time (``time.process_time``); at ``synchronous=NORMAL`` a commit does not wait for the disk, so
a branch is CPU work and the verdict uses CPU time, the steadier figure on a busy machine (as
``bench_callers.py`` does). Exits 1 when the CPU median of ``whole`` passes the budget.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from deadlines import scenario

from tether import load_kernel
from tether.models import FunctionModel, ModelRequest
from tether.runtime import Runtime, branch_session, rewind_session
from tether.store import SQLiteStore

#: The issue's budget for a branch of a 1,000-turn session on SQLite, in ms (median).
BUDGET_MS = 50.0
#: Seconds the whole benchmark may take (scaled by TETHER_TEST_TIME_SCALE) before it fails.
DEADLINE = 600.0

PROFILE = """
[agent.main]
model = "scripted:none.toml"
"""
PROMPT = "Please look at the next part of the report and tell me what changed since the last one; "
ANSWER = "Here is what changed: the totals moved, two sections were rewritten, one was dropped. "


def answer(request: ModelRequest) -> str:
    return (ANSWER * 5)[: 400 + len(request.messages) % 7]


async def measure(folder: Path, turns: int, runs: int) -> dict[str, float]:
    (folder / "tether.toml").write_text(PROFILE, encoding="utf-8")
    kernel = load_kernel(folder / "tether.toml", entry_points=False)
    store = SQLiteStore(folder / "s.db")
    try:
        runtime = Runtime(kernel, store)
        agent = await runtime.compose(model=FunctionModel(answer))
        async with agent:
            for turn in range(turns):
                await agent.run(f"{turn}: " + (PROMPT * 3)[:200])
        session_id = agent.session_id
        events = len(await store.events(session_id))
        figures: dict[str, float] = {"turns": turns, "events": events}
        for name, at in (("whole", None), ("half", turns // 2)):
            walls: list[float] = []
            cpus: list[float] = []
            for _ in range(runs):
                gc.collect()
                start, cpu = time.perf_counter(), time.process_time()
                await branch_session(runtime, session_id, at_turn=at)
                cpus.append((time.process_time() - cpu) * 1000)
                walls.append((time.perf_counter() - start) * 1000)
            figures[f"{name}_ms"] = statistics.median(walls)
            figures[f"{name}_max_ms"] = max(walls)
            figures[f"{name}_cpu_ms"] = statistics.median(cpus)
        start = time.perf_counter()
        await rewind_session(runtime, session_id, turns // 2)
        figures["rewind_ms"] = (time.perf_counter() - start) * 1000
        return figures
    finally:
        await store.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke run)")
    parser.add_argument("--turns", type=int, default=1000, help="turns of the session")
    parser.add_argument("--runs", type=int, default=None, help="branches timed each way")
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else 30)
    with (
        scenario(f"branch of a {args.turns}-turn session", DEADLINE),
        tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp,
    ):
        figures = anyio.run(measure, Path(tmp), args.turns, runs)
    print(json.dumps(figures))
    verdict = figures["whole_cpu_ms"] <= BUDGET_MS
    print(
        f"branch of a {args.turns}-turn session ({figures['events']:.0f} events) on SQLite: "
        f"{figures['whole_cpu_ms']:.1f} ms CPU, {figures['whole_ms']:.1f} ms wall (medians; "
        f"slowest {figures['whole_max_ms']:.1f}), at the middle turn {figures['half_cpu_ms']:.1f}"
        f" ms CPU; a rewind {figures['rewind_ms']:.1f} ms (budget {BUDGET_MS:.0f} ms): "
        f"{'ok' if verdict else 'OVER BUDGET'}"
    )
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
