"""The continuable example: a child takes a follow-up, and the parent gets a notice each time."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_a_continuable_child_receives_a_follow_up_and_its_settlement_notices(tmp_path):
    example = tmp_path / "continuable"
    shutil.copytree(
        ROOT / "examples" / "continuable", example, ignore=shutil.ignore_patterns(".tether")
    )
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}
    result = subprocess.run(
        [sys.executable, str(example / "run.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (child,) = {
        m[1] for line in lines if (m := re.match(r"<- subagent: started subagent (\S+)", line))
    }
    assert (
        f"-> send_message({{'subagent_id': '{child}', 'message': 'Who signs off, and when?'}})"
        in lines
    )
    notices = [
        line
        for line in lines
        if line == f"> Background subagent {child} finished and will do no "
        "further work unless you send it more."
    ]
    assert len(notices) == 2
    assert lines[-2] == (
        "The helper reports: Marco signs off, the day before the launch (Wednesday 9 December)."
    )
    # One child session took both prompts: the follow-up restored it with its history.
    assert [line for line in lines if line.startswith(f"  [subagent {child}")] == [
        f"  [subagent {child} start]",
        f"  [subagent {child} end completed]",
    ] * 2
    assert (example / ".tether" / "sessions.db").exists()
