"""Skill roots a profile file or an agent folder names stay inside the folder that declares
them (docs/trust.md): a cloned repository's agent.toml cannot make tether read skills from the
rest of the disk."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether_skills_fs
from tether import ProfileError
from tether.errors import ErrorCode
from tether.testing import make_kernel


def repo_with(tmp_path: Path, profile: str, agent_toml: str | None = None) -> Path:
    repo = tmp_path / "repo"
    (repo / "agents" / "main").mkdir(parents=True)
    (repo / "tether.toml").write_text(profile, encoding="utf-8")
    if agent_toml is not None:
        (repo / "agents" / "main" / "agent.toml").write_text(agent_toml, encoding="utf-8")
    (tmp_path / "outside-skills").mkdir()
    return repo


def test_a_root_in_agent_toml_outside_the_agent_folder_is_refused(tmp_path):
    repo = repo_with(
        tmp_path,
        '[tether]\nagents = ["agents"]\n',
        'plugins = ["skills-fs"]\n[plugin.skills-fs]\nroots = ["../../../outside-skills"]\n',
    )
    with pytest.raises(ProfileError) as caught:
        make_kernel(repo / "tether.toml", {"skills-fs": tether_skills_fs})
    error = caught.value
    assert error.code is ErrorCode.PATH_OUTSIDE_FOLDER
    assert error.file == repo / "agents" / "main" / "agent.toml"
    assert error.key == "[agent.main.plugin.skills-fs] roots"
    assert str(tmp_path / "outside-skills") in str(error)


def test_an_agent_skills_folder_linked_outside_is_refused(tmp_path):
    repo = repo_with(tmp_path, '[tether]\nagents = ["agents"]\n')
    (repo / "agents" / "main" / "skills").symlink_to(tmp_path / "outside-skills")
    with pytest.raises(ProfileError) as caught:
        make_kernel(repo / "tether.toml", {"skills-fs": tether_skills_fs})
    assert caught.value.code is ErrorCode.PATH_OUTSIDE_FOLDER


def test_the_profile_you_run_may_allow_a_root_outside(tmp_path):
    repo = repo_with(
        tmp_path,
        '[tether]\nplugins = ["skills-fs"]\nallow_outside = ["../outside-skills"]\n'
        '[plugin.skills-fs]\nroots = ["../outside-skills"]\n',
    )
    kernel = make_kernel(repo / "tether.toml", {"skills-fs": tether_skills_fs})
    settings = next(p.settings for p in kernel.plugins if p.name == "skills-fs")
    assert settings.roots == (tmp_path / "outside-skills",)


def test_settings_made_in_code_are_not_checked(tmp_path):
    from tether_skills_fs import Settings

    assert Settings(roots=(tmp_path / "anywhere",)).roots == (tmp_path / "anywhere",)
