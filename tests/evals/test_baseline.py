"""``--save-baseline`` then ``--baseline``: a case that passed there and fails now is a
regression (exit status 1, listed); tokens grown past the threshold are reported."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import run_eval

DATASET = """\
[[cases]]
name = "names the owner"
prompt = "Who owns the launch?"
script = {{ steps = [{{ text = "{owner} owns the launch." }}] }}
[cases.expect]
contains = "Priya"

[[cases]]
name = "dates the launch"
prompt = "When is the launch?"
script = {{ steps = [{{ text = "{date}" }}] }}
[cases.expect]
contains = "December"
"""


def _write(folder: Path, owner: str, date: str) -> None:
    text = DATASET.format(owner=owner, date=date)
    (folder / "cases.toml").write_text(text, encoding="utf-8")


def test_the_baseline_file_keeps_each_cases_verdict_and_tokens(quickstart: Path):
    _write(quickstart, "Priya", "Soon.")
    ran = run_eval(quickstart, "cases.toml", "--save-baseline", "baseline.json", "--json")
    assert ran.code == 1
    saved = json.loads((quickstart / "baseline.json").read_text(encoding="utf-8"))
    assert saved["tether_eval_baseline"] == 1
    tokens = {c["name"]: c["tokens"]["total"] for c in ran.document["cases"]}
    assert saved["cases"] == {
        "names the owner": {"passed": True, "tokens": tokens["names the owner"]},
        "dates the launch": {"passed": False, "tokens": tokens["dates the launch"]},
    }


def test_a_case_that_passed_in_the_baseline_and_fails_now_is_a_regression(quickstart: Path):
    _write(quickstart, "Priya", "Soon.")
    run_eval(quickstart, "cases.toml", "--save-baseline", "baseline.json")
    _write(quickstart, "Somebody", "Thursday 10 December.")
    ran = run_eval(quickstart, "cases.toml", "--baseline", "baseline.json", "--json")
    assert ran.code == 1
    baseline = ran.document["baseline"]
    assert baseline["regressions"] == ["names the owner"]
    assert baseline["fixed"] == ["dates the launch"]
    text = run_eval(quickstart, "cases.toml", "--baseline", "baseline.json")
    assert "  regressions (passed there, fail now): names the owner" in text.stdout
    assert "  fixed (failed there, pass now): dates the launch" in text.stdout


def test_a_run_without_regressions_passes_against_its_baseline(quickstart: Path):
    _write(quickstart, "Priya", "Thursday 10 December.")
    run_eval(quickstart, "cases.toml", "--save-baseline", "baseline.json")
    ran = run_eval(quickstart, "cases.toml", "--baseline", "baseline.json")
    assert ran.code == 0, ran.stdout + ran.stderr
    assert "  no regression, no token growth above the threshold" in ran.stdout


def test_tokens_grown_past_the_threshold_are_reported_without_failing(quickstart: Path):
    _write(quickstart, "Priya", "Thursday 10 December.")
    run_eval(quickstart, "cases.toml", "--save-baseline", "baseline.json")
    saved = json.loads((quickstart / "baseline.json").read_text(encoding="utf-8"))
    before = saved["cases"]["names the owner"]["tokens"]
    saved["cases"]["names the owner"]["tokens"] = before // 2
    (quickstart / "baseline.json").write_text(json.dumps(saved), encoding="utf-8")
    ran = run_eval(quickstart, "cases.toml", "--baseline", "baseline.json", "--json")
    assert ran.code == 0, ran.stdout + ran.stderr
    (grown,) = ran.document["baseline"]["token_growth"]
    assert grown["case"] == "names the owner"
    assert grown["baseline"] == before // 2
    assert grown["now"] == before
    assert grown["growth"] > 0.2
    # A threshold above the growth reports nothing.
    quiet = run_eval(
        quickstart, "cases.toml", "--baseline", "baseline.json", "--token-growth", "5", "--json"
    )
    assert quiet.document["baseline"]["token_growth"] == []


def test_a_file_that_is_not_a_baseline_is_a_usage_error(quickstart: Path):
    _write(quickstart, "Priya", "Thursday 10 December.")
    (quickstart / "baseline.json").write_text('{"cases": []}', encoding="utf-8")
    ran = run_eval(quickstart, "cases.toml", "--baseline", "baseline.json")
    assert ran.code == 2
    assert "baseline.json is not a tether eval baseline" in ran.stderr
