"""``tether sessions stats``: per request of a session, tokens by block, the share repeating
the request before it, and the cached tokens the provider reported; per tree with ``--tree``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tether.cli import cli

ROOT = Path(__file__).parents[2]
#: What running an example in the checkout leaves behind (its store), not copied.
IGNORED = shutil.ignore_patterns(".tether")

PROFILE = """\
[tether]
plugins = ["notes"]
plugin_dirs = ["plugins"]
store = "sqlite:sessions.db"

[agent.main]
model = "scripted:script.toml"
instructions = "instructions.md"
"""

SCRIPT = """\
[[steps]]
text = "Looking."
tool_calls = [{ name = "lookup", arguments = { word = "launch" } }]
usage = { input_tokens = 400, output_tokens = 5, cached_input_tokens = 0 }

[[steps]]
text = "Thursday."
usage = { input_tokens = 430, output_tokens = 2, cached_input_tokens = 384 }

[[steps]]
text = "Priya."
usage = { input_tokens = 450, output_tokens = 2, cached_input_tokens = 420 }

[[steps]]
text = "Still Priya."
"""


def _invoke(*arguments: str) -> Any:
    return CliRunner().invoke(cli, list(arguments))


@pytest.fixture
def session(tmp_path, monkeypatch) -> tuple[Path, str]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "script.toml").write_text(SCRIPT)
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "instructions.md").write_text("You keep the launch notes.\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "notes.py").write_text(
        "import tether\n"
        "from tether.agents import Tool\n\n"
        "@tether.hookimpl\n"
        "def tether_tools():\n"
        "    return [Tool('lookup', 'Look a word up.', lambda arguments, context: 'Thursday')]\n"
    )
    profile = tmp_path / "tether.toml"
    result = _invoke("run", "--profile", str(profile), "When do we launch?", "Who owns it?")
    assert result.exit_code == 0, result.output
    (session_id,) = re.findall(r"^session (ses_\w+)$", result.stdout, re.M)
    return profile, session_id


def _stats(profile: Path, session_id: str, *more: str) -> dict[str, Any]:
    result = _invoke(
        "sessions",
        "stats",
        session_id,
        "--project-code",
        "--profile",
        str(profile),
        "--json",
        *more,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_each_request_shows_its_blocks_what_it_repeats_and_what_was_cached(session):
    profile, session_id = session
    document = _stats(profile, session_id)
    (stats,) = document["sessions"]
    rows = stats["requests"]
    assert [(r["turn"], r["step"]) for r in rows] == [(1, 1), (1, 2), (2, 1)]
    assert stats["base_tokens"] > 0
    assert stats["tools_tokens"] > 0  # the lookup tool's schema
    first, second, third = rows
    assert first["repeats"] is None  # nothing before it
    # Each later request is the one before plus what was appended: it repeats nearly all.
    assert 0.8 < second["repeats"] < 1
    assert 0.8 < third["repeats"] < 1
    assert second["history_tokens"] > first["history_tokens"]
    for row in rows:
        assert row["total_tokens"] == (
            row["base_tokens"] + row["tools_tokens"] + row["history_tokens"] + row["context_tokens"]
        )
    # What the provider reported, as the script says it did.
    assert [(r["input_tokens"], r["cached_tokens"]) for r in rows] == [
        (400, 0),
        (430, 384),
        (450, 420),
    ]
    totals = stats["totals"]
    assert totals["requests"] == 3
    assert totals["input_tokens"] == 1280
    assert totals["cached_tokens"] == 804
    assert totals["total_tokens"] == sum(r["total_tokens"] for r in rows)
    assert document["totals"] == totals


def test_the_table_ends_with_the_sessions_totals(session):
    profile, session_id = session
    result = _invoke("sessions", "stats", session_id, "--project-code", "--profile", str(profile))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"session {session_id}  agent main  ~")
    assert lines[-1].strip().startswith("3 request(s), ~")
    assert "1280 input tokens reported, 804 cached (63%)" in lines[-1]


def test_a_compaction_breaks_the_repeated_prefix(session):
    """After a compaction the history starts with its summary: the next request repeats only
    the base prompt and the tools of the one before."""
    profile, session_id = session
    result = _invoke("sessions", "compact", session_id, "--profile", str(profile))
    assert result.exit_code == 0, result.output
    result = _invoke("run", "--profile", str(profile), "--session", session_id, "And now?")
    assert result.exit_code == 0, result.output
    stats = _stats(profile, session_id)["sessions"][0]
    rows = stats["requests"]
    assert [(r["step"], r["purpose"]) for r in rows] == [
        (1, "turn"),
        (2, "turn"),
        (1, "turn"),
        (None, "compaction"),
        (1, "turn"),
    ]
    after = rows[4]
    assert after["context_tokens"] > 0  # the summary
    assert after["repeats"] == pytest.approx(
        (after["base_tokens"] + after["tools_tokens"]) / after["total_tokens"]
    )
    assert after["repeats"] < rows[2]["repeats"]


def test_the_summary_request_of_a_compaction_is_counted(session):
    """A compaction asks the model too: its request is a row (the session's own request of
    the messages it replaced, so it repeats the request before), with the usage its event
    recorded, and it counts in the totals."""
    profile, session_id = session
    result = _invoke("sessions", "compact", session_id, "--profile", str(profile))
    assert result.exit_code == 0, result.output
    stats = _stats(profile, session_id)["sessions"][0]
    rows = stats["requests"]
    (summary,) = [r for r in rows if r["purpose"] == "compaction"]
    assert summary["step"] is None
    assert summary["turn"] == 2
    assert summary["input_tokens"] > 0  # the scripted model reports its estimate
    # It repeats the request before beyond its base prompt and tools (the replaced messages).
    base = (summary["base_tokens"] + summary["tools_tokens"]) / summary["total_tokens"]
    assert base < summary["repeats"] < 1
    assert stats["totals"]["requests"] == 4
    assert stats["totals"]["input_tokens"] == 1280 + summary["input_tokens"]
    result = _invoke("sessions", "stats", session_id, "--profile", str(profile))
    assert re.search(r"^\s+2\s+sum\s", result.stdout, re.M), result.stdout


def test_tree_adds_every_child_and_the_trees_totals(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples" / "delegation", tmp_path / "delegation", ignore=IGNORED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    profile = tmp_path / "delegation" / "tether.toml"
    result = _invoke(
        "run",
        "--profile",
        str(profile),
        "We launch on Thursday 10 December; Priya owns it.",
        "Plan the launch announcement.",
    )
    assert result.exit_code == 0, result.output
    (root,) = re.findall(r"^session (ses_\w+)$", result.stdout, re.M)
    document = _stats(profile, root, "--tree")
    sessions = document["sessions"]
    assert [s["depth"] for s in sessions] == [0, 1, 1, 1]
    assert all(s["parent"] == root for s in sessions[1:])
    assert document["totals"]["requests"] == sum(s["totals"]["requests"] for s in sessions)
    # The fork's first request repeats its parent's last (forking shares the prompt cache); a
    # fresh child's first has nothing before it.
    firsts = [s["requests"][0]["repeats"] for s in sessions[1:]]
    assert sum(1 for share in firsts if share is None) == 2
    (forked,) = [share for share in firsts if share is not None]
    assert forked > 0.5


def test_an_unknown_session_is_an_error_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tether.toml").write_text('[tether]\nstore = "sqlite:sessions.db"\n')
    result = _invoke("sessions", "stats", "ses_nope", "--profile", "tether.toml")
    assert result.exit_code == 2
    assert "SESSION_NOT_FOUND" in result.output
