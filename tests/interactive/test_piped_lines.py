"""`tether run` with no prompts and standard input piped: each line a prompt, run to the end
before the next, slash commands as at the prompt, no prompt decoration (docs/interactive.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled

DEADLINE = scaled(60.0)

PROFILE = """\
[tether]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "scripted:script.toml"
"""


def _run(folder: Path, lines: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "run", *args],
        cwd=folder,
        input=lines,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        env={**os.environ, "TETHER_HISTORY": str(folder / "history")},
    )


def test_each_piped_line_is_a_turn_run_in_order(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text(
        '[[steps]]\nexpect = "first"\ntext = "one"\n\n[[steps]]\nexpect = "second"\ntext = "two"\n'
    )
    done = _run(tmp_path, "first\n\n/tree\nsecond\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["> first", "one", lines[2]]
    assert lines[2].endswith("agent=main depth=0")  # /tree, between the two turns
    assert lines[3:5] == ["> second", "two"]
    assert lines[-1].startswith("session ses_")
    assert "tether: type a prompt" not in done.stdout + done.stderr  # no decoration
    assert not (tmp_path / "history").exists()  # piped lines are not a person's history


def test_a_piped_run_whose_turn_fails_exits_1(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text('[[steps]]\nexpect = "something else"\ntext = "x"\n')
    done = _run(tmp_path, "first\n")
    assert done.returncode == 1
    assert "[turn 1 stopped: error]" in done.stdout
    assert "[SCRIPT_MISMATCH]" in done.stdout


def test_an_unknown_slash_command_sends_nothing(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text('[[steps]]\ntext = "x"\n')
    done = _run(tmp_path, "/nosuch now\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("unknown command /nosuch: /compact")
    assert "> /nosuch" not in done.stdout  # nothing was sent


def test_interactive_flag_with_prompts_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text(PROFILE)
    done = _run(tmp_path, "", "-i", "hello")
    assert done.returncode == 2
    assert "-i reads its prompts at the prompt: pass no PROMPTS with it" in done.stderr
