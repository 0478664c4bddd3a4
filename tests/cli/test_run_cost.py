"""The end-of-run line of ``tether run``: what the run's requests cost (the whole tree's,
this run's only), or that the cost is unknown, never $0; none for an offline example whose
profile prices nothing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli

ROOT = Path(__file__).parents[2]
PROMPTS = ("What notes do I have?", "When is the launch?")
#: The quickstart script's requests (the answers' usage: the scripted model's estimate).
PRICE = '\n[prices."scripted:script.toml"]\ninput = 1.0\ncached_input = 0.5\noutput = 4.0\n'


@pytest.fixture
def quickstart(tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    shutil.copytree(
        ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns(".tether")
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path / "examples" / "quickstart" / "tether.toml"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def _stats(profile: Path, session: str) -> dict:
    import json

    result = invoke("sessions", "stats", session, "--profile", str(profile), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_offline_example_prints_no_cost_line(quickstart):
    result = invoke("run", "--profile", str(quickstart), *PROMPTS)
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("cost ") for line in result.output.splitlines())


def test_the_run_ends_with_what_its_requests_cost(quickstart):
    quickstart.write_text(quickstart.read_text() + PRICE)
    result = invoke("run", "--profile", str(quickstart), *PROMPTS)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"session ses_[0-9a-f]{16}", lines[-1])
    totals = _stats(quickstart, lines[-1].split()[1])["totals"]
    assert totals["cost"] > 0
    # On standard error, beside the conversation (standard output holds only the turns).
    assert result.stderr.splitlines()[-1] == (
        f"cost ${totals['cost']:.4f}: {totals['requests']} requests,"
        f" {totals['input_tokens']:,} input tokens"
        f" ({totals['cached_tokens'] / totals['input_tokens']:.0%} cached),"
        f" {totals['output_tokens']:,} output tokens"
    )


def test_a_continued_session_counts_this_runs_requests_only(quickstart):
    quickstart.write_text(quickstart.read_text() + PRICE)
    first = invoke("run", "--profile", str(quickstart), *PROMPTS)
    session = first.stdout.splitlines()[-1].split()[1]
    again = invoke("run", "--profile", str(quickstart), "--session", session, "Who owns it?")
    assert again.exit_code == 0, again.output
    rows = _stats(quickstart, session)["sessions"][0]["requests"]
    last = rows[-1]
    assert again.stderr.splitlines()[-1].startswith(
        f"cost ${last['cost']:.4f}: 1 request, {last['input_tokens']:,} input tokens"
    )


def test_a_model_without_a_price_says_cost_unknown_never_zero(quickstart):
    # The profile prices another model: this run's is unknown.
    quickstart.write_text(quickstart.read_text() + "\n[prices.gpt-5]\ninput = 1.0\noutput = 1.0\n")
    result = invoke("run", "--profile", str(quickstart), *PROMPTS)
    assert result.exit_code == 0, result.output
    line = result.stderr.splitlines()[-1]
    assert line.startswith("cost unknown: ")
    assert "$" not in line


def test_each_childs_end_line_says_what_it_cost(tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    shutil.copytree(
        ROOT / "examples" / "delegation",
        tmp_path / "delegation",
        ignore=shutil.ignore_patterns(".tether"),
    )
    monkeypatch.chdir(tmp_path)
    profile = tmp_path / "delegation" / "tether.toml"
    profile.write_text(profile.read_text() + "\n[prices.script]\ninput = 2.0\noutput = 8.0\n")
    result = invoke(
        "run",
        "--profile",
        str(profile),
        "We launch on Thursday 10 December; Priya owns it.",
        "Plan the launch announcement.",
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    root = lines[-1].split()[1]
    import json

    stats = invoke("sessions", "stats", root, "--tree", "--profile", str(profile), "--json")
    breakdown = json.loads(stats.stdout)["breakdown"]
    ended = {
        match.group(1): match.group(2)
        for line in lines
        if (
            match := re.fullmatch(
                r'  \[subagent (ses_\w+) "[^"]+" completed after .*s, (.+)\]', line
            )
        )
    }
    assert ended == {b["session"]: f"${b['cost']:.4f}" for b in breakdown[1:]}
    # Every end line comes before the run's session line; the cost line is on standard error.
    last_end = max(i for i, line in enumerate(lines) if line.startswith("  [subagent"))
    assert last_end < len(lines) - 1
    assert result.stderr.splitlines()[-1].startswith("cost $")
