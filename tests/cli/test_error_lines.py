"""The top-level contract, with the real console script: every failure of a command is one
``ERROR:`` line with a code and a remedy and exit status 2; ``--debug`` shows the traceback
instead; click's own exits keep their behaviour."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tether.store import SessionHeader, SQLiteStore
from tether.testing import scaled, write_profile

from ..store.files import read_only

TETHER = str(Path(sys.executable).parent / "tether")
#: Generous: the suite runs on a busy 2-core machine.
TIMEOUT = scaled(60)

#: A local plugin whose model provider has a bug: its factory raises.
FLAKY_PLUGIN = """\
import tether
from tether.models import ModelProvider


def _make(name, base):
    raise ValueError(f"no model called {name!r} in the catalogue")


@tether.hookimpl
def tether_model_providers():
    return [ModelProvider("flaky", _make, "a model provider with a bug")]
"""


def tether(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TETHER, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single ERROR line of a failed command (and nothing on standard output)."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ERROR: ")
    return lines[0]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "s.toml").write_text('[[steps]]\ntext = "hello"\n')
    return tmp_path


def profile_with_store(folder: Path, store: str) -> None:
    write_profile(folder, f'[tether]\nstore = "{store}"\n[agent.main]\nmodel = "scripted:s.toml"\n')


def test_a_store_that_is_not_a_database_is_one_line(project):
    (project / "sessions.db").write_text("not a database\n" * 50)
    profile_with_store(project, "sqlite:sessions.db")
    for command in (["sessions", "list"], ["run", "hi"]):
        line = one_error_line(tether(project, *command))
        assert line.startswith(
            f"ERROR: the session store is not a SQLite database (file is not a database) "
            f"({project / 'sessions.db'}); "
        )
        assert line.endswith("[STORE_CORRUPT]")
    assert (project / "sessions.db").read_text() == "not a database\n" * 50


def test_a_store_below_a_file_is_one_line_and_no_session_is_started(project):
    profile_with_store(project, "sqlite:s.toml/sessions.db")
    line = one_error_line(tether(project, "run", "hi"))
    assert f"{project / 's.toml'} is a file, not a folder" in line
    assert line.endswith("[STORE_UNAVAILABLE]")


def test_a_read_only_store_is_one_line_when_a_session_is_continued(project):
    profile_with_store(project, "sqlite:sessions.db")
    (project / "s.toml").write_text('[[steps]]\ntext = "hello"\n[[steps]]\ntext = "again"\n')
    first = tether(project, "run", "hi")
    assert first.returncode == 0, first.stderr
    session = first.stdout.splitlines()[-1].removeprefix("session ")
    before = (project / "sessions.db").read_bytes()
    with read_only(project / "sessions.db"):
        for command in (["run", "--session", session, "again"], ["run", "new"]):
            line = one_error_line(tether(project, *command))
            assert line.startswith("ERROR: the session store is read-only")
            assert line.endswith("nothing was written [STORE_UNAVAILABLE]")
        listed = tether(project, "sessions", "list")  # reading still works
        assert listed.returncode == 0
        assert listed.stdout.startswith(session)
    assert (project / "sessions.db").read_bytes() == before


def test_a_plugins_bug_is_one_line_naming_the_plugin(project):
    (project / "plugins").mkdir()
    (project / "plugins" / "flaky.py").write_text(FLAKY_PLUGIN)
    write_profile(
        project,
        '[tether]\nplugins = ["flaky"]\nplugin_dirs = ["plugins"]\nstore = "memory"\n'
        '[agent.main]\nmodel = "flaky:big"\n',
    )
    line = one_error_line(tether(project, "run", "hi"))
    plugin_file = project / "plugins" / "flaky.py"
    assert line == (
        f'ERROR: plugin "flaky" (local plugin {plugin_file}) failed: ValueError: no model '
        "called 'big' in the catalogue (raised in tether_local_flaky, line 6); this is a bug "
        'in plugin "flaky": run the command again with --debug to see the traceback and report '
        'it to the plugin\'s maintainers, or remove "flaky" from the profile '
        "[PLUGIN_UNEXPECTED_ERROR]"
    )


def test_debug_shows_the_traceback_of_an_unexpected_error(project):
    (project / "plugins").mkdir()
    (project / "plugins" / "flaky.py").write_text(FLAKY_PLUGIN)
    write_profile(
        project,
        '[tether]\nplugins = ["flaky"]\nplugin_dirs = ["plugins"]\nstore = "memory"\n'
        '[agent.main]\nmodel = "flaky:big"\n',
    )
    for result in (
        tether(project, "--debug", "run", "hi"),
        tether(project, "run", "hi", env={"TETHER_DEBUG": "1"}),
    ):
        assert result.returncode == 1
        assert "Traceback (most recent call last)" in result.stderr
        assert result.stderr.rstrip().endswith("ValueError: no model called 'big' in the catalogue")
        assert "ERROR:" not in result.stderr


def test_a_usage_error_stays_clicks(project):
    # (`tether run` alone is no longer one: it starts the interactive loop, docs/interactive.md.)
    result = tether(project, "run", "--no-such-option")
    assert result.returncode == 2
    assert result.stderr.startswith("Usage: tether run [OPTIONS] [PROMPTS]...")
    assert "Error: No such option '--no-such-option'." in result.stderr
    assert "ERROR:" not in result.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly(project):
    async def many_sessions() -> None:
        store = SQLiteStore(project / "sessions.db")
        try:
            for n in range(3000):  # more output than a pipe holds
                await store.create(SessionHeader(id=f"ses_{n:016x}", created_at=float(n)))
        finally:
            await store.aclose()

    anyio.run(many_sessions)
    profile_with_store(project, "sqlite:sessions.db")
    result = subprocess.run(
        f"{TETHER} sessions list --limit 3000 | head -n 1",
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.stdout.startswith("ses_0000000000000bb7  ")
    assert "ERROR" not in result.stderr
    assert "Traceback" not in result.stderr
