"""Commands that only list or inspect import no project code (docs/trust.md).

A cloned repository whose every local file (a ``plugin_dirs`` plugin the profile names, an agent
folder's ``tools/``, its ``instructions.py``) writes a marker when imported: the listing and
inspecting commands leave no marker, say what they did not import, and stay useful; the commands
that run the agent (``check``, ``context --project-code``) do import it, which shows the marker
works.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from tether.cli import cli

from ..processes import plugin_env

#: A local file that leaves a marker when its code runs.
MARKED = """\
from pathlib import Path

with open({marker!r}, "a", encoding="utf-8") as out:
    out.write({name!r} + "\\n")
"""

PROFILE = """\
[tether]
agents = ["agents"]
plugins = ["localp"]
plugin_dirs = ["plugins"]
store = "sqlite:sessions.db"
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cloned repository, as the current directory; its marker file is ``tmp_path/marker``."""
    repo = tmp_path / "repo"
    marker = str(tmp_path / "marker")
    main = repo / "agents" / "main"
    (main / "tools").mkdir(parents=True)
    (repo / "plugins").mkdir()
    (repo / "tether.toml").write_text(PROFILE, encoding="utf-8")
    (repo / "plugins" / "localp.py").write_text(
        MARKED.format(marker=marker, name="plugin_dirs"), encoding="utf-8"
    )
    (main / "tools" / "evil.py").write_text(
        MARKED.format(marker=marker, name="tools"), encoding="utf-8"
    )
    (main / "instructions.py").write_text(
        MARKED.format(marker=marker, name="instructions.py")
        + "\ndef instructions():\n    return 'From instructions.py.'\n",
        encoding="utf-8",
    )
    (main / "agent.toml").write_text(
        'description = "The main agent"\nmodel = "scripted:script.toml"\n', encoding="utf-8"
    )
    (main / "script.toml").write_text('[[steps]]\ntext = "Hi."\n', encoding="utf-8")
    monkeypatch.chdir(repo)
    return repo


@pytest.fixture
def session_id(repo: Path) -> str:
    """A stored session of agent main, written through the store alone."""
    from tether.agents import new_header
    from tether.loading import load_kernel
    from tether.runtime import profile_store

    kernel = load_kernel(repo / "tether.toml", project_code=False)

    async def create() -> str:
        store = profile_store(kernel)
        try:
            header = await store.create(new_header(agent="main"))
            return header.id
        finally:
            await store.aclose()

    return anyio.run(create)


def marks(repo: Path) -> list[str]:
    marker = repo.parent / "marker"
    return marker.read_text(encoding="utf-8").split() if marker.exists() else []


def invoke(*arguments: str) -> Any:
    return CliRunner().invoke(cli, list(arguments))


def test_sessions_list_show_tree_and_stats_import_no_project_code(repo, session_id):
    for arguments in (
        ("sessions", "list"),
        ("sessions", "show", session_id),
        ("sessions", "tree", session_id),
        ("sessions", "stats", session_id),
    ):
        result = invoke(*arguments)
        assert result.exit_code == 0, (arguments, result.output)
        assert marks(repo) == [], arguments
    assert session_id in invoke("sessions", "list").output


def test_sessions_stats_says_what_it_left_out(repo, session_id):
    result = invoke("sessions", "stats", session_id)
    assert "note: project code not imported" in result.stderr
    assert "instructions.py" in result.stderr
    assert "local plugin evil" in result.stderr


def test_plugins_lists_local_plugins_as_not_imported(repo):
    result = invoke("plugins")
    assert result.exit_code == 0, result.output
    assert marks(repo) == []
    lines = {line.split()[0]: line for line in result.output.splitlines()[1:]}
    assert "not imported (global)" in lines["localp"]
    assert "not imported (agent:main)" in lines["evil"]
    assert "local (agent main)" in lines["evil"]
    rows = {row["name"]: row for row in json.loads(invoke("plugins", "--json").output)["plugins"]}
    assert rows["evil"]["loaded"] is True
    assert rows["evil"]["imported"] is False
    assert rows["evil"]["hooks"] is None
    assert marks(repo) == []


def test_skills_list_and_show_import_no_project_code(repo):
    listed = invoke("skills", "list")
    assert listed.exit_code == 0, listed.output
    assert "skills of agent main" in listed.output
    assert "local plugin localp" in listed.stderr
    shown = invoke("skills", "show", "anything")
    assert shown.exit_code == 2
    assert "UNKNOWN_SKILL" in shown.stderr
    assert marks(repo) == []


def test_context_composes_without_project_code_and_names_what_it_left_out(repo):
    result = invoke("context")
    assert result.exit_code == 0, result.output
    assert marks(repo) == []
    assert "From instructions.py." not in result.output
    assert "== not imported (3): pass --project-code to include them" in result.output
    assert "instructions main:" in result.output
    assert "plugin evil:" in result.output
    document = json.loads(invoke("context", "--json").output)
    kinds = sorted(row["kind"] for row in document["not_imported"])
    assert kinds == ["instructions", "plugin", "plugin"]
    assert marks(repo) == []


def test_context_with_project_code_shows_the_exact_request(repo):
    result = invoke("context", "--project-code")
    assert result.exit_code == 0, result.output
    assert "From instructions.py." in result.output
    assert "== not imported" not in result.output
    assert sorted(marks(repo)) == ["instructions.py", "plugin_dirs", "tools"]


def test_check_imports_the_project_code_it_checks(repo):
    result = invoke("check")
    assert result.exit_code == 0, result.output
    assert sorted(marks(repo)) == ["instructions.py", "plugin_dirs", "tools"]


def test_mcp_list_offline_imports_no_project_code(repo):
    """In a real process with installed plugins on, as a user runs it."""
    (repo / "tether.toml").write_text(
        PROFILE.replace('plugins = ["localp"]', 'plugins = ["localp", "mcp"]')
        + '\n[[plugin.mcp.servers]]\nname = "git"\ncommand = "touch"\n'
        + f'args = ["{repo.parent / "marker"}"]\n',
        encoding="utf-8",
    )
    env = plugin_env()
    done = subprocess.run(
        [sys.executable, "-m", "tether", "mcp", "list", "--offline"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "global: git (stdio, lazy): touch" in done.stdout
    assert not (repo.parent / "marker").exists()
