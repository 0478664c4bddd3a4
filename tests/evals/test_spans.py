"""``expect.spans``: the spans tether-otel records for a case's tree, captured in the
``tether eval`` process (an in-memory SDK provider, set before the profile loads)."""

from __future__ import annotations

from pathlib import Path

from .conftest import run_eval

DATASET = """\
[[cases]]
name = "reads the note"
prompt = "Read the launch note."
[[cases.script.steps]]
tool_calls = [{ name = "read_note", arguments = { name = "launch.md" } }]
[[cases.script.steps]]
text = "Read it."
[cases.expect]
spans = [
  "execute_tool read_note",
  { name = "execute_tool read_note", attributes = { "gen_ai.tool.name" = "read_note" } },
  { name = "invoke_agent main", attributes = { "tether.turn" = 1 } },
]

[[cases]]
name = "reads nothing"
prompt = "Read the launch note."
script = { steps = [{ text = "No." }] }
[cases.expect]
spans = [
  "execute_tool read_note",
  { name = "invoke_agent main", attributes = { "tether.turn" = 2 } },
]
"""


def _traced(folder: Path) -> None:
    profile = folder / "tether.toml"
    text = profile.read_text(encoding="utf-8").replace('"openai"]', '"openai", "otel"]')
    profile.write_text(text + '\n[plugin.otel]\nexporter = "none"\n', encoding="utf-8")
    (folder / "cases.toml").write_text(DATASET, encoding="utf-8")


def test_spans_are_matched_by_name_and_attributes_within_the_cases_own_tree(quickstart: Path):
    _traced(quickstart)
    # Both cases run at once in one process: each sees only its own tree's spans.
    ran = run_eval(quickstart, "cases.toml", "--json", "--concurrency", "2")
    assert ran.code == 1, ran.stderr
    passed = [c for c in ran.case("reads the note")["checks"] if c["kind"] == "spans"]
    assert [c["reason"] for c in passed] == [
        'span "execute_tool read_note" recorded 1 time',
        'span "execute_tool read_note" recorded with {"gen_ai.tool.name": "read_note"}',
        'span "invoke_agent main" recorded with {"tether.turn": 1}',
    ]
    assert all(c["passed"] for c in passed)
    missed = [c for c in ran.case("reads nothing")["checks"] if c["kind"] == "spans"]
    assert [c["passed"] for c in missed] == [False, False]
    assert missed[0]["reason"].startswith('no span "execute_tool read_note" was recorded')
    assert "invoke_agent main" in missed[0]["reason"]
    assert missed[1]["reason"] == 'no span "invoke_agent main" has {"tether.turn": 2} (1 without)'


def test_spans_without_a_plugin_that_records_them_is_a_bad_dataset(quickstart: Path):
    (quickstart / "cases.toml").write_text(DATASET, encoding="utf-8")
    ran = run_eval(quickstart, "cases.toml")
    assert ran.code == 2
    assert ran.stderr.strip() == (
        'ERROR: eval dataset case "reads the note" expects spans, and the profile loads no '
        'plugin that records them (cases.toml, cases[0], expect.spans); add "otel" to '
        '[tether] plugins (tether-otel; exporter = "none" in [plugin.otel] keeps them in the '
        "process), or remove expect.spans [DATASET_INVALID]"
    )
