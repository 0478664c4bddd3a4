"""Each expectation kind, passing and failing, in one ``tether eval`` process over a copy of the
quickstart (its notes tools and its skill); the children's kinds over the delegation example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .conftest import Ran, copy_example, run_eval

ANSWER = "The launch is on Thursday 10 December."
SCHEMA = '{ type = "object", required = ["owner"], properties = { owner = { type = "string" } } }'

DATASET = f'''\
[eval]
judge = "function:evalmodels:judge"
concurrency = 4

[[cases]]
name = "answer passes"
prompt = "When is the launch?"
script = {{ steps = [{{ text = "{ANSWER}" }}] }}
[cases.expect]
contains = ["Thursday", "10 December"]
not_contains = "Friday"
regex = ['\\d+ December', '^The launch']
equals = "{ANSWER}"
no_tools = true
max_turns = 1
max_requests = 1
max_tokens = 100000
max_output_tokens = 1000

[[cases]]
name = "answer fails"
prompt = "When is the launch?"
script = {{ steps = [{{ text = "{ANSWER}" }}] }}
[cases.expect]
contains = "Friday"
not_contains = "Thursday"
regex = '^Friday'
equals = "Friday."
json_schema = {{ type = "object" }}

[[cases]]
name = "json passes"
prompt = "Who owns it, as JSON?"
script = {{ steps = [{{ text = '{{"owner": "Priya"}}' }}] }}
[cases.expect]
json_schema = {SCHEMA}

[[cases]]
name = "json fails"
prompt = "Who owns it, as JSON?"
script = {{ steps = [{{ text = '{{"owner": 3}}' }}] }}
[cases.expect]
json_schema = {SCHEMA}

[[cases]]
name = "tools pass"
prompt = "Read the launch note."
[[cases.script.steps]]
tool_calls = [{{ name = "read_note", arguments = {{ name = "launch.md" }} }}]
[[cases.script.steps]]
text = "Read it."
[[cases.script.steps]]
text = "unused"
[cases.expect]
tools = ["read_note", {{ name = "read_note", arguments = {{ name = "launch.md" }} }}]
append_only_min = 0.5

[[cases]]
name = "tools fail"
prompt = "Read the launch note."
[[cases.script.steps]]
tool_calls = [{{ name = "read_note", arguments = {{ name = "launch.md" }} }}]
[[cases.script.steps]]
text = "Read it."
[cases.expect]
tools = [{{ name = "read_note", arguments = {{ name = "groceries.md" }} }}, "list_notes"]
no_tools = true
append_only_min = 1.0
max_requests = 1
max_tokens = 1
max_output_tokens = 0
max_turns = 0

[[cases]]
name = "skills pass"
prompt = "Cite the notes."
[[cases.script.steps]]
tool_calls = [{{ name = "load_skill", arguments = {{ name = "citing-notes" }} }}]
[[cases.script.steps]]
text = "Loaded."
[cases.expect]
skills = ["citing-notes"]

[[cases]]
name = "skills fail"
prompt = "Cite the notes."
script = {{ steps = [{{ text = "No skill." }}] }}
[cases.expect]
skills = "citing-notes"

[[cases]]
name = "judge passes"
prompt = "Who owns the launch?"
script = {{ steps = [{{ text = "Priya owns it." }}] }}
[cases.expect]
judge = "The answer names the owner."

[[cases]]
name = "judge fails"
prompt = "Who owns the launch?"
script = {{ steps = [{{ text = "Somebody owns it." }}] }}
[cases.expect]
judge = "The answer names the owner."

[[cases]]
name = "judge answers neither"
prompt = "Who owns the launch?"
script = {{ steps = [{{ text = "Priya owns it." }}] }}
[cases.expect]
judge = {{ rubric = "The answer names the owner.", model = "function:evalmodels:rambling_judge" }}

[[cases]]
name = "a turn that errs"
prompt = "When is the launch?"
script = {{ steps = [{{ expect = "nothing like this", text = "never" }}] }}

[[cases]]
name = "an expected error"
prompt = "When is the launch?"
script = {{ steps = [{{ expect = "nothing like this", text = "never" }}] }}
[cases.expect]
stop_reason = "error"
'''


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    folder = copy_example("quickstart", tmp_path_factory.mktemp("expectations"))
    (folder / "cases.toml").write_text(DATASET, encoding="utf-8")
    return run_eval(folder, "cases.toml", "--json", limit=120)


def _checks(ran: Ran, case: str, kind: str) -> list[dict[str, Any]]:
    found = [c for c in ran.case(case)["checks"] if c["kind"] == kind]
    assert found, f"no {kind} check in {case}: {ran.case(case)}"
    return found


def _verdicts(ran: Ran, case: str, kind: str) -> list[bool]:
    return [c["passed"] for c in _checks(ran, case, kind)]


def test_the_run_fails_because_some_cases_fail(ran: Ran):
    assert ran.code == 1, ran.stderr
    document = ran.document
    assert document["passed"] is False
    assert document["summary"]["cases"] == 13
    passing = {c["name"] for c in document["cases"] if c["passed"]}
    assert passing == {
        "answer passes",
        "json passes",
        "tools pass",
        "skills pass",
        "judge passes",
        "an expected error",
    }


@pytest.mark.parametrize("kind", ["contains", "not_contains", "regex", "equals"])
def test_answer_expectations_pass_and_fail(ran: Ran, kind: str):
    assert all(_verdicts(ran, "answer passes", kind))
    assert not any(_verdicts(ran, "answer fails", kind))


def test_a_failed_contains_quotes_the_answer(ran: Ran):
    (check,) = _checks(ran, "answer fails", "contains")
    assert check["reason"] == f'"Friday" is not in the answer "{ANSWER}"'


def test_json_schema_passes_on_matching_json_and_names_the_place_that_does_not(ran: Ran):
    assert _verdicts(ran, "json passes", "json_schema") == [True]
    (failed,) = _checks(ran, "json fails", "json_schema")
    assert not failed["passed"]
    assert failed["reason"].startswith("the answer does not match the schema at owner:")
    (not_json,) = _checks(ran, "answer fails", "json_schema")
    assert not_json["reason"].startswith("the answer is not JSON")


def test_tool_calls_are_matched_by_name_and_argument_subset(ran: Ran):
    assert _verdicts(ran, "tools pass", "tools") == [True, True]
    reasons = [c["reason"] for c in _checks(ran, "tools fail", "tools")]
    assert reasons == [
        '"read_note" was never called with {"name": "groceries.md"} (but with '
        '"{\\"name\\": \\"launch.md\\"}")',
        '"list_notes" was not called (called: read_note)',
    ]


def test_no_tools_passes_without_calls_and_names_the_calls_made(ran: Ran):
    assert _verdicts(ran, "answer passes", "no_tools") == [True]
    (check,) = _checks(ran, "tools fail", "no_tools")
    assert check == {"kind": "no_tools", "passed": False, "reason": "tools were called: read_note"}


def test_skills_are_read_from_the_skill_tool_results(ran: Ran):
    assert _verdicts(ran, "skills pass", "skills") == [True]
    (check,) = _checks(ran, "skills fail", "skills")
    assert check["reason"] == 'skill "citing-notes" was not loaded (loaded: none)'


@pytest.mark.parametrize("kind", ["max_tokens", "max_output_tokens", "max_requests", "max_turns"])
def test_spending_limits_pass_and_fail(ran: Ran, kind: str):
    assert _verdicts(ran, "answer passes", kind) == [True]
    assert _verdicts(ran, "tools fail", kind) == [False]


def test_tokens_are_the_trees_requests(ran: Ran):
    case = ran.case("tools fail")
    assert case["requests"] == 2
    assert case["tokens"]["total"] == case["tokens"]["input"] + case["tokens"]["output"] > 0
    (check,) = _checks(ran, "tools fail", "max_requests")
    assert check["reason"] == "2 requests used (at most 1)"


def test_append_only_share_comes_from_sessions_stats(ran: Ran):
    (high,) = _checks(ran, "tools pass", "append_only_min")
    assert high["passed"], high
    (strict,) = _checks(ran, "tools fail", "append_only_min")
    assert not strict["passed"]
    assert "of each request repeats the one before it (at least 100.0%)" in strict["reason"]


def test_the_judge_reads_the_answer_and_its_first_word_decides(ran: Ran):
    assert _checks(ran, "judge passes", "judge") == [
        {"kind": "judge", "passed": True, "reason": "judge: it names Priya"}
    ]
    assert _checks(ran, "judge fails", "judge") == [
        {"kind": "judge", "passed": False, "reason": "judge: it does not name the owner"}
    ]
    (neither,) = _checks(ran, "judge answers neither", "judge")
    assert not neither["passed"]
    assert neither["reason"].startswith("the judge answered neither PASS nor FAIL")


def test_every_turn_must_complete_unless_the_case_expects_otherwise(ran: Ran):
    assert _verdicts(ran, "answer passes", "stop_reason") == [True]
    (erred,) = _checks(ran, "a turn that errs", "stop_reason")
    assert not erred["passed"]
    assert erred["reason"].startswith("turn 1 ended error:")
    assert "(expected completed)" in erred["reason"]
    assert _verdicts(ran, "an expected error", "stop_reason") == [True]


DELEGATIONS = """\
[eval]
model = "scripted:script.toml"

[[cases]]
name = "delegates as expected"
prompts = ["We launch on Thursday 10 December; Priya owns it.", "Plan the launch announcement."]
[cases.expect]
delegations = { min = 2, max = 3, agents = ["Check the plan"] }

[[cases]]
name = "delegates otherwise"
prompts = ["We launch on Thursday 10 December; Priya owns it.", "Plan the launch announcement."]
[cases.expect]
delegations = { count = 1, agents = ["researcher"] }

[[cases]]
name = "delegates to nobody"
prompt = "We launch on Thursday 10 December; Priya owns it."
[cases.expect]
delegations = 0
"""


def test_delegations_count_the_roots_children_and_name_them(tmp_path: Path):
    folder = copy_example("delegation", tmp_path)
    (folder / "cases.toml").write_text(DELEGATIONS, encoding="utf-8")
    ran = run_eval(folder, "cases.toml", "--json")
    assert ran.code == 1, ran.stderr
    assert _verdicts(ran, "delegates as expected", "delegations") == [True, True, True]
    assert _verdicts(ran, "delegates to nobody", "delegations") == [True]
    count, agent = _checks(ran, "delegates otherwise", "delegations")
    assert not count["passed"]
    assert count["reason"].startswith("3 children started (main: ")
    assert count["reason"].endswith("expected 1")
    assert not agent["passed"]
    assert agent["reason"].startswith('no child of "researcher" was started (main: ')
