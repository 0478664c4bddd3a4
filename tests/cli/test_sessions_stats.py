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


# -- cost -----------------------------------------------------------------------------------

#: What the script's three requests cost at $1 in, $0.10 cached, $2 out per million tokens:
#: (400 plain + 5 out), (46 plain + 384 cached + 2 out), (30 plain + 420 cached + 2 out).
PRICED = """
[prices."scripted:script.toml"]
input = 1.0
cached_input = 0.1
output = 2.0
"""
COSTS = [
    (400 + 5 * 2) / 1e6,
    (46 + 384 * 0.1 + 2 * 2) / 1e6,
    (30 + 420 * 0.1 + 2 * 2) / 1e6,
]


def test_a_model_without_a_price_costs_unknown_never_zero(session):
    profile, session_id = session
    stats = _stats(profile, session_id)["sessions"][0]
    assert [row["cost"] for row in stats["requests"]] == [None, None, None]
    assert [row["model"] for row in stats["requests"]] == ["scripted:script.toml"] * 3
    assert [row["output_tokens"] for row in stats["requests"]] == [5, 2, 2]
    totals = stats["totals"]
    assert totals["cost"] is None
    assert totals["unpriced_requests"] == 3
    assert totals["output_tokens"] == 9
    result = _invoke("sessions", "stats", session_id, "--project-code", "--profile", str(profile))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].endswith(", cost unknown")
    assert "$0.00" not in result.stdout


def test_each_request_is_priced_by_the_profiles_prices(session):
    profile, session_id = session
    profile.write_text(profile.read_text() + PRICED)
    stats = _stats(profile, session_id)["sessions"][0]
    assert [row["cost"] for row in stats["requests"]] == pytest.approx(COSTS)
    totals = stats["totals"]
    assert totals["cost"] == pytest.approx(sum(COSTS))
    assert totals["unpriced_requests"] == 0
    result = _invoke("sessions", "stats", session_id, "--project-code", "--profile", str(profile))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].endswith(f", cost ${sum(COSTS):.4f}")
    assert f"${COSTS[0]:.6f}" in result.stdout  # the first request's row


def test_a_change_of_model_prices_the_later_requests_by_the_new_one(session):
    """A session continued on another model (``--model``, a ``model`` descriptor in its log)
    prices each request by the model that made it; one unpriced request makes the total
    unknown, shown with what the priced ones cost."""
    profile, session_id = session
    folder = profile.parent
    # A script answers by the session's request number: the first three are the session's.
    (folder / "other.toml").write_text(
        '[[steps]]\ntext = "-"\n' * 3
        + '[[steps]]\ntext = "Later."\n'
        + "usage = { input_tokens = 1000, output_tokens = 10, cached_input_tokens = 0 }\n"
    )
    profile.write_text(profile.read_text() + PRICED)
    result = _invoke(
        "run",
        "--profile",
        str(profile),
        "--session",
        session_id,
        "--model",
        "scripted:other.toml",
        "And later?",
    )
    assert result.exit_code == 0, result.output
    stats = _stats(profile, session_id)["sessions"][0]
    rows = stats["requests"]
    assert [row["model"] for row in rows] == ["scripted:script.toml"] * 3 + ["scripted:other.toml"]
    assert stats["models"] == ["scripted:script.toml", "scripted:other.toml"]
    assert [row["cost"] for row in rows[:3]] == pytest.approx(COSTS)
    assert rows[3]["cost"] is None
    totals = stats["totals"]
    assert totals["cost"] is None
    assert totals["priced_cost"] == pytest.approx(sum(COSTS))
    assert totals["unpriced_requests"] == 1
    text = _invoke("sessions", "stats", session_id, "--project-code", "--profile", str(profile))
    assert f"cost ${sum(COSTS):.4f} + unknown (1 unpriced request)" in text.stdout

    # Priced by prefix too: the profile's "script" prices every scripted: model whose name
    # starts with it, the whole spec still winning for script.toml.
    profile.write_text(profile.read_text() + "\n[prices.other]\ninput = 10.0\noutput = 10.0\n")
    rows = _stats(profile, session_id)["sessions"][0]["requests"]
    assert rows[3]["cost"] == pytest.approx((1000 * 10 + 10 * 10) / 1e6)


def _append(database: Path, session_id: str, *events: Any) -> None:
    import anyio

    from tether.store import SQLiteStore

    async def write() -> None:
        store = SQLiteStore(database)
        try:
            await store.append(session_id, list(events))
        finally:
            await store.aclose()

    anyio.run(write)


def test_tree_breaks_the_cost_down_per_child_and_says_which_budget_stopped_one(
    tmp_path, monkeypatch
):
    from tether.store import DescriptorEvent

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
    unpriced = _stats(profile, root, "--tree")
    assert unpriced["totals"]["cost"] is None
    assert unpriced["totals"]["unpriced_requests"] == unpriced["totals"]["requests"]

    # Price the script, and stop one child by a budget (as the budget's check logs it).
    profile.write_text(profile.read_text() + "\n[prices.script]\ninput = 2.0\noutput = 8.0\n")
    child = unpriced["sessions"][1]["session"]
    _append(
        tmp_path / "delegation" / ".tether" / "sessions.db",
        child,
        DescriptorEvent(
            kind="budget-exceeded",
            data={"holder": root, "limit": "output_tokens", "allowed": 50, "used": 48, "need": 8},
        ),
    )
    document = _stats(profile, root, "--tree")
    sessions, breakdown = document["sessions"], document["breakdown"]
    assert [b["session"] for b in breakdown] == [s["session"] for s in sessions]
    assert [b["depth"] for b in breakdown] == [0, 1, 1, 1]
    assert breakdown[0]["children"] == 3
    assert all(b["children"] == 0 for b in breakdown[1:])
    for b, s in zip(breakdown, sessions, strict=True):
        assert b["requests"] == s["totals"]["requests"]
        assert b["input_tokens"] == s["totals"]["input_tokens"]
        assert b["output_tokens"] == s["totals"]["output_tokens"]
        assert b["cost"] == pytest.approx(
            sum((r["input_tokens"] or 0) * 2.0 + r["output_tokens"] * 8.0 for r in s["requests"])
            / 1e6
        )
        assert b["started"] == pytest.approx(b["started"])  # a time, from the header
        assert b["wall_seconds"] is None  # the store keeps no time per event
    stopped = {b["session"]: b["stopped_by"] for b in breakdown if b["stopped_by"]}
    assert stopped == {child: {"holder": root, "limit": "output_tokens", "allowed": 50, "used": 48}}
    totals = document["totals"]
    assert totals["cost"] == pytest.approx(sum(b["cost"] for b in breakdown))
    assert totals["unpriced_requests"] == 0
    assert totals["sessions"] == 4
    assert totals["children"] == 3
    assert totals["stopped"] == 1
    assert totals["output_tokens"] == sum(b["output_tokens"] for b in breakdown)

    text = _invoke("sessions", "stats", root, "--tree", "--profile", str(profile)).stdout
    lines = text.splitlines()
    head = next(
        i for i, line in enumerate(lines) if line.startswith("session ") and "stopped by" in line
    )
    table = lines[head + 1 :]
    assert table[0].startswith(root)
    assert any(
        line.startswith(f"  {child}") and "output 50 tokens (used 48 tokens) of " + root in line
        for line in table
    )
    end = table.index("")  # the tree's line follows the breakdown, last as before
    assert table[end - 1].startswith("total")
    assert f"${totals['cost']:.4f}" in table[end - 1]
    assert lines[-1].startswith(f"tree {root}: ")
    assert lines[-1].endswith(f"cost ${totals['cost']:.4f}")


def test_the_breakdown_names_the_budget_a_real_run_was_stopped_by(tmp_path, monkeypatch):
    """The delegation example under a profile budget of three requests: the requests past it
    are refused by the budget's check, which logs which limit stopped whom; the breakdown
    reads it."""
    shutil.copytree(ROOT / "examples" / "delegation", tmp_path / "delegation", ignore=IGNORED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    profile = tmp_path / "delegation" / "tether.toml"
    text = profile.read_text().replace(
        'store = "sqlite:.tether/sessions.db"',
        'store = "sqlite:.tether/sessions.db"\nbudget = { requests = 3 }',
    )
    profile.write_text(text + "\n[prices.script]\ninput = 2.0\noutput = 8.0\n")
    result = _invoke(
        "run",
        "--profile",
        str(profile),
        "We launch on Thursday 10 December; Priya owns it.",
        "Plan the launch announcement.",
    )
    (root,) = re.findall(r"^session (ses_\w+)$", result.stdout, re.M)
    document = _stats(profile, root, "--tree")
    totals = document["totals"]
    assert totals["requests"] == 3  # the budget's limit, not one more
    stopped = [b for b in document["breakdown"] if b["stopped_by"] is not None]
    assert stopped
    for b in stopped:
        assert b["stopped_by"]["holder"] == root
        assert b["stopped_by"]["limit"] == "requests"
        assert b["stopped_by"]["allowed"] == 3
    assert totals["stopped"] == len(stopped)
    assert totals["cost"] == pytest.approx(sum(b["cost"] for b in document["breakdown"]))
