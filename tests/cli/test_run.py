"""tether run, context and sessions on a copy of the quickstart."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.testing import scaled

from ..processes import plugin_env

ROOT = Path(__file__).parents[2]
QUICKSTART_OUTPUT = [
    "> What notes do I have?",
    '-> load_skill({"name": "citing-notes"})',
    '<- load_skill: <skill_content name="citing-notes"> (+15 more lines)',
    "Let me look at your notes.",
    "-> list_notes({})",
    "<- list_notes: groceries.md (+1 more line)",
    '-> read_note({"name": "launch.md"})',
    '-> read_note({"name": "groceries.md"})',
    "<- read_note: # Launch plan (+4 more lines)",
    "<- read_note: # Groceries (+4 more lines)",
    "You have two notes: launch.md (the launch plan, owned by Priya) and groceries.md (oat "
    "milk, coffee beans, lemons).",
    "> When is the launch?",
    '-> search_notes({"query": "launch date"})',
    "<- search_notes: launch.md: - Launch date: Thursday 10 December.",
    'The launch is on Thursday 10 December (launch.md: "Launch date: Thursday 10 December.").',
]


@pytest.fixture
def quickstart(tmp_path, monkeypatch):
    """A copy of examples/ in a temporary folder, which is also the current directory.

    The quickstart loads the installed first-party plugin "openai", so entry points are on.
    """
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path / "examples" / "quickstart" / "tether.toml"


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def in_call_order(lines: list[str]) -> list[str]:
    """The output with the results of the two concurrent read_note calls in call order: each
    result is printed when it is stored, as its call finishes, so they come in either order."""
    results = [i for i, line in enumerate(lines) if line.startswith("<- read_note: ")]
    ordered = sorted((lines[i] for i in results), key=lambda line: "Launch" not in line)
    fixed = list(lines)
    for index, line in zip(results, ordered, strict=True):
        fixed[index] = line
    return fixed


def test_the_quickstart_runs_two_turns_with_tools(quickstart):
    result = invoke(
        "run", "--profile", str(quickstart), "What notes do I have?", "When is the launch?"
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert in_call_order(lines[:-1]) == QUICKSTART_OUTPUT
    assert re.fullmatch(r"session ses_[0-9a-f]{16}", lines[-1])
    assert result.stderr == (
        f"the script has 1 more step for a later prompt: --session {lines[-1].split()[1]} "
        "continues this session\n"
    )
    assert (quickstart.parent / ".tether" / "sessions.db").is_file()


def test_a_stored_session_continues_with_session(quickstart):
    first = invoke(
        "run", "--profile", str(quickstart), "What notes do I have?", "When is the launch?"
    )
    session = first.stdout.splitlines()[-1].split()[1]
    again = invoke("run", "--profile", str(quickstart), "--session", session, "Who owns it?")
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines() == [
        "> Who owns it?",
        'Priya owns the launch (launch.md: "Owner: Priya.").',
        f"session {session}",
    ]
    assert again.stderr == ""


def test_an_unknown_session_is_one_error_line(quickstart):
    result = invoke("run", "--profile", str(quickstart), "--session", "ses_nope", "hi")
    assert result.exit_code == 2
    assert result.stderr == (
        'ERROR: no session "ses_nope"; list the stored sessions with `tether sessions list` '
        "[SESSION_NOT_FOUND]\n"
    )


def test_a_turn_that_does_not_complete_exits_1(quickstart, tmp_path):
    (tmp_path / "empty.toml").write_text("steps = []\n")
    result = invoke("run", "--profile", str(quickstart), "--model", "scripted:empty.toml", "hello")
    assert result.exit_code == 1
    assert "[turn 1 stopped: error] " in result.stdout
    assert "unexpected model call" in result.stdout


def test_model_override_with_a_function_spec(quickstart, tmp_path, monkeypatch):
    (tmp_path / "shouting.py").write_text("def model(request):\n    return 'HELLO'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = invoke("run", "--profile", str(quickstart), "--model", "function:shouting:model", "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == ["> hi", "HELLO"]


def test_an_unknown_agent_is_one_error_line(quickstart):
    result = invoke("run", "--profile", str(quickstart), "--agent", "helper", "hi")
    assert result.exit_code == 2
    assert result.stderr.startswith('ERROR: unknown agent "helper"')
    assert result.stderr.endswith("use one of: main [UNKNOWN_AGENT]\n")


def test_context_shows_blocks_tools_and_pending_messages(quickstart):
    result = invoke(
        "context", "--project-code", "--profile", str(quickstart), "--prompt", "When?", "--json"
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["agent"] == "main"
    assert document["model"] == "scripted:script.toml"
    assert document["system"][0]["text"].startswith("# Notes assistant")
    assert [t["name"] for t in document["tools"]] == [
        "list_notes",
        "read_note",
        "search_notes",
        "load_skill",
        "read_skill_file",  # skills-fs serves a skill's bundled files
    ]
    prompt, catalog = document["pending"]
    assert prompt == {"role": "user", "content": "When?", "tokens": 2}
    assert catalog["role"] == "user"
    assert "- `citing-notes`: How to answer from the user's notes" in catalog["content"]
    assert document["total_tokens"] == (
        sum(b["tokens"] for b in document["system"])
        + document["tools_tokens"]
        + document["history_tokens"]
        + sum(m["tokens"] for m in document["pending"])
    )


def test_context_of_a_stored_session_includes_its_history(quickstart):
    first = invoke("run", "--profile", str(quickstart), "What notes do I have?")
    session = first.stdout.splitlines()[-1].split()[1]
    result = invoke("context", "--profile", str(quickstart), "--session", session, "--json")
    document = json.loads(result.stdout)
    assert document["session"] == session
    assert [m["role"] for m in document["history"]] == [
        "user",
        "user",  # the skill catalog
        "assistant",
        "tool",  # load_skill
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert document["pending"] == []


def test_context_text_output_names_every_part(quickstart):
    result = invoke("context", "--project-code", "--profile", str(quickstart))
    assert result.exit_code == 0, result.output
    for heading in ("== system block 1", "== system block 2", "== tools (5)", "total ~"):
        assert heading in result.stdout


def test_sessions_list_and_show(quickstart):
    first = invoke("run", "--profile", str(quickstart), "What notes do I have?")
    session = first.stdout.splitlines()[-1].split()[1]
    listing = invoke("sessions", "list", "--profile", str(quickstart), "--json")
    assert [h["id"] for h in json.loads(listing.stdout)] == [session]
    shown = invoke("sessions", "show", "--profile", str(quickstart), session, "--json")
    document = json.loads(shown.stdout)
    assert document["header"]["agent"] == "main"
    assert [e["type"] for e in document["events"]][:4] == [
        "descriptor",  # where the session's workspace is (docs/workspaces.md)
        "inbox/accepted",
        "turn/start",
        "user/message",
    ]
    assert document["events"][-1]["stop_reason"] == "completed"
    text = invoke("sessions", "show", "--profile", str(quickstart), session)
    assert f"id: {session}" in text.stdout


def test_the_readme_quickstart_command_runs(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = next(
        line.split("#")[0].strip()
        for line in readme.splitlines()
        if line.startswith("uv run tether run")
    )
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    args = shlex.split(command)[2:]  # drop "uv run": we are inside the environment already
    env = plugin_env()
    result = subprocess.run(
        [sys.executable, "-m", "tether", *args[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert result.returncode == 0, result.stderr
    assert in_call_order(result.stdout.splitlines()[:-1]) == QUICKSTART_OUTPUT


def test_run_exits_1_when_any_turn_fails_even_if_a_later_one_completes(quickstart, tmp_path):
    (tmp_path / "mixed.toml").write_text(
        '[[steps]]\ntext = "cut"\nfinish_reason = "length"\n[[steps]]\ntext = "fine"\n'
    )
    result = invoke(
        "run", "--profile", str(quickstart), "--model", "scripted:mixed.toml", "one", "two"
    )
    assert result.exit_code == 1
    assert "[turn 1 stopped: max-tokens]" in result.stdout
    assert "fine" in result.stdout


def test_steps_left_after_a_turn_that_did_not_complete_go_unmentioned(quickstart, tmp_path):
    # The stop line says what went wrong; a count of steps for later prompts would only
    # suggest continuing a session that failed.
    (tmp_path / "left.toml").write_text(
        '[[steps]]\ntext = "cut"\nfinish_reason = "length"\n[[steps]]\ntext = "later"\n'
    )
    result = invoke("run", "--profile", str(quickstart), "--model", "scripted:left.toml", "one")
    assert result.exit_code == 1
    assert "[turn 1 stopped: max-tokens]" in result.stdout
    assert result.stderr == ""


def test_context_rejects_an_unknown_model_spec(quickstart):
    result = invoke("context", "--profile", str(quickstart), "--model", "martian:x")
    assert result.exit_code == 2
    assert "[MODEL_SPEC_UNKNOWN]" in result.stderr


def test_plugins_shows_local_plugins_as_local(quickstart):
    result = invoke("plugins", "--profile", str(quickstart))
    notes = next(line for line in result.stdout.splitlines() if line.startswith("notes "))
    # Listed without being imported (docs/trust.md).
    assert notes.split()[:6] == ["notes", "local", "-", "not", "imported", "(global)"]
