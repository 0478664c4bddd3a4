"""The profile: TOML, validation, extends, relative paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import ProfileError, load_profile
from tether.errors import ErrorCode
from tether.loading import find_profile


def test_profile_is_found_as_tether_toml_in_the_current_directory(tmp_path, tether_profile):
    path = tether_profile("[tether]\nplugins = []\n")
    assert find_profile(cwd=tmp_path) == path.resolve()


def test_missing_profile_says_where_it_looked_and_how_to_fix(tmp_path):
    with pytest.raises(ProfileError) as info:
        find_profile(cwd=tmp_path)
    assert info.value.code is ErrorCode.PROFILE_NOT_FOUND
    assert str(info.value) == (
        f"no tether.toml in {tmp_path}; create tether.toml there or pass --profile PATH "
        "[PROFILE_NOT_FOUND]"
    )


def test_explicit_profile_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ProfileError, match=r"does not exist.*check the --profile path"):
        find_profile(tmp_path / "nope.toml")


def test_invalid_toml_names_file_line_and_column(tether_profile):
    path = tether_profile('[tether]\nplugins = ["a"]\nstore = \n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.code is ErrorCode.PROFILE_INVALID_TOML
    assert str(info.value) == (
        f"profile is not valid TOML: Invalid value ({path}, line 3, column 9); "
        "fix the TOML syntax there [PROFILE_INVALID_TOML]"
    )


def test_unclosed_toml_at_end_of_file_names_the_last_line(tether_profile):
    path = tether_profile('[tether]\nplugins = ["a"\n')
    with pytest.raises(ProfileError, match=r"end of file, after line 2"):
        load_profile(path)


def test_unknown_top_level_key_is_rejected_with_its_path(tether_profile):
    path = tether_profile('[tether]\nplugin = ["a"]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.code is ErrorCode.PROFILE_INVALID
    assert info.value.key == "[tether] plugin"
    assert str(info.value) == (
        f"profile key is invalid: Extra inputs are not permitted ({path}, [tether] plugin); "
        "remove or rename the key; known keys here: plugins, store, plugin_dirs, agents, "
        "max_depth, allow_outside, budget, sessions, workspace, guardrails (see docs/profiles.md) "
        "[PROFILE_INVALID]"
    )


def test_wrong_type_in_agent_table_names_the_key_path(tether_profile):
    path = tether_profile('[agent.main]\nplugins = "skills-fs"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.key == "[agent.main] plugins"
    assert "valid tuple" in str(info.value)


@pytest.mark.parametrize("name", ["../evil", "a/b", "", "-x", "x" * 65, "spaced name"])
def test_hostile_plugin_names_are_rejected(tether_profile, name):
    path = tether_profile(f"[tether]\nplugins = [{name!r}]\n".replace("'", '"'))
    with pytest.raises(ProfileError, match=r"is not a valid name"):
        load_profile(path)


def test_hostile_agent_names_are_rejected(tether_profile):
    path = tether_profile('[agent."../up"]\nmodel = "x:y"\n')
    with pytest.raises(ProfileError, match=r"is not a valid name") as info:
        load_profile(path)
    assert info.value.key == '[agent."../up"]'


def test_global_and_agent_layers_are_read(tether_profile):
    path = tether_profile(
        """
        [tether]
        plugins = ["a", "b"]
        [plugin.a]
        x = 1
        [agent.main]
        plugins = ["c"]
        model = "scripted:s.toml"
        [agent.main.plugin.c]
        y = "z"
        """
    )
    profile = load_profile(path)
    assert profile.tether.plugins == ("a", "b")
    assert profile.settings_table(None, "a") == {"x": 1}
    assert profile.agent["main"].plugins == ("c",)
    assert profile.settings_table("main", "c") == {"y": "z"}
    assert profile.agent["main"].model == "scripted:s.toml"


def test_extends_merges_key_by_key_and_the_nearer_file_wins(tmp_path, tether_profile):
    tether_profile(
        """
        [tether]
        plugins = ["a"]
        store = "sqlite:base.db"
        [plugin.a]
        x = 1
        y = 2
        [agent.main]
        model = "base:model"
        """,
        name="base/base.toml",
    )
    path = tether_profile(
        """
        extends = "base/base.toml"
        [tether]
        plugins = ["a", "b"]
        [plugin.a]
        y = 20
        """
    )
    profile = load_profile(path)
    assert profile.tether.plugins == ("a", "b")
    assert profile.tether.store == "sqlite:base.db"
    assert profile.settings_table(None, "a") == {"x": 1, "y": 20}
    assert profile.agent["main"].model == "base:model"
    base = (tmp_path / "base" / "base.toml").resolve()
    assert profile.files == (path.resolve(), base)
    assert profile.file_of("plugin", "a", "x") == base
    assert profile.file_of("plugin", "a", "y") == path.resolve()


def test_extends_cycle_is_reported(tether_profile):
    tether_profile('extends = "b.toml"\n', name="a.toml")
    tether_profile('extends = "a.toml"\n', name="b.toml")
    with pytest.raises(ProfileError) as info:
        load_profile(Path(info_path := tether_profile('extends = "a.toml"\n')))
    assert info.value.code is ErrorCode.PROFILE_EXTENDS_CYCLE
    assert "a.toml -> " in str(info.value)
    assert info_path.exists()


def test_extends_missing_file_names_the_path_it_tried(tether_profile, tmp_path):
    path = tether_profile('extends = "nowhere.toml"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert info.value.code is ErrorCode.PROFILE_NOT_FOUND
    assert str(tmp_path / "nowhere.toml") in str(info.value)
    assert info.value.key == "extends"


def test_relative_instructions_resolve_against_the_file_that_wrote_them(tmp_path, tether_profile):
    tether_profile('[agent.main]\ninstructions = "main.md"\n', name="shared/base.toml")
    path = tether_profile('extends = "shared/base.toml"\n[agent.main]\nmodel = "a:b"\n')
    profile = load_profile(path)
    assert profile.agent["main"].instructions == (tmp_path / "shared" / "main.md").resolve()


def test_relative_instructions_in_the_profile_itself(tmp_path, tether_profile):
    path = tether_profile('[agent.main]\ninstructions = "agents/main.md"\n')
    profile = load_profile(path)
    assert profile.agent["main"].instructions == (tmp_path / "agents" / "main.md").resolve()


def test_a_name_with_control_characters_cannot_split_or_repaint_the_error_line(tether_profile):
    path = tether_profile('[agent."a\\rb\\u001b[2Kc\\u2028d"]\nmodel = "x"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    text = str(info.value)
    assert text.splitlines() == [text]  # one line, whatever splitlines counts as a break
    assert "\x1b" not in text
    assert r'[agent."a\rb\x1b[2Kc\u2028d"]' in text
    assert text.endswith("[PROFILE_INVALID]")
