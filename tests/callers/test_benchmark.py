"""The caller benchmark runs to its verdict and never hangs (benchmarks/bench_callers.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled

ROOT = Path(__file__).resolve().parents[2]


def test_the_caller_benchmark_measures_each_figure_on_both_stores() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_callers.py"), "--quick"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=scaled(300),
    )
    # The verdict depends on the machine's load; the figures must be there either way.
    assert done.returncode in (0, 1), done.stderr
    figures = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [f["store"] for f in figures] == ["memory", "sqlite"]
    for figure in figures:
        for name in ("none", "caller", "gated"):
            assert figure[name]["cpu_us"] > 0
    assert "a caller on each message" in done.stdout
