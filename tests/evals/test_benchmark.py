"""The eval benchmark runs to its verdict and never hangs (benchmarks/bench_eval.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from tether.testing import scaled

from .conftest import ROOT


def test_the_eval_benchmark_times_both_sides_and_gives_the_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_eval.py"), "--quick"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=scaled(300),
        check=False,
    )
    # The verdict depends on the machine's load; the figures must be there either way.
    assert done.returncode in (0, 1), done.stderr
    figures = json.loads(done.stdout.splitlines()[0])
    assert figures["cases"] == 10
    for name in ("run_s", "eval_s", "eval_parallel_s"):
        assert figures[name] > 0
    assert figures["ratio"] == figures["eval_s"] / figures["run_s"]
    assert "10 scripted cases on SQLite: plain runs " in done.stdout
    assert ("ok" in done.stdout.splitlines()[1]) == (done.returncode == 0)
