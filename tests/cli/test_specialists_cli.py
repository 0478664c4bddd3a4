"""Declared subagents (specialists) on the command line: ``tether check`` composes every agent
as a session gets it (a subagent whose tool name another tool of the agent has is an error),
``tether context`` lists an agent's subagents, and ``tether plugins`` lists an agent's own
local plugins (an agent folder's ``tools/``, ``[agent.NAME] plugin_dirs``)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from tether.agents import new_header
from tether.cli import cli
from tether.store import SQLiteStore
from tether.testing import write_profile

PROFILE = '[tether]\nagents = ["agents"]\n'

#: A local plugin that offers tools by the names given.
TOOLS_PLUGIN = """\
import tether
from tether.agents import Tool

NAMES = {names!r}


@tether.hookimpl
def tether_tools():
    return [Tool(name, "a plugin's tool", lambda arguments, context: "ran") for name in NAMES]
"""

#: A local plugin that needs a skill provider nobody loads.
NEEDY_PLUGIN = """\
import tether


@tether.hookimpl
def tether_requires():
    return [tether.Requirement(plugin="ghost", kind="skill provider")]
"""


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def agent_folder(root: Path, *path: str, toml: str | None = None) -> Path:
    """``root/agents/<path[0]>/subagents/<path[1]>/...``, with an optional agent.toml."""
    folder = root / "agents" / path[0]
    for child in path[1:]:
        folder = folder / "subagents" / child
    folder.mkdir(parents=True, exist_ok=True)
    if toml is not None:
        (folder / "agent.toml").write_text(textwrap.dedent(toml).lstrip(), encoding="utf-8")
    return folder


def plugin_file(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


def tools_file(folder: Path, name: str, *tools: str) -> Path:
    return plugin_file(folder, name, TOOLS_PLUGIN.format(names=list(tools or (name,))))


# tether check: the subagents' tools


def test_check_fails_on_a_subagent_folder_named_like_a_tool_of_its_agent(runner, tmp_path):
    main = agent_folder(tmp_path, "main")
    tools_file(main / "tools", "researcher")  # a local plugin offering the tool "researcher"
    agent_folder(tmp_path, "main", "researcher", toml='description = "Finds things."\n')
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr == (
        'ERROR: Subagent "researcher" of agent "main" collides with another tool name '
        f"({main.resolve() / 'subagents'}, [agent.main] subagents); rename the subagent (its "
        "folder, or tool_name), or hide it with tool = false and call it from your own tool "
        "[TOOL_INVALID]\n"
    )


def test_check_fails_on_a_subagent_table_whose_tool_name_a_global_tool_has(runner, tmp_path):
    tools_file(tmp_path / "plugins", "helpers", "review")
    path = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["helpers"]
        plugin_dirs = ["plugins"]

        [agent.main]
        subagents = ["reviewer"]

        [agent.reviewer]
        description = "Reviews a text."
        tool_name = "review"
        """,
    )
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        'ERROR: Subagent "review" of agent "main" collides with another tool name '
        f"({path.resolve()}, [agent.main] subagents); "
    )
    assert result.stderr.endswith(" [TOOL_INVALID]\n")


def test_check_fails_on_a_tool_named_like_a_task_tool(runner, tmp_path):
    main = agent_folder(tmp_path, "main")
    tools_file(main / "tools", "waiting", "task_wait")
    agent_folder(tmp_path, "main", "writer", toml='description = "Writes."\ntool = "deferred"\n')
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        'ERROR: The task tool "task_wait" of agent "main" collides with another tool name'
    )
    assert result.stderr.count("\n") == 1


def test_check_passes_a_hidden_subagent_whose_name_a_tool_has(runner, tmp_path):
    """``tool = false`` gives no tool: a plugin's tool of the same name may wrap it."""
    main = agent_folder(tmp_path, "main")
    tools_file(main / "tools", "researcher")
    agent_folder(
        tmp_path, "main", "researcher", toml='description = "Finds things."\ntool = false\n'
    )
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 0, result.output
    assert "  subagent main.researcher  tool=researcher (hidden: tool = false)" in (
        result.stdout.splitlines()
    )
    assert result.stdout.endswith("ok: 1 plugin instance in 3 scopes, 0 requirements met\n")


def test_a_missing_requirement_of_a_subagent_names_its_quoted_table(runner, tmp_path):
    researcher = agent_folder(tmp_path, "main", "researcher", toml='description = "Finds."\n')
    plugin_file(researcher / "tools", "needy", NEEDY_PLUGIN)
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        'ERROR: skill provider "ghost" is not loaded in scope global > agent:main.researcher '
        '(plugin "needy"); add "ghost" to [agent."main.researcher"] plugins '
        "[MISSING_REQUIRED_PLUGIN]\n"
    )


# tether context: the agent's subagents


def specialist_tree(root: Path) -> None:
    agent_folder(root, "main", toml='model = "scripted:s.toml"\n')
    agent_folder(root, "main", "researcher", toml='description = """Finds\nsources."""\n')
    agent_folder(
        root, "main", "writer", toml='description = "Writes short texts."\ntool = "deferred"\n'
    )
    agent_folder(root, "main", "critic", toml='description = "Judges a text."\ntool = false\n')
    agent_folder(root, "main", "researcher", "searcher", toml='description = "Searches."\n')


def test_context_lists_each_declared_subagent(runner, tmp_path):
    specialist_tree(tmp_path)
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["context"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("== subagents (3)")
    assert lines[start : start + 7] == [
        "== subagents (3)",
        "critic  agent=main.critic  hidden (tool = false: no tool)",
        "  Judges a text.",
        "researcher  agent=main.researcher  listed (its own tool)",
        "  Finds sources.",
        "writer  agent=main.writer  deferred (found with find_subagents, called with "
        "call_subagent)",
        "  Writes short texts.",
    ]
    assert lines[start - 1] == ""
    assert lines[start + 7] == ""
    # The tools they give are in the tool list: researcher, and the deferred ones' two tools.
    heading = next(i for i, line in enumerate(lines) if line.startswith("== tools (6)  ~"))
    named = (re.match(r"([a-z_]+): ", line) for line in lines[heading + 1 : start - 1])
    tools = [found.group(1) for found in named if found]
    assert tools == [
        "researcher",
        "find_subagents",
        "call_subagent",
        "task_wait",
        "task_cancel",
        "task_output",
    ]


def test_context_json_lists_the_subagents_and_their_tools(runner, tmp_path):
    specialist_tree(tmp_path)
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["context", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["agent"] == "main"
    assert document["subagents"] == [
        {
            "tool": "critic",
            "agent": "main.critic",
            "visibility": "hidden",
            "description": "Judges a text.",
        },
        {
            "tool": "researcher",
            "agent": "main.researcher",
            "visibility": "listed",
            "description": "Finds\nsources.",  # as written; the text output folds it
        },
        {
            "tool": "writer",
            "agent": "main.writer",
            "visibility": "deferred",
            "description": "Writes short texts.",
        },
    ]
    # A listed subagent is a tool; a deferred one is behind find_subagents and call_subagent;
    # a hidden one has no tool.
    assert sorted(tool["name"] for tool in document["tools"]) == [
        "call_subagent",
        "find_subagents",
        "researcher",
        "task_cancel",
        "task_output",
        "task_wait",
    ]
    researcher = next(t for t in document["tools"] if t["name"] == "researcher")
    assert researcher["description"].startswith("Finds\nsources. It cannot see your conversation")


def test_context_of_an_agent_without_subagents_has_no_subagents_section(runner, tmp_path):
    agent_folder(tmp_path, "main", toml='model = "scripted:s.toml"\n')
    write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["context"])
    assert result.exit_code == 0, result.output
    assert "== subagents" not in result.stdout
    assert json.loads(runner.invoke(cli, ["context", "--json"]).stdout)["subagents"] == []


def test_context_of_a_stored_session_shows_the_sessions_own_agent(runner, tmp_path):
    """A session of main.researcher is shown as that agent, with its own subagents, though
    the default agent (main) has others."""
    specialist_tree(tmp_path)
    write_profile(tmp_path, PROFILE + 'store = "sqlite:sessions.db"\n')

    async def create() -> str:
        store = SQLiteStore(tmp_path / "sessions.db")
        try:
            header = await store.create(new_header(agent="main.researcher"))
        finally:
            await store.aclose()
        return header.id

    session = anyio.run(create)
    result = runner.invoke(cli, ["context", "--session", session, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["agent"] == "main.researcher"
    assert document["model"] == "(none)"  # its own model: none, not main's
    assert document["subagents"] == [
        {
            "tool": "searcher",
            "agent": "main.researcher.searcher",
            "visibility": "listed",
            "description": "Searches.",
        }
    ]
    assert [tool["name"] for tool in document["tools"]] == [
        "searcher",
        "task_wait",
        "task_cancel",
        "task_output",
    ]


# tether plugins: an agent's own local plugins


def test_plugins_lists_agents_own_local_plugins_marked_with_their_agent(runner, tmp_path):
    tools_file(tmp_path / "plugins", "notes")
    one = tools_file(agent_folder(tmp_path, "one") / "tools", "search")
    two = tools_file(agent_folder(tmp_path, "two") / "tools", "search")
    shared = tmp_path / "shared"
    used = tools_file(shared, "fetch")
    unused = tools_file(shared, "spare")
    write_profile(
        tmp_path,
        """
        [tether]
        agents = ["agents"]
        plugins = ["notes"]
        plugin_dirs = ["plugins"]

        [agent.a]
        plugins = ["fetch"]
        plugin_dirs = ["shared"]

        [agent.b]
        plugin_dirs = ["shared"]
        """,
    )
    result = runner.invoke(cli, ["plugins"])
    assert result.exit_code == 0, result.output
    # Listed, not imported (docs/trust.md): their hooks are unknown until tether check.
    assert result.stdout.splitlines() == [
        "NAME    DISTRIBUTION         VERSION  LOADED                    HOOKS",
        "notes   local                -        not imported (global)     -",
        "fetch   local (agents a, b)  -        not imported (agent:a)    -",
        "search  local (agent one)    -        not imported (agent:one)  -",
        "search  local (agent two)    -        not imported (agent:two)  -",
        "spare   local (agents a, b)  -        no                        -",
    ]
    document = json.loads(runner.invoke(cli, ["plugins", "--json"]).stdout)
    found = {
        (row["name"], row["value"]): (row["agents"], row["scopes"], row["hooks"])
        for row in document["plugins"]
    }
    assert found == {
        ("notes", str((tmp_path / "plugins" / "notes.py").resolve())): (
            [],
            ["global"],
            None,
        ),
        ("fetch", str(used.resolve())): (["a", "b"], ["agent:a"], None),
        ("search", str(one.resolve())): (["one"], ["agent:one"], None),
        ("search", str(two.resolve())): (["two"], ["agent:two"], None),
        ("spare", str(unused.resolve())): (["a", "b"], [], None),
    }
