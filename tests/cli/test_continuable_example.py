"""The continuable example: a child takes a follow-up, and the parent gets a notice each time."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled

from ..processes import plugin_env

ROOT = Path(__file__).parents[2]


def test_a_continuable_child_receives_a_follow_up_and_its_settlement_notices(tmp_path):
    example = tmp_path / "continuable"
    shutil.copytree(
        ROOT / "examples" / "continuable", example, ignore=shutil.ignore_patterns(".tether")
    )
    env = plugin_env()
    result = subprocess.run(
        [sys.executable, str(example / "run.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(60),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (child,) = {
        m[1] for line in lines if (m := re.match(r"<- subagent: Started task (\S+)\.", line))
    }
    assert f"-> subagent({{'taskId': '{child}', 'prompt': 'Who signs off, and when?'}})" in lines
    assert (
        f"<- subagent: Sent to task {child}. Its reply will arrive in a <task_result> message."
        in lines
    )
    results = [line for line in lines if line.startswith(f'> <task_result id="{child}"')]
    assert results == [
        f'> <task_result id="{child}" tool="subagent" status="completed">The launch is on '
        "Thursday 10 December; Priya owns it.</task_result>",
        f'> <task_result id="{child}" tool="subagent" status="completed">Marco signs off, the '
        "day before the launch (Wednesday 9 December).</task_result>",
    ]
    assert lines[-2] == (
        "The helper reports: Marco signs off, the day before the launch (Wednesday 9 December)."
    )
    # One child session took both prompts: the follow-up restored it with its history.
    assert [line for line in lines if line.startswith(f"  [subagent {child}")] == [
        f"  [subagent {child} start]",
        f"  [subagent {child} end completed]",
    ] * 2
    assert (example / ".tether" / "sessions.db").exists()


def test_tether_run_waits_for_continuable_children_to_settle(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tether.cli import cli

    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tether.toml").write_text(
        '[tether]\nplugins = ["spawn", "subagent"]\nstore = "sqlite:.tether/s.db"\n'
        '[plugin.subagent]\nbackground = "continuable"\n'
        '[agent.main]\nmodel = "scripted:script.toml"\n'
    )
    (tmp_path / "script.toml").write_text(
        """
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "slow task", prompt = "go" } }]
[[steps]]
text = "started it"
[[steps]]
expect = 'status="completed">the slow answer'
text = "it is done"
[[tasks."slow task".steps]]
delay = 0.3
text = "the slow answer"
"""
    )
    result = CliRunner().invoke(cli, ["run", "do it"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "started it" in lines
    assert lines[-2] == "it is done"
    # The child's delay is 0.3 s; on a busy machine it takes longer, never less.
    assert any(re.search(r"completed after (0\.[3-9]|[1-9]\d*\.\d)s\]$", line) for line in lines)
