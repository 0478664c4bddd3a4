"""A bad dataset stops ``tether eval`` before any case runs: one ``ERROR: ... [DATASET_INVALID]``
line naming the file, the case and the key, and what to write instead; exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import run_eval

CASE = '[[cases]]\nname = "lists"\nprompt = "What notes do I have?"\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            CASE + '[cases.expect]\nregexp = "x"\n',
            'ERROR: eval dataset case "lists" key expect.regexp is not a known key (cases.toml, '
            "cases[0], expect.regexp); remove or rename it; known keys here: contains, "
            "not_contains, regex,",
        ),
        (
            CASE + '[cases.expect]\nregex = "(x"\n',
            'ERROR: eval dataset case "lists" key expect.regex[0] is not a regular expression: '
            "missing ), unterminated subpattern at position 0 (cases.toml, cases[0], "
            "expect.regex[0]); write a Python regular expression",
        ),
        (
            '[[cases]]\nname = "lists"\n',
            'ERROR: eval dataset case "lists" key prompt needs prompt = "..." or prompts = [...] '
            "(one of them) (cases.toml, cases[0], prompt); write prompt =",
        ),
        (
            CASE + CASE,
            'ERROR: eval dataset case "lists" key name repeats the case name "lists" '
            "(cases.toml, cases[1], name); give every case a name of its own",
        ),
        (
            CASE + '[cases.expect]\njudge = "Names the owner."\n',
            'ERROR: eval dataset case "lists" key expect.judge names no judge model (cases.toml, '
            'cases[0], expect.judge); set model = "SPEC" in expect.judge, or judge = "SPEC" in '
            "[eval]",
        ),
        (
            CASE + "[cases.expect]\njson_schema = { type = 3 }\n",
            'ERROR: eval dataset case "lists" key expect.json_schema is not a valid JSON Schema',
        ),
        (
            "[eval]\nconcurrency = 0\n" + CASE,
            "ERROR: eval dataset [eval] key concurrency is invalid (0): Input should be greater "
            "than or equal to 1 (cases.toml, [eval], concurrency)",
        ),
        (
            CASE.replace("prompt =", 'agent = "nobody"\nprompt ='),
            'ERROR: eval dataset case "lists": unknown agent "nobody" (cases.toml, cases[0], '
            "agent); declare [agent.nobody] in the profile",
        ),
        (
            CASE + 'model = "nope:x"\n',
            'ERROR: eval dataset case "lists": no model provider for "nope"',
        ),
        (
            CASE + '[cases.expect]\njudge = { rubric = "Names it.", model = "nope:x" }\n',
            'ERROR: eval dataset case "lists": judge: no model provider for "nope" (spec '
            "'nope:x') (cases.toml, cases[0], expect.judge)",
        ),
        (
            CASE + 'model = "scripted:a.toml"\nscript = { steps = [] }\n',
            'ERROR: eval dataset case "lists" key script sets both model and script',
        ),
        (
            "[eval]\n",
            "ERROR: eval dataset has no [[cases]] (cases.toml); write [[cases]] tables with "
            'name = "..." and prompt = "..." (docs/evals.md)',
        ),
        (
            '[[cases]]\nname = "x"\nprompt = "p\n',
            "ERROR: eval dataset is not valid TOML: Illegal character",
        ),
    ],
    ids=[
        "unknown-key",
        "bad-regex",
        "no-prompt",
        "repeated-name",
        "judge-without-model",
        "bad-schema",
        "bad-default",
        "unknown-agent",
        "unknown-model",
        "unknown-judge-model",
        "model-and-script",
        "no-cases",
        "bad-toml",
    ],
)
def test_a_bad_dataset_is_one_error_line_and_exit_2(quickstart: Path, text: str, expected: str):
    (quickstart / "cases.toml").write_text(text, encoding="utf-8")
    ran = run_eval(quickstart, "cases.toml")
    assert ran.code == 2, ran.stdout + ran.stderr
    assert ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith(expected), line
    assert line.endswith("[DATASET_INVALID]")


def test_a_missing_dataset_says_so(quickstart: Path):
    ran = run_eval(quickstart, "absent.toml")
    assert ran.code == 2
    assert ran.stderr.strip() == (
        "ERROR: eval dataset does not exist (absent.toml); pass the path of a .toml (or .yaml) "
        "dataset [DATASET_INVALID]"
    )


def test_a_yaml_dataset_runs_like_the_toml_one(quickstart: Path):
    pytest.importorskip("yaml")  # a dev dependency here (tether-skills-fs needs it)
    (quickstart / "cases.yaml").write_text(
        """\
eval:
  concurrency: 2
cases:
  - name: names the owner
    prompt: Who owns the launch?
    script:
      steps:
        - text: Priya owns the launch.
    expect:
      contains: Priya
      no_tools: true
  - name: wrong key
    prompt: Who?
    expect:
      containz: Priya
""",
        encoding="utf-8",
    )
    ran = run_eval(quickstart, "cases.yaml")
    assert ran.code == 2
    assert ran.stderr.startswith(
        'ERROR: eval dataset case "wrong key" key expect.containz is not a known key'
    )
    text = (quickstart / "cases.yaml").read_text(encoding="utf-8")
    (quickstart / "cases.yaml").write_text(text.split("  - name: wrong key")[0], encoding="utf-8")
    ran = run_eval(quickstart, "cases.yaml", "--json")
    assert ran.code == 0, ran.stdout + ran.stderr
    assert ran.case("names the owner")["passed"] is True


def test_a_script_outside_the_datasets_folder_is_refused(quickstart: Path, tmp_path: Path):
    """A dataset in a cloned repository cannot point its scripted model at a file elsewhere:
    the profile's rule (docs/trust.md) holds for a dataset's folder too, nothing runs."""
    outside = tmp_path / "elsewhere.toml"
    outside.write_text('[[steps]]\ntext = "hi"\n', encoding="utf-8")
    (quickstart / "cases.toml").write_text(
        f'[eval]\nmodel = "scripted:{outside}"\n' + CASE, encoding="utf-8"
    )
    ran = run_eval(quickstart, "cases.toml")
    assert ran.code == 2, ran.stdout + ran.stderr
    assert ran.stdout == ""
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f'ERROR: case "lists" model names {outside}, outside ')
    assert f'allow_outside = ["{outside}"]' in line
    assert line.endswith("[PATH_OUTSIDE_FOLDER]")
