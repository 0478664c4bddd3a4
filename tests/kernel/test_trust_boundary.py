"""The trust boundary: a path a profile file or an agent folder names stays inside the folder
that declares it (links followed), unless the profile the user runs allows it (docs/trust.md)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tether import ProfileError, load_profile
from tether.errors import ErrorCode
from tether.loading import profile_from_dict
from tether.testing import make_kernel

PROFILE = '[tether]\nagents = ["agents"]\n'


def project(tmp_path: Path, profile: str = PROFILE) -> Path:
    """A cloned repository at ``tmp_path/repo`` with its tether.toml; a secret beside it."""
    repo = tmp_path / "repo"
    (repo / "agents" / "main").mkdir(parents=True)
    (repo / "tether.toml").write_text(profile, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("the user's secret", encoding="utf-8")
    return repo


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def refused(path: Path) -> ProfileError:
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert caught.value.code is ErrorCode.PATH_OUTSIDE_FOLDER
    return caught.value


def test_agent_toml_instructions_outside_the_agent_folder_are_refused(tmp_path):
    repo = project(tmp_path)
    main = repo / "agents" / "main"
    write(main / "agent.toml", 'instructions = "../../../secret.txt"\n')
    error = refused(repo / "tether.toml")
    line = str(error)
    assert error.file == main / "agent.toml"
    assert "instructions names" in line
    assert str(tmp_path / "secret.txt") in line
    assert str(main) in line
    assert "allow_outside" in line
    assert "docs/trust.md" in line


def test_outside_instructions_never_reach_the_system_prompt(tmp_path):
    repo = project(tmp_path)
    write(repo / "agents" / "main" / "agent.toml", f'instructions = "{tmp_path}/secret.txt"\n')
    # Loading is refused: no runtime is ever composed that would read the file.
    with pytest.raises(ProfileError):
        make_kernel(repo / "tether.toml")


def test_an_instructions_link_pointing_outside_is_outside(tmp_path):
    repo = project(tmp_path)
    (repo / "agents" / "main" / "instructions.md").symlink_to(tmp_path / "secret.txt")
    error = refused(repo / "tether.toml")
    assert "instructions.md" in str(error)
    assert "resolved" in str(error)


def test_a_link_inside_the_folder_to_a_file_inside_it_is_fine(tmp_path):
    repo = project(tmp_path)
    main = repo / "agents" / "main"
    write(main / "prompts" / "main.md", "Be brief.")
    (main / "instructions.md").symlink_to(main / "prompts" / "main.md")
    profile = load_profile(repo / "tether.toml")
    assert profile.agent["main"].instructions == main / "instructions.md"


def test_a_tool_file_linked_from_outside_is_refused(tmp_path):
    repo = project(tmp_path)
    evil = write(tmp_path / "elsewhere" / "evil.py", "raise SystemExit('imported')\n")
    (repo / "agents" / "main" / "tools").mkdir()
    (repo / "agents" / "main" / "tools" / "evil.py").symlink_to(evil)
    error = refused(repo / "tether.toml")
    assert "evil.py" in str(error)


def test_a_tools_folder_linked_outside_is_refused(tmp_path):
    repo = project(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (repo / "agents" / "main" / "tools").symlink_to(tmp_path / "elsewhere")
    assert "tools" in str(refused(repo / "tether.toml"))


def test_an_agent_folder_linked_outside_the_agents_folder_is_refused(tmp_path):
    repo = project(tmp_path)
    write(tmp_path / "other-agent" / "instructions.md", "Hi")
    (repo / "agents" / "other").symlink_to(tmp_path / "other-agent")
    assert "agent folder other" in str(refused(repo / "tether.toml"))


def test_a_scripted_model_outside_the_agent_folder_is_refused(tmp_path):
    repo = project(tmp_path)
    write(repo / "agents" / "main" / "agent.toml", 'model = "scripted:../../../secret.txt"\n')
    error = refused(repo / "tether.toml")
    assert "model names" in str(error)


def test_a_profile_plugin_dir_outside_its_folder_is_refused(tmp_path):
    repo = project(tmp_path, '[tether]\nplugin_dirs = ["../plugins"]\n')
    (tmp_path / "plugins").mkdir()
    error = refused(repo / "tether.toml")
    assert error.key == "[tether] plugin_dirs"


def test_extends_outside_the_profile_folder_is_refused(tmp_path):
    repo = project(tmp_path, 'extends = "../base.toml"\n')
    write(tmp_path / "base.toml", "[tether]\n")
    error = refused(repo / "tether.toml")
    assert error.key == "extends"


def test_the_profile_you_run_may_allow_a_path_outside(tmp_path):
    repo = project(tmp_path, 'extends = "../base.toml"\n[tether]\nallow_outside = [".."]\n')
    write(tmp_path / "base.toml", '[agent.main]\ninstructions = "secret.txt"\n')
    write(repo / "agents" / "main" / "agent.toml", 'description = "x"\n')
    profile = load_profile(repo / "tether.toml")
    assert profile.agent["main"].instructions == tmp_path / "secret.txt"


def test_allow_outside_also_covers_agent_folders_of_the_profile_you_run(tmp_path):
    repo = project(
        tmp_path, f'[tether]\nagents = ["agents"]\nallow_outside = ["{tmp_path}/secret.txt"]\n'
    )
    write(repo / "agents" / "main" / "agent.toml", 'instructions = "../../../secret.txt"\n')
    profile = load_profile(repo / "tether.toml")
    assert profile.agent["main"].instructions == tmp_path / "secret.txt"


def test_allow_outside_in_a_file_the_profile_extends_is_refused(tmp_path):
    repo = project(tmp_path, 'extends = "base.toml"\n')
    write(repo / "base.toml", '[tether]\nallow_outside = ["/"]\n')
    error = refused(repo / "tether.toml")
    assert error.file == repo / "base.toml"
    assert "only the profile you run" in str(error)


def test_a_base_file_reaches_only_its_own_folder(tmp_path):
    # The base is inside the profile's folder; what it names is checked against its folder.
    repo = project(tmp_path, 'extends = "shared/base.toml"\n')
    write(repo / "shared" / "base.toml", '[agent.main]\ninstructions = "../prompt.md"\n')
    write(repo / "prompt.md", "Hi")
    error = refused(repo / "tether.toml")
    assert error.file == repo / "shared" / "base.toml"


def test_a_profile_built_in_code_is_the_hosts_word(tmp_path):
    secret = write(tmp_path / "elsewhere" / "prompt.md", "Hi")
    profile = profile_from_dict({"agent": {"main": {"instructions": str(secret)}}})
    assert profile.agent["main"].instructions == secret
