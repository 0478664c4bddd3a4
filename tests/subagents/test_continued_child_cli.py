"""``tether run --session CHILD`` and ``tether context --session CHILD``, each in its own real
process on a real SQLite store: a delegated child continued from the command line keeps the
tools, call policy and approvals its delegation gave it (``deny``, its parent's: it never asks
anyone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tether.store import SQLiteStore
from tether.testing import scaled

from ..processes import plugin_env

pytestmark = pytest.mark.anyio

PROFILE = """\
[tether]
plugins = ["spawn", "subagent", "tools"]
plugin_dirs = ["plugins"]
store = "sqlite:sessions.db"

[plugin.subagent]
run_in_background = false
tool_filter = { deny = ["shout"] }

[agent.main]
model = "scripted:script.toml"
approval = "deny"  # its children get it: they never ask anyone
"""
TOOLS = """\
import tether
from tether.agents import Tool


def _tool(name, **options):
    return Tool(name, f"{name} something", lambda arguments, context: f"{name} ran", **options)


@tether.hookimpl
def tether_tools():
    return [_tool("echo"), _tool("shout"), _tool("danger", needs_approval=True)]
"""
# The root delegates once; the child ("research") answers.
SCRIPT = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "The child is done."

[[tasks.research.steps]]
text = "findings"
"""
# The child, continued on its own: it tries the tool its delegation denied, the tool that
# needs approval, and one it may use.
MORE = """\
[[tasks.research.steps]]
tool_calls = [{ name = "shout" }, { name = "danger" }, { name = "echo" }]

[[tasks.research.steps]]
text = "tried them"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "tools.py").write_text(TOOLS)
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text(SCRIPT)
    (tmp_path / "more.toml").write_text(MORE)
    return tmp_path


def tether(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tether ARGS`` in ``project``, with the installed first-party plugins."""
    env = plugin_env()
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(90),
    )


async def child_of_a_delegation(project: Path) -> str:
    result = tether(project, "run", "go")
    assert result.returncode == 0, result.stderr
    root_id = result.stdout.splitlines()[-1].removeprefix("session ")
    store = SQLiteStore(project / "sessions.db")
    try:
        (child,) = await store.sessions(parent=root_id)
    finally:
        await store.aclose()
    return child.id


async def test_tether_run_session_child_keeps_the_delegations_tools_and_approvals(project):
    child_id = await child_of_a_delegation(project)
    result = tether(project, "run", "--session", child_id, "--model", "scripted:more.toml", "again")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[4:7] == [
        '<- shout failed: error: there is no tool "shout"; available tools: subagent, echo, danger',
        '<- danger failed: error: tool "danger" needs approval, and this agent may not ask for it '
        "(its approval policy is deny)",
        "<- echo: echo ran",
    ]
    store = SQLiteStore(project / "sessions.db")
    try:
        results = [s.event for s in await store.events(child_id) if s.event.type == "tool/result"]
    finally:
        await store.aclose()
    assert [r.content for r in results][-2] == (  # type: ignore[union-attr]
        'error: tool "danger" needs approval, and this agent may not ask for it (its approval '
        "policy is deny)"
    )


async def test_tether_context_session_child_lists_the_childs_tools(project):
    child_id = await child_of_a_delegation(project)
    result = tether(project, "context", "--project-code", "--session", child_id, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["session"] == child_id
    assert [tool["name"] for tool in document["tools"]] == ["subagent", "echo", "danger"]
