"""The quickstart on a PostgreSQL store, driven by separate ``tether`` processes: what one
process ran, another lists, shows and continues."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tether.testing import scaled

from ..processes import plugin_env

ROOT = Path(__file__).parents[2]
TIMEOUT = scaled(120.0)


@pytest.fixture
def profile(tmp_path, postgres_url) -> Path:
    """The quickstart, its store moved to PostgreSQL (and the "postgres" plugin added)."""
    shutil.copytree(
        ROOT / "examples" / "quickstart",
        tmp_path / "quickstart",
        ignore=shutil.ignore_patterns(".tether"),  # a store left by running it here
    )
    path = tmp_path / "quickstart" / "tether.toml"
    text = path.read_text()
    text = text.replace('plugins = ["notes",', 'plugins = ["postgres", "notes",')
    text = re.sub(r'store = "sqlite:[^"]*"', f'store = "{postgres_url}"', text)
    path.write_text(text)
    return path


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = plugin_env()
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )


def test_a_session_run_by_one_process_is_listed_shown_and_continued_by_others(profile):
    folder = profile.parent
    ran = tether("run", "--profile", str(profile), "What notes do I have?", cwd=folder)
    assert ran.returncode == 0, ran.stderr
    assert "You have two notes" in ran.stdout
    assert not (folder / ".tether" / "sessions.db").exists()  # nothing went to a SQLite file

    listed = tether("sessions", "list", "--profile", str(profile), cwd=folder)
    assert listed.returncode == 0, listed.stderr
    (session,) = re.findall(r"\bses_\w+", listed.stdout)

    again = tether(
        "run", "--profile", str(profile), "--session", session, "When is the launch?", cwd=folder
    )
    assert again.returncode == 0, again.stderr
    assert "Thursday 10 December" in again.stdout

    shown = tether("sessions", "show", session, "--profile", str(profile), cwd=folder)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("turn/start") == 2
    assert "What notes do I have?" in shown.stdout
    assert "When is the launch?" in shown.stdout


def test_a_profile_whose_server_is_down_fails_with_one_line(profile, tmp_path):
    text = profile.read_text()
    profile.write_text(
        re.sub(r'store = "[^"]*"', 'store = "postgresql://u:pw@127.0.0.1:1/x"', text)
    )
    result = tether("sessions", "list", "--profile", str(profile), cwd=profile.parent)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "[STORE_UNAVAILABLE]" in lines[0]
    assert "postgresql://u@127.0.0.1:1/x" in lines[0]
    assert "pw" not in lines[0].replace("postgresql://u@", "")


def test_a_postgres_store_without_the_plugin_names_the_fix(profile):
    text = profile.read_text().replace('"postgres", ', "")
    profile.write_text(text)
    result = tether("check", "--profile", str(profile), cwd=profile.parent)
    assert result.returncode != 0
    assert "[STORE_SPEC_INVALID]" in result.stderr
    assert "unknown session store" in result.stderr
