"""Cases run at once, up to ``--concurrency``: function models that answer only when a given
number of requests are in flight together (a barrier) prove the overlap; the peak they record
proves the limit."""

from __future__ import annotations

import json
from pathlib import Path

from tether.testing import scaled

from .conftest import run_eval

CASES = "".join(
    f'[[cases]]\nname = "case {index}"\nprompt = "Go."\nmodel = "function:evalmodels:gathering"\n'
    for index in range(6)
)


def _run(folder: Path, gather: int, concurrency: int, wait: float):
    (folder / "cases.toml").write_text(CASES, encoding="utf-8")
    env = {
        "EVAL_GATHER": str(gather),
        "EVAL_WAIT": str(wait),
        "EVAL_TIMES": str(folder / "times.jsonl"),
        "EVAL_PEAK": str(folder / "peak.txt"),
    }
    ran = run_eval(folder, "cases.toml", "--concurrency", str(concurrency), "--json", env=env)
    return ran, int((folder / "peak.txt").read_text(encoding="utf-8"))


def test_cases_overlap_up_to_the_concurrency(quickstart: Path):
    ran, peak = _run(quickstart, gather=3, concurrency=3, wait=scaled(30))
    assert ran.code == 0, ran.stdout + ran.stderr
    assert peak == 3
    spans = [
        json.loads(line)
        for line in (quickstart / "times.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(spans) == 6
    first = min(span["ended"] for span in spans)
    assert sum(1 for span in spans if span["began"] < first) == 3  # three ran together


def test_one_at_a_time_never_overlaps(quickstart: Path):
    # Nobody is waited for (a barrier of one); the peak shows one request in flight at most.
    ran, peak = _run(quickstart, gather=1, concurrency=1, wait=scaled(30))
    assert ran.code == 0, ran.stdout + ran.stderr
    assert peak == 1


def test_the_limit_holds_when_the_models_want_more(quickstart: Path):
    # The models wait for three in flight; two at once never gets there: the first models give
    # up (their turns err, those cases fail) and the peak stays at the limit.
    ran, peak = _run(quickstart, gather=3, concurrency=2, wait=0.5)
    assert peak == 2
    assert ran.code == 1
    assert ran.document["summary"]["cases"] == 6
    failed = [c for c in ran.document["cases"] if not c["passed"]]
    assert failed
    for case in failed:
        (check,) = [c for c in case["checks"] if not c["passed"]]
        assert "TimeoutError" in check["reason"], check
