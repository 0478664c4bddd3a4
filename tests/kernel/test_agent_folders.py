"""Agent folders: ``[tether] agents`` folders compiled into ``[agent.NAME]`` tables."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether import PluginError, ProfileError, load_kernel, load_profile
from tether.cli import cli
from tether.errors import ErrorCode
from tether.testing import make_kernel, write_profile

PROFILE = '[tether]\nagents = ["agents"]\n'

#: A local plugin with one hook, so registration has something to check.
OFFER_PLUGIN = """\
import tether

KIND = {kind!r}

@tether.hookimpl
def tether_offers():
    return [tether.Offer(kind=KIND)]
"""


def agent_folder(root: Path, *path: str, toml: str | None = None, md: str | None = None) -> Path:
    """Make ``root/agents/<path[0]>/subagents/<path[1]>/...`` with an optional agent.toml
    (dedented) and instructions.md."""
    folder = root / "agents" / path[0]
    for child in path[1:]:
        folder = folder / "subagents" / child
    folder.mkdir(parents=True, exist_ok=True)
    if toml is not None:
        (folder / "agent.toml").write_text(textwrap.dedent(toml).lstrip(), encoding="utf-8")
    if md is not None:
        (folder / "instructions.md").write_text(md, encoding="utf-8")
    return folder


def tool_file(folder: Path, name: str, kind: str = "local thing") -> Path:
    (folder / "tools").mkdir(exist_ok=True)
    path = folder / "tools" / f"{name}.py"
    path.write_text(OFFER_PLUGIN.format(kind=kind), encoding="utf-8")
    return path


# Root agents


def test_a_root_agent_folder_is_the_same_agent_as_its_table(tmp_path):
    toml = """
        description = "Answers questions"
        model = "scripted:s.toml"
        limits = { max_steps = 5 }
        approval = "allow"
        tool = "deferred"
    """
    agent_folder(tmp_path, "main", toml=toml, md="Be brief.\n")
    from_folder = load_profile(write_profile(tmp_path, PROFILE))
    table = textwrap.dedent(toml) + 'instructions = "agents/main/instructions.md"\n'
    from_table = load_profile(write_profile(tmp_path, "[agent.main]\n" + table, "table.toml"))
    assert from_folder.agent["main"] == from_table.agent["main"]
    assert from_folder.agent_folders == {"main": (tmp_path / "agents" / "main").resolve()}


def test_files_and_underscore_or_dot_folders_next_to_agents_are_not_agents(tmp_path):
    agent_folder(tmp_path, "main")
    (tmp_path / "agents" / "_drafts").mkdir()
    (tmp_path / "agents" / ".git").mkdir()
    (tmp_path / "agents" / "README.md").write_text("agents\n")
    profile = load_profile(write_profile(tmp_path, PROFILE))
    assert list(profile.agent) == ["main"]


def test_instructions_py_is_the_agents_instructions(tmp_path):
    folder = agent_folder(tmp_path, "main")
    (folder / "instructions.py").write_text("def instructions():\n    return 'hi'\n")
    profile = load_profile(write_profile(tmp_path, PROFILE))
    assert profile.agent["main"].instructions == folder.resolve() / "instructions.py"


def test_both_instructions_files_are_an_error(tmp_path):
    folder = agent_folder(tmp_path, "main", md="Be brief.\n")
    (folder / "instructions.py").write_text("")
    with pytest.raises(ProfileError, match=r"both instructions\.md and instructions\.py.*keep one"):
        load_profile(write_profile(tmp_path, PROFILE))


def test_an_instructions_key_and_an_instructions_file_are_an_error(tmp_path):
    agent_folder(tmp_path, "main", toml='instructions = "other.md"\n', md="Be brief.\n")
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, PROFILE))
    assert info.value.key == "instructions"
    assert "remove the instructions key or the file instructions.md" in str(info.value)


def test_relative_paths_in_agent_toml_resolve_against_the_agent_folder(tmp_path):
    folder = agent_folder(
        tmp_path, "main", toml='instructions = "prompt.md"\nmodel = "scripted:s.toml"\n'
    )
    profile = load_profile(write_profile(tmp_path, PROFILE))
    assert profile.agent["main"].instructions == folder.resolve() / "prompt.md"
    # A scripted: model path is read from the folder of the file that wrote the key.
    assert profile.file_of("agent", "main", "model") == folder.resolve() / "agent.toml"


def test_an_unknown_agent_toml_key_names_the_file_and_the_key(tmp_path):
    folder = agent_folder(tmp_path, "main", toml='modle = "x:y"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, PROFILE))
    assert info.value.code is ErrorCode.PROFILE_INVALID
    assert info.value.file == folder.resolve() / "agent.toml"
    assert info.value.key == "modle"
    assert "keys allowed in agent.toml: description, model, plugins, plugin" in str(info.value)


def test_subagents_in_agent_toml_says_subagents_are_folders(tmp_path):
    agent_folder(tmp_path, "main", toml='subagents = ["helper"]\n')
    with pytest.raises(ProfileError, match=r"subagents are the folders under .*/subagents/"):
        load_profile(write_profile(tmp_path, PROFILE))


def test_a_non_utf8_agent_toml_names_line_and_column(tmp_path):
    folder = agent_folder(tmp_path, "main")
    (folder / "agent.toml").write_bytes(b'description = "caf\xe9"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, PROFILE))
    assert info.value.code is ErrorCode.PROFILE_INVALID_TOML
    assert "agent file is not UTF-8 text" in str(info.value)
    assert info.value.key == "line 1, column 19"


def test_a_fifo_agent_toml_is_refused_without_being_opened(tmp_path):
    folder = agent_folder(tmp_path, "main")
    os.mkfifo(folder / "agent.toml")  # opening it to read would wait for a writer forever
    with pytest.raises(ProfileError, match=r"agent file is a FIFO \(named pipe\)"):
        load_profile(write_profile(tmp_path, PROFILE))


def test_an_agent_toml_value_of_the_wrong_type_names_the_agent_toml(tmp_path):
    folder = agent_folder(tmp_path, "main", toml='approval = "sometimes"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, PROFILE))
    assert info.value.file == folder.resolve() / "agent.toml"
    assert info.value.key == "[agent.main] approval"


# The agents folders


def test_an_agents_entry_that_is_not_a_folder_is_an_error(tmp_path):
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, PROFILE))
    assert info.value.key == "[tether] agents"
    assert f"agents entry '{tmp_path / 'agents'}' is not a folder" in str(info.value)


def test_an_agent_folder_whose_name_breaks_the_grammar_is_an_error(tmp_path):
    agent_folder(tmp_path, "my agent")
    with pytest.raises(ProfileError, match=r"agent folder 'my agent' is not a valid agent name"):
        load_profile(write_profile(tmp_path, PROFILE))


def test_one_agent_name_from_two_agents_folders_names_both(tmp_path):
    agent_folder(tmp_path, "main")
    (tmp_path / "more" / "main").mkdir(parents=True)
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, '[tether]\nagents = ["agents", "more"]\n'))
    assert str(tmp_path / "agents" / "main") in info.value.message
    assert str(tmp_path / "more" / "main") in info.value.message


def test_agents_folders_resolve_against_the_file_that_wrote_the_key(tmp_path):
    agent_folder(tmp_path / "team", "main")
    write_profile(tmp_path / "team", PROFILE, "base.toml")
    profile = load_profile(write_profile(tmp_path, 'extends = "team/base.toml"\n'))
    assert profile.tether.agents == ((tmp_path / "team" / "agents").resolve(),)
    assert list(profile.agent) == ["main"]


def test_a_profile_built_in_code_reads_agent_folders_too(tmp_path):
    from tether.loading import profile_from_dict

    agent_folder(tmp_path, "main", toml='description = "d"\n')
    profile = profile_from_dict({"tether": {"agents": ["agents"]}}, path=tmp_path / "tether.toml")
    assert profile.agent["main"].description == "d"


# A folder and a table of the same name


def test_a_profile_table_merges_over_the_folder_of_its_name(tmp_path):
    folder = agent_folder(tmp_path, "main", toml='model = "scripted:a.toml"\n', md="Be brief.\n")
    profile = load_profile(
        write_profile(tmp_path, PROFILE + '[agent.main]\nmodel = "scripted:b.toml"\n')
    )
    assert profile.agent["main"].model == "scripted:b.toml"
    assert profile.agent["main"].instructions == folder.resolve() / "instructions.md"
    assert profile.file_of("agent", "main", "model") == (tmp_path / "tether.toml").resolve()


# tools/


def test_tools_load_into_the_agents_layer_only(tmp_path):
    folder = agent_folder(tmp_path, "main")
    path = tool_file(folder, "search")
    (folder / "tools" / "_helper.py").write_text("raise RuntimeError('not a plugin')\n")
    kernel = make_kernel(write_profile(tmp_path, PROFILE))
    plugin = kernel.agent_scope("main").find_plugin("search")
    assert plugin is not None
    assert plugin.entry.source == f"local plugin {path.resolve()}"
    assert kernel.global_scope.find_plugin("search") is None
    assert kernel.profile.agent["main"].plugins == ("search",)


def test_a_tools_plugin_listed_in_agent_toml_is_loaded_once_from_tools(tmp_path):
    folder = agent_folder(tmp_path, "main", toml='plugins = ["search"]\n')
    tool_file(folder, "search")
    tool_file(folder, "fetch")
    kernel = make_kernel(write_profile(tmp_path, PROFILE))
    assert kernel.profile.agent["main"].plugins == ("search", "fetch")
    assert [p.name for p in kernel.agent_scope("main").plugins] == ["search", "fetch"]


def test_two_agents_with_the_same_tools_file_load_distinct_modules(tmp_path):
    tool_file(agent_folder(tmp_path, "one"), "search", kind="one's")
    tool_file(agent_folder(tmp_path, "two"), "search", kind="two's")
    kernel = make_kernel(write_profile(tmp_path, PROFILE))
    one = kernel.agent_scope("one").find_plugin("search")
    two = kernel.agent_scope("two").find_plugin("search")
    assert one is not None
    assert two is not None
    assert one.obj is not two.obj
    assert [one.offers[0].kind, two.offers[0].kind] == ["one's", "two's"]


def test_a_tools_file_with_a_syntax_error_names_the_file(tmp_path):
    folder = agent_folder(tmp_path, "main")
    (folder / "tools").mkdir()
    (folder / "tools" / "broken.py").write_text("def (:\n")
    with pytest.raises(PluginError) as info:
        make_kernel(write_profile(tmp_path, PROFILE))
    assert info.value.code is ErrorCode.PLUGIN_IMPORT_FAILED
    assert f"local plugin {folder.resolve() / 'tools' / 'broken.py'}" in str(info.value)


def test_an_agents_own_plugin_wins_over_the_global_plugin_dirs(tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "search.py").write_text(OFFER_PLUGIN.format(kind="global"))
    tool_file(agent_folder(tmp_path, "main"), "search", kind="own")
    kernel = make_kernel(
        write_profile(
            tmp_path,
            '[tether]\nagents = ["agents"]\nplugins = ["search"]\nplugin_dirs = ["plugins"]\n',
        )
    )
    own = kernel.agent_scope("main").find_plugin("search")
    assert own is not None
    assert own.offers[0].kind == "own"
    assert kernel.global_scope.plugins[0].offers[0].kind == "global"


def test_a_plugin_in_two_of_an_agents_own_folders_is_a_conflict(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "search.py").write_text(OFFER_PLUGIN.format(kind=folder))
    path = write_profile(tmp_path, '[agent.main]\nplugins = ["search"]\nplugin_dirs = ["a", "b"]\n')
    with pytest.raises(PluginError) as info:
        make_kernel(path)
    assert info.value.code is ErrorCode.PLUGIN_NAME_CONFLICT
    assert info.value.key == "[agent.main] plugins"


def test_an_agents_plugin_dirs_entry_that_is_not_a_folder_is_an_error(tmp_path):
    path = write_profile(tmp_path, '[agent.main]\nplugin_dirs = ["nowhere"]\n')
    with pytest.raises(ProfileError) as info:
        make_kernel(path)
    assert info.value.key == "[agent.main] plugin_dirs"
    assert f"plugin_dirs entry '{tmp_path / 'nowhere'}' is not a folder" in str(info.value)


def test_an_agents_plugin_dirs_resolve_against_the_file_that_wrote_them(tmp_path):
    write_profile(tmp_path / "team", '[agent.main]\nplugin_dirs = ["tools"]\n', "base.toml")
    path = write_profile(
        tmp_path, 'extends = "team/base.toml"\n[tether]\nplugin_dirs = ["plugins"]\n'
    )
    profile = load_profile(path)
    assert profile.agent["main"].plugin_dirs == ((tmp_path / "team" / "tools").resolve(),)


# skills/


def test_a_skills_folder_mounts_skills_fs_reading_only_that_folder(tmp_path):
    folder = agent_folder(tmp_path, "main")
    (folder / "skills").mkdir()
    kernel = load_kernel(write_profile(tmp_path, PROFILE), entry_points=True)
    scope = kernel.agent_scope("main")
    assert [p.name for p in scope.plugins] == ["skills-fs", "skill-tool"]
    settings = scope.plugins[0].settings
    assert settings is not None
    dumped = settings.model_dump(mode="json")
    assert dumped["roots"] == [str(folder.resolve() / "skills")]
    assert (dumped["project"], dumped["user"]) == (False, False)
    assert kernel.global_scope.find_plugin("skills-fs") is None


def test_skills_fs_settings_in_agent_toml_win_and_keep_their_roots_first(tmp_path):
    folder = agent_folder(
        tmp_path, "main", toml='[plugin.skills-fs]\nroots = "shared"\nuser = true\n'
    )
    (folder / "skills").mkdir()
    table = load_profile(write_profile(tmp_path, PROFILE)).settings_table("main", "skills-fs")
    assert table == {
        "project": False,
        "user": True,
        "roots": ["shared", str(folder.resolve() / "skills")],
    }


# subagents/


def test_nested_subagents_are_agents_named_by_their_path(tmp_path):
    agent_folder(tmp_path, "main")
    agent_folder(tmp_path, "main", "researcher", toml='description = "Finds sources"\n')
    agent_folder(tmp_path, "main", "researcher", "searcher", toml='description = "Searches"\n')
    agent_folder(tmp_path, "main", "writer", toml='description = "Writes"\n')
    profile = load_profile(write_profile(tmp_path, PROFILE))
    agents = profile.agent
    assert sorted(agents) == ["main", "main.researcher", "main.researcher.searcher", "main.writer"]
    assert agents["main"].subagents == ("main.researcher", "main.writer")
    assert agents["main.researcher"].subagents == ("main.researcher.searcher",)
    assert agents["main.researcher.searcher"].tool_name == "searcher"
    assert agents["main"].tool_name is None
    searcher = tmp_path / "agents" / "main" / "subagents" / "researcher" / "subagents" / "searcher"
    assert profile.agent_folders["main.researcher.searcher"] == searcher.resolve()


def test_a_subagent_folder_without_a_description_is_an_error(tmp_path):
    agent_folder(tmp_path, "main")
    folder = agent_folder(tmp_path, "main", "researcher")
    with pytest.raises(ProfileError) as info:
        load_profile(write_profile(tmp_path, PROFILE))
    assert str(info.value) == (
        'subagent "main.researcher" has no description; its parent\'s model reads it to decide '
        f"when to delegate ({folder.resolve() / 'agent.toml'}, description); add description = "
        f'"..." to {folder.resolve() / "agent.toml"} [PROFILE_INVALID]'
    )


def test_a_subagent_folder_whose_name_is_not_a_tool_name_is_an_error(tmp_path):
    agent_folder(tmp_path, "main")
    (tmp_path / "agents" / "main" / "subagents" / "web.search").mkdir(parents=True)
    with pytest.raises(
        ProfileError, match=r"subagent folder 'web.search' is not a valid tool name"
    ):
        load_profile(write_profile(tmp_path, PROFILE))


def test_a_derived_agent_name_over_64_characters_loads(tmp_path):
    parts = ["main", "a" * 30, "b" * 30, "c" * 30]
    for depth in range(2, len(parts) + 1):
        agent_folder(tmp_path, *parts[:depth], toml='description = "d"\n')
    agent_folder(tmp_path, "main")
    profile = load_profile(write_profile(tmp_path, PROFILE))
    deepest = ".".join(parts)
    assert len(deepest) > 64
    assert profile.agent[deepest].tool_name == "c" * 30
    assert load_kernel(profile, entry_points=False).agent_scope(deepest).name == deepest


def test_a_subagent_folder_that_links_to_its_parent_is_an_error(tmp_path):
    folder = agent_folder(tmp_path, "main")
    (folder / "subagents").mkdir()
    (folder / "subagents" / "again").symlink_to(folder)
    with pytest.raises(ProfileError, match=r"loop back to a folder above them"):
        load_profile(write_profile(tmp_path, PROFILE))


# subagents written in tables


def test_subagents_naming_an_unknown_agent_is_an_error(tmp_path):
    path = write_profile(tmp_path, '[agent.main]\nsubagents = ["ghost"]\n[agent.helper]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.key == "[agent.main] subagents[0]"
    assert str(info.value).endswith(
        "declare [agent.ghost] or name one of: helper [PROFILE_INVALID]"
    )


def test_an_agent_listing_itself_as_a_subagent_is_an_error(tmp_path):
    path = write_profile(tmp_path, '[agent.main]\ndescription = "d"\nsubagents = ["main"]\n')
    with pytest.raises(ProfileError, match=r'agent "main" lists itself as a subagent'):
        load_profile(path)


def test_a_subagent_table_without_a_description_names_its_table(tmp_path):
    path = write_profile(tmp_path, '[agent.main]\nsubagents = ["helper"]\n[agent.helper]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.key == "[agent.helper] description"
    assert 'add description = "..." to [agent.helper]' in str(info.value)


def test_two_subagents_with_one_tool_name_are_an_error(tmp_path):
    path = write_profile(
        tmp_path,
        """
        [agent.main]
        subagents = ["a", "b"]
        [agent.a]
        description = "d"
        tool_name = "helper"
        [agent.b]
        description = "d"
        tool_name = "helper"
        """,
    )
    with pytest.raises(ProfileError, match=r'have one tool name, "helper"'):
        load_profile(path)


def test_a_subagent_whose_name_is_not_a_tool_name_needs_a_tool_name(tmp_path):
    path = write_profile(
        tmp_path,
        '[agent.main]\nsubagents = ["code.review"]\n[agent."code.review"]\ndescription = "d"\n',
    )
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.key == '[agent."code.review"] tool_name'


# tether check


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_check_prints_the_agent_folder_tree(runner, tmp_path):
    main = agent_folder(tmp_path, "main", toml='model = "scripted:s.toml"\n')
    (main / "s.toml").write_text("steps = []\n")  # check reads the script
    tool_file(main, "search")
    researcher = agent_folder(tmp_path, "main", "researcher", toml='description = "Finds"\n')
    agent_folder(tmp_path, "main", "writer", toml='description = "Writes"\ntool = "deferred"\n')
    agent_folder(tmp_path, "main", "critic", toml='description = "Judges"\ntool = false\n')
    path = write_profile(tmp_path, PROFILE)
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 0, result.output
    base = tmp_path.resolve() / "agents" / "main"
    assert result.stdout.splitlines() == [
        f"profile {path.resolve()}",
        "global",
        "  (no plugins)",
        f"global > agent:main  model=scripted:s.toml  folder={base}",
        f"  └─ search (local plugin {base / 'tools' / 'search.py'})  hooks: tether_offers",
        "     offers local thing: no optional capabilities",
        "  subagent main.critic  tool=critic (hidden: tool = false)",
        "  subagent main.researcher  tool=researcher",
        "  subagent main.writer  tool=writer (deferred)",
        f"global > agent:main.critic  folder={base / 'subagents' / 'critic'}",
        "  (no plugins)",
        f"global > agent:main.researcher  folder={researcher.resolve()}",
        "  (no plugins)",
        f"global > agent:main.writer  folder={base / 'subagents' / 'writer'}",
        "  (no plugins)",
        "ok: 1 plugin instance in 5 scopes, 0 requirements met",
    ]


def test_check_fails_on_a_subagent_that_is_not_an_agent(runner, tmp_path):
    write_profile(tmp_path, '[agent.main]\nsubagents = ["ghost"]\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith('ERROR: subagent "ghost" of agent "main" is not an agent')
