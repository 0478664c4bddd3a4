"""What ``tether eval`` writes and how it exits: the table and summary, ``--json``, JUnit XML
a CI server reads, the store it keeps or removes, ``--case``."""

from __future__ import annotations

import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .conftest import Ran, run_eval

DATASET = """\
[[cases]]
name = "names the owner"
prompt = "Who owns the launch?"
script = { steps = [{ text = "Priya owns the launch." }] }
[cases.expect]
contains = "Priya"

[[cases]]
name = "names a date"
prompt = "When is the launch?"
script = { steps = [{ text = "Soon." }] }
[cases.expect]
contains = "December"
regex = '\\d+'
"""


@pytest.fixture
def dataset(quickstart: Path) -> Path:
    (quickstart / "cases.toml").write_text(DATASET, encoding="utf-8")
    return quickstart


def test_the_table_has_a_row_per_case_with_its_reasons_then_a_summary(dataset: Path):
    ran = run_eval(dataset, "cases.toml")
    assert ran.code == 1, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].split() == ["case", "result", "tokens", "seconds", "reasons"]
    assert lines[1].split()[:4] == ["names", "the", "owner", "pass"]
    assert lines[2].split()[:4] == ["names", "a", "date", "FAIL"]
    assert lines[2].endswith('contains: "December" is not in the answer "Soon."')
    assert lines[3].strip() == 'regex: /\\d+/ does not match the answer "Soon."'
    assert lines[4].startswith("2 cases: 1 passed, 1 failed, ")
    assert lines[5].startswith("store: ")
    assert lines[5].endswith("(removed; --store-dir DIR keeps the sessions)")
    removed = Path(lines[5].split()[1])
    assert not removed.exists()


def test_every_case_passing_exits_0(dataset: Path):
    ran = run_eval(dataset, "cases.toml", "--case", "names the owner")
    assert ran.code == 0, ran.stdout + ran.stderr
    assert "1 case: 1 passed, 0 failed" in ran.stdout


def test_an_unknown_case_name_is_a_usage_error_listing_the_cases(dataset: Path):
    ran = run_eval(dataset, "cases.toml", "--case", "nope")
    assert ran.code == 2
    assert "no case named 'nope'" in ran.stderr
    assert "names a date, names the owner" in ran.stderr


def test_json_gives_each_case_its_checks_tokens_and_session(dataset: Path):
    ran = run_eval(dataset, "cases.toml", "--json")
    assert ran.code == 1
    document = ran.document
    assert document["passed"] is False
    assert document["summary"]["cases"] == 2
    assert document["summary"]["failed"] == 1
    assert document["store_kept"] is False
    assert document["baseline"] is None
    case = ran.case("names the owner")
    assert case["passed"] is True
    assert case["answer"] == "Priya owns the launch."
    assert case["session"].startswith("ses_")
    assert case["error"] is None
    assert set(case["tokens"]) == {"input", "output", "total"}
    assert case["checks"][0] == {
        "kind": "contains",
        "passed": True,
        "reason": 'the answer contains "Priya"',
    }


def test_junit_has_a_testcase_per_case_and_the_failures_with_their_reasons(dataset: Path):
    ran = run_eval(dataset, "cases.toml", "--junit", "reports/evals.xml")
    assert ran.code == 1
    root = ET.parse(dataset / "reports" / "evals.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "cases"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"names the owner", "names a date"}
    assert cases["names the owner"].find("failure") is None
    failure = cases["names a date"].find("failure")
    assert failure is not None
    assert failure.get("message") == 'contains: "December" is not in the answer "Soon."'
    assert failure.text is not None
    assert failure.text.splitlines()[1] == 'regex: /\\d+/ does not match the answer "Soon."'
    assert float(cases["names a date"].get("time") or "x") >= 0


def test_store_dir_keeps_the_sessions_labelled_with_their_cases(dataset: Path):
    ran = run_eval(dataset, "cases.toml", "--store-dir", "kept", "--json")
    document = ran.document
    assert document["store_kept"] is True
    store = Path(document["store"])
    assert store.parent == (dataset / "kept").resolve()
    with sqlite3.connect(store) as db:
        labels = {row[0] for row in db.execute("SELECT label FROM sessions")}
    assert labels == {"names the owner", "names a date"}
    ran_text = run_eval(dataset, "cases.toml", "--store-dir", "kept")
    assert "(kept; each case's session is labelled with its name)" in ran_text.stdout


def test_a_case_whose_model_raises_fails_and_the_others_still_run(quickstart: Path):
    (quickstart / "cases.toml").write_text(
        DATASET
        + """
[[cases]]
name = "explodes"
prompt = "Anything?"
model = "function:evalmodels:exploding"
""",
        encoding="utf-8",
    )
    ran: Ran = run_eval(quickstart, "cases.toml", "--json", "--junit", "out.xml")
    assert ran.code == 1
    assert ran.case("names the owner")["passed"] is True
    exploded = ran.case("explodes")
    assert exploded["passed"] is False
    # The turn loop turns the model's exception into the turn's error: the case ran, and its
    # turn did not complete.
    (failed,) = [c for c in exploded["checks"] if not c["passed"]]
    assert failed["kind"] == "stop_reason"
    assert failed["reason"].startswith("turn 1 ended error: model function:evalmodels:exploding")
    assert "RuntimeError: the model exploded" in failed["reason"]
    root = ET.parse(quickstart / "out.xml").getroot()
    (case,) = [c for c in root.iter("testcase") if c.get("name") == "explodes"]
    failure = case.find("failure")
    assert failure is not None
    assert "the model exploded" in (failure.get("message") or "")


def test_a_case_past_its_timeout_is_an_error_and_the_others_still_run(quickstart: Path):
    (quickstart / "cases.toml").write_text(
        DATASET
        + """
[[cases]]
name = "hangs"
prompt = "Anything?"
model = "function:evalmodels:sleepy"
timeout = 1
""",
        encoding="utf-8",
    )
    ran = run_eval(quickstart, "cases.toml", "--json", "--junit", "out.xml")
    assert ran.code == 1
    assert ran.case("names the owner")["passed"] is True
    hung = ran.case("hangs")
    assert hung["error"] == "timed out after 1 s (timeout in the case or [eval])"
    assert hung["seconds"] < 30
    root = ET.parse(quickstart / "out.xml").getroot()
    assert root.get("errors") == "1"
    (case,) = [c for c in root.iter("testcase") if c.get("name") == "hangs"]
    error = case.find("error")
    assert error is not None
    assert error.get("message") == hung["error"]


def test_judge_replaces_every_rubrics_judge_model(quickstart: Path):
    (quickstart / "cases.toml").write_text(
        """\
[eval]
judge = "function:evalmodels:judge"

[[cases]]
name = "judged"
prompt = "Who owns the launch?"
script = { steps = [{ text = "Priya owns it." }] }
[cases.expect]
judge = "The answer names the owner."
""",
        encoding="utf-8",
    )
    assert run_eval(quickstart, "cases.toml").code == 0
    ran = run_eval(
        quickstart, "cases.toml", "--judge", "function:evalmodels:rambling_judge", "--json"
    )
    assert ran.code == 1
    (check,) = [c for c in ran.case("judged")["checks"] if c["kind"] == "judge"]
    assert check["reason"] == ('the judge answered neither PASS nor FAIL: "I think it is fine."')
