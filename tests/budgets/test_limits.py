"""Budgets as people write them: ``--budget``, profile tables, and what a mistake says."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tether.budgets import Budget
from tether.errors import ErrorCode, ProfileError
from tether.loading import load_profile
from tether.testing import write_profile


def test_the_forms_people_write():
    budget = Budget.parse("output=200k, cost=$2.50 time=10m,requests=40,children=5,live=3,warn=90%")
    assert budget == Budget(
        output_tokens=200_000,
        cost=2.5,
        wall_seconds=600.0,
        requests=40,
        children=5,
        live_children=3,
        warn_at=0.9,
    )
    assert Budget.parse("input=1.5M,time=1h").input_tokens == 1_500_000
    assert Budget.from_data({"output_tokens": 10, "wall_seconds": 90}).wall_seconds == 90


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("warn=90x", "warn = '90x': write a share as 0.8 or 80%"),
        ("time=5x", "write seconds as 90, 90s, 10m or 1h"),
        ("output=abc", "output = 'abc': not a number"),
        ("cost=2k", "write US dollars, as 2.50"),
        ("requests=1.5", "must be a whole number"),
        ("bogus=1", "unknown limit 'bogus'"),
        ("output", "is not LIMIT=VALUE"),
        ("warn=2", "warn_at = 2.0: must be a share above 0 and at most 1"),
    ],
)
def test_a_mistake_says_which_limit_and_how_to_write_it(text, says):
    with pytest.raises(ValueError, match="budget") as caught:
        Budget.parse(text)
    assert says in str(caught.value)


def test_a_profile_budget_is_checked_at_load_with_its_key(tmp_path):
    path = write_profile(tmp_path, '[tether]\nbudget = { output = "lots" }\n')
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert caught.value.code == ErrorCode.PROFILE_INVALID
    assert caught.value.key == "[tether] budget"
    assert "output = 'lots': not a number" in str(caught.value)


def test_a_bad_budget_on_the_command_line_starts_nothing(tmp_path):
    write_profile(tmp_path, '[tether]\nstore = "sqlite:sessions.db"\n[agent.main]\nmodel = "x"\n')
    result = subprocess.run(
        [sys.executable, "-m", "tether", "run", "--budget", "time=soon", "hi"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Invalid value for --budget" in result.stderr
    assert "time = 'soon'" in result.stderr
    assert not (tmp_path / "sessions.db").exists()  # nothing was opened, nothing written
