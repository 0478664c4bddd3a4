"""The delegation example: spawn, fork and structured-output children in one scripted run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli

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
