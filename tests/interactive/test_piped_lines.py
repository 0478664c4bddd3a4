"""`tether run` with no prompts and standard input piped: each line a prompt, run to the end
before the next, slash commands as at the prompt, no prompt decoration (docs/interactive.md)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tether.testing import scaled

from ..processes import needs_sigint

HERE = Path(__file__).parent
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


@needs_sigint
def test_ctrl_c_in_a_piped_run_stops_as_tether_run_does(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()
    shutil.copy(HERE / "plugins" / "gates.py", tmp_path / "plugins" / "gates.py")
    (tmp_path / "tether.toml").write_text(
        PROFILE.replace("[tether]\n", '[tether]\nplugins = ["gates"]\nplugin_dirs = ["plugins"]\n')
    )
    (tmp_path / "script.toml").write_text('[[steps]]\ntool_calls = [{ name = "wait" }]\n')
    process = subprocess.Popen(
        [sys.executable, "-m", "tether", "run"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TETHER_HISTORY": str(tmp_path / "history")},
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write("wait for it\nnever run\n")
        process.stdin.flush()
        seen: list[str] = []
        deadline = time.monotonic() + DEADLINE
        while "[wait started]" not in seen:
            assert time.monotonic() < deadline, f"the tool never started: {seen}"
            line = process.stdout.readline()
            assert line, f"tether run ended before its tool started: {seen}"
            seen.append(line.rstrip("\n"))
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    assert "[turn 1 stopped: aborted]" in out
    assert "> never run" not in out
    assert out.rstrip().splitlines()[-1].startswith("session ses_")


def test_interactive_flag_with_prompts_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text(PROFILE)
    done = _run(tmp_path, "", "-i", "hello")
    assert done.returncode == 2
    assert "-i reads its prompts at the prompt: pass no PROMPTS with it" in done.stderr
