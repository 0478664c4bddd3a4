"""``tether run`` on a turn that repeats itself (issue 38): the profile's
``limits.max_repeated_calls``, the notice line, and the stop line naming the call and the
code, through a real process on the quickstart's notes plugin and a scripted model."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tether.testing import scaled, write_profile

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"
TIMEOUT = scaled(60.0)

SCRIPT = """\
[[steps]]
tool_calls = [{ name = "list_notes" }]

[[steps]]
tool_calls = [{ name = "list_notes" }]

[[steps]]
tool_calls = [{ name = "list_notes" }]

[[steps]]
text = "never played"
"""


def test_a_repeating_turn_is_told_then_stopped_with_its_reason(tmp_path: Path) -> None:
    shutil.copytree(QUICKSTART / "plugins", tmp_path / "plugins")
    shutil.copytree(QUICKSTART / "notes", tmp_path / "notes")
    (tmp_path / "script.toml").write_text(SCRIPT, encoding="utf-8")
    write_profile(
        tmp_path,
        """\
        [tether]
        plugins = ["notes"]
        plugin_dirs = ["plugins"]
        store = "memory"
        [plugin.notes]
        root = "notes"
        [agent.main]
        model = "scripted:script.toml"
        limits = { max_repeated_calls = 2 }
        """,
    )
    env = {k: v for k, v in os.environ.items() if k != "TETHER_DEBUG"}
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "What notes do I have?"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:-1] == [
        "> What notes do I have?",
        "-> list_notes({})",
        "<- list_notes: groceries.md (+1 more line)",
        "-> list_notes({})",
        "<- list_notes: groceries.md (+1 more line)",
        "[notice to the model: it repeats the same calls; one more such step stops the turn]",
        "-> list_notes({})",
        "<- list_notes failed: Not run: the same call as in the steps before, after a notice; "
        "the turn stopped.",
        "[turn 1 stopped: error] the model called list_notes({}) in 3 steps in a row, with the "
        "same arguments, the last one after a notice asking it not to; the turn was stopped "
        "without running them again (agent main, limits.max_repeated_calls = 2); a small model "
        "may loop like this: try a larger model or clearer instructions, or raise "
        "limits.max_repeated_calls in the agent's table (0: no limit) [TOOL_CALLS_REPEATED]",
    ], result.stdout
