"""The delegation example: spawn, fork and structured-output children in one scripted run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli

from ..processes import plugin_env

ROOT = Path(__file__).parents[2]
PROMPTS = ("We launch on Thursday 10 December; Priya owns it.", "Plan the launch announcement.")


@pytest.fixture
def profile(tmp_path, monkeypatch):
    shutil.copytree(
        ROOT / "examples" / "delegation",
        tmp_path / "delegation",
        ignore=shutil.ignore_patterns(".tether"),
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)  # first-party plugins
    return tmp_path / "delegation" / "tether.toml"


def test_one_step_delegates_to_spawn_fork_and_structured_children(profile):
    result = CliRunner().invoke(cli, ["run", "--profile", str(profile), *PROMPTS])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-2] == (
        "Plan: publish the announcement on Thursday 10 December; Priya signs off; the changelog "
        "still needs an owner."
    )
    assert "<- subagent: We launch on Thursday 10 December. Try it the same day." in lines
    assert '<- extract: {"owner": "Priya", "date": "Thursday 10 December"}' in lines
    assert any(line.startswith("<- fork: From our conversation:") for line in lines)
    started = [
        line
        for line in lines
        if re.fullmatch(r'  \[subagent ses_\w+ "[^"]+" started via \w+\]', line)
    ]
    ended = [
        line
        for line in lines
        if re.fullmatch(r'  \[subagent ses_\w+ "[^"]+" completed after .*\]', line)
    ]
    assert sorted(line.split()[-1] for line in started) == ["fork]", "spawn]", "spawn]"]
    assert len(ended) == 3


def test_sessions_tree_shows_the_children_with_their_depth(profile):
    run = CliRunner().invoke(cli, ["run", "--profile", str(profile), *PROMPTS])
    session = run.stdout.splitlines()[-1].split()[1]
    tree = CliRunner().invoke(cli, ["sessions", "tree", "--profile", str(profile), session])
    assert tree.exit_code == 0, tree.output
    lines = tree.stdout.splitlines()
    assert lines[0] == f"{session}  agent=main depth=0"
    assert sorted(line.split("depth=1  ")[1] for line in lines[1:]) == [
        "Check the plan",
        "Draft the announcement",
        "Extract launch facts",
    ]
    document = json.loads(
        CliRunner()
        .invoke(cli, ["sessions", "tree", "--profile", str(profile), session, "--json"])
        .stdout
    )
    assert {child["parent_session"] for child in document["children"]} == {session}
    assert {child["origin"] for child in document["children"]} == {"subagent"}


def run_in_a_terminal(args: list[str], cwd: Path, timeout: float = 30.0) -> str:
    """Run the console script with a pseudo-terminal as its stdout; everything it wrote."""
    import os
    import pty
    import subprocess
    import sys
    import time

    main, secondary = pty.openpty()
    env = plugin_env()
    tether = str(Path(sys.executable).parent / "tether")
    errors = cwd / "stderr.txt"
    with errors.open("wb") as stderr:
        process = subprocess.Popen(
            [tether, *args], stdout=secondary, stderr=stderr, cwd=cwd, env=env
        )
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: the process is done writing
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(main)
    assert process.returncode == 0, errors.read_text()
    return b"".join(chunks).decode()


def test_on_a_terminal_the_status_line_ticks_while_a_child_runs(tmp_path):
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["spawn", "subagent"]\n[agent.main]\nmodel = "scripted:script.toml"\n'
    )
    (tmp_path / "script.toml").write_text(
        """
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "slow task", prompt = "wait" } }]
[[steps]]
text = "done"
[[tasks."slow task".steps]]
delay = 1.3
text = "finally"
"""
    )
    output = run_in_a_terminal(["run", "go"], tmp_path)
    ticks = re.findall(r"\[subagents running: slow task (\d+\.\d)s\]", output)
    # One status line when the child starts, then a refresh every half second while it runs.
    assert len(ticks) >= 3, output
    assert float(ticks[-1]) >= 1.0
    assert [float(t) for t in ticks] == sorted(float(t) for t in ticks)
    assert re.search(r'\[subagent ses_\w+ "slow task" completed after 1\.\ds\]', output)
