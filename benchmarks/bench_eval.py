"""What ``tether eval`` costs over running its cases plainly (issue 44: 100 scripted cases in
under 2x the time of 100 ``tether run``s in one process).

    uv run python benchmarks/bench_eval.py [--quick] [--cases N] [--runs N]

A profile with one local tool (``echo``) and ``--cases`` scripted cases: each case's model
calls the tool once, then answers (two model requests, one turn). Both sides run in this
process, on a kernel loaded once, each on a fresh SQLite file (``synchronous=NORMAL``, the
default), ``--runs`` times:

* ``run``: the ``tether run`` equivalent, one case after the other: compose a root session of
  the agent on the case's scripted model and ``Runtime.run_session`` it with the prompt, in one
  ``Runtime.open`` (what ``tether run`` does, without the printing);
* ``eval``: what ``tether eval`` does after reading the command line: read and check the dataset
  (``load_dataset``), plan its cases against the profile, run them (``run_cases``: the same
  compose and ``run_session``, then each case's log read back and its expectations checked:
  ``contains``, ``tools`` with arguments, ``max_tokens``, every turn completed), once one case
  at a time (``concurrency = 1``) and once as the dataset sets it (4 at once).

The figures are medians of wall time (``time.perf_counter``). The verdict is the ratio of the
one-at-a-time eval to the plain runs (the stricter figure: concurrency only hides overhead);
exits 1 when it is not under 2.
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

from tether import Kernel, load_kernel
from tether.models import ScriptedModel
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether_evals import check_against_profile, load_dataset, run_cases

#: The issue's bar: eval time over plain-run time.
BUDGET_RATIO = 2.0
#: Seconds the whole benchmark may take (scaled by TETHER_TEST_TIME_SCALE) before it fails.
DEADLINE = 900.0

PROFILE = """
[tether]
plugins = ["echo"]
plugin_dirs = ["plugins"]

[agent.main]
model = "scripted:none.toml"
"""

PLUGIN = """
import tether
from tether.agents import Tool


@tether.hookimpl
def tether_tools():
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return [Tool("echo", "Say the text back.", lambda args, ctx: args["text"], schema, safe=True)]
"""


def script(index: int) -> dict[str, object]:
    """Case ``index``'s steps: call ``echo``, then answer."""
    return {
        "steps": [
            {"tool_calls": [{"name": "echo", "arguments": {"text": f"note {index}"}}]},
            {"text": f"The note is note {index}; nothing else to add."},
        ]
    }


def dataset_text(cases: int, concurrency: int) -> str:
    lines = [f"[eval]\nconcurrency = {concurrency}\n"]
    for index in range(cases):
        lines.append(
            f'[[cases]]\nname = "case {index}"\nprompt = "What is note {index}?"\n'
            f'[[cases.script.steps]]\ntool_calls = [{{ name = "echo", arguments = '
            f'{{ text = "note {index}" }} }}]\n'
            f'[[cases.script.steps]]\ntext = "The note is note {index}; nothing else to add."\n'
            f'[cases.expect]\ncontains = "note {index}"\n'
            f'tools = [{{ name = "echo", arguments = {{ text = "note {index}" }} }}]\n'
            "max_tokens = 100000\n"
        )
    return "\n".join(lines)


async def plain_runs(kernel: Kernel, store_path: Path, cases: int) -> float:
    store = SQLiteStore(store_path)
    try:
        began = time.perf_counter()
        async with Runtime.open(kernel, store) as runtime:
            for index in range(cases):
                model = ScriptedModel.from_data(script(index))
                agent = await runtime.compose(model=model, label=f"case {index}")
                await runtime.run_session(agent, [f"What is note {index}?"])
        return time.perf_counter() - began
    finally:
        await store.aclose()


async def eval_run(kernel: Kernel, dataset_path: Path, store_path: Path, concurrency: int) -> float:
    store = SQLiteStore(store_path)
    try:
        began = time.perf_counter()
        dataset = load_dataset(dataset_path)
        plans = check_against_profile(kernel, dataset, agent=None, model=None)
        results = await run_cases(kernel, dataset, store, plans, concurrency=concurrency)
        seconds = time.perf_counter() - began
    finally:
        await store.aclose()
    failed = [r.name for r in results if not r.passed]
    if failed or len(results) != len(dataset.cases):
        raise SystemExit(f"benchmark failed: cases did not pass: {failed[:5]}")
    return seconds


def measure(folder: Path, cases: int, runs: int) -> dict[str, float]:
    (folder / "plugins").mkdir()
    (folder / "plugins" / "echo.py").write_text(PLUGIN, encoding="utf-8")
    (folder / "tether.toml").write_text(PROFILE, encoding="utf-8")
    (folder / "serial.toml").write_text(dataset_text(cases, 1), encoding="utf-8")
    (folder / "parallel.toml").write_text(dataset_text(cases, 4), encoding="utf-8")
    kernel = load_kernel(folder / "tether.toml", entry_points=False)
    timings: dict[str, list[float]] = {"run": [], "eval": [], "eval_parallel": []}
    anyio.run(plain_runs, kernel, folder / "warm.db", 2)  # imports and first compose
    for attempt in range(runs):
        # Alternate which side goes first: a busy machine's slow moment hits both alike.
        order = ["run", "eval", "eval_parallel"]
        for name in order if attempt % 2 == 0 else order[::-1]:
            gc.collect()
            db = folder / f"{name}-{attempt}.db"
            if name == "run":
                seconds = anyio.run(plain_runs, kernel, db, cases)
            else:
                concurrency = 1 if name == "eval" else 4
                file = "serial.toml" if concurrency == 1 else "parallel.toml"
                seconds = anyio.run(eval_run, kernel, folder / file, db, concurrency)
            timings[name].append(seconds)
    figures: dict[str, float] = {"cases": cases, "runs": runs}
    for name, values in timings.items():
        figures[f"{name}_s"] = statistics.median(values)
    figures["ratio"] = figures["eval_s"] / figures["run_s"]
    figures["ratio_parallel"] = figures["eval_parallel_s"] / figures["run_s"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument(
        "--quick", "--smoke", action="store_true", help="fewer cases and runs (a smoke run)"
    )
    parser.add_argument("--cases", type=int, default=None, help="scripted cases (default 100)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs of each side")
    args = parser.parse_args()
    cases = args.cases or (10 if args.quick else 100)
    runs = args.runs or (1 if args.quick else 5)
    with (
        scenario(f"tether eval of {cases} scripted cases", DEADLINE),
        tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp,
    ):
        figures = measure(Path(tmp), cases, runs)
    print(json.dumps(figures))
    verdict = figures["ratio"] < BUDGET_RATIO
    print(
        f"{cases} scripted cases on SQLite: plain runs {figures['run_s']:.2f} s, tether eval "
        f"{figures['eval_s']:.2f} s one at a time ({figures['ratio']:.2f}x), "
        f"{figures['eval_parallel_s']:.2f} s four at once ({figures['ratio_parallel']:.2f}x) "
        f"(medians of {runs}; bar {BUDGET_RATIO:.0f}x): {'ok' if verdict else 'OVER BUDGET'}"
    )
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
