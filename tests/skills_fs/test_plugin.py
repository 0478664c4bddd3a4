"""skills-fs as a tether plugin: settings from the profile, providers per scope layer."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether_skills_fs
from tether.errors import ErrorCode, PluginError
from tether.testing import make_runtime, write_profile

from .conftest import write_skill

pytestmark = pytest.mark.anyio


async def test_hook_tether_skill_providers_registers_skills_fs_in_its_scope(
    tmp_path: Path,
) -> None:
    write_skill(tmp_path / "global-skills", "shared", description='"the global one"')
    write_skill(tmp_path / "global-skills", "only-global")
    write_skill(tmp_path / "main-skills", "shared", description='"the agent one"')
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["skills-fs"]

        [plugin.skills-fs]
        roots = ["global-skills"]
        project = false
        user = false

        [agent.main]
        plugins = ["skills-fs"]

        [agent.main.plugin.skills-fs]
        roots = ["main-skills"]
        project = false
        user = false
        """,
    )
    runtime = make_runtime(profile, {"skills-fs": tether_skills_fs})

    catalog = await runtime.skills.list(scope=runtime.kernel.agent_scope("main"), cwd=tmp_path)
    assert {s.name: s.description for s in catalog.summaries} == {
        "only-global": "Use for only-global work",
        "shared": "the agent one",
    }
    global_catalog = await runtime.skills.list(cwd=tmp_path)
    assert global_catalog.candidates["shared"].description == "the global one"
    definition = await runtime.skills.get(
        "shared", scope=runtime.kernel.agent_scope("main"), cwd=tmp_path
    )
    assert definition is not None
    assert definition.path == str(tmp_path / "main-skills" / "shared" / "SKILL.md")


def test_a_misspelled_setting_names_the_known_ones(tmp_path: Path) -> None:
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["skills-fs"]

        [plugin.skills-fs]
        root = ["skills"]
        """,
    )
    with pytest.raises(PluginError) as info:
        make_runtime(profile, {"skills-fs": tether_skills_fs})
    assert info.value.code is ErrorCode.PLUGIN_SETTINGS_INVALID
    assert "roots, project, user, folders, max_skills_per_root" in str(info.value)


def test_a_malformed_package_root_in_the_profile_says_how_to_write_one(tmp_path: Path) -> None:
    profile = write_profile(
        tmp_path,
        """
        [tether]
        plugins = ["skills-fs"]

        [plugin.skills-fs]
        roots = ["skills", "pkg:my-library/skills"]
        """,
    )
    with pytest.raises(PluginError) as info:
        make_runtime(profile, {"skills-fs": tether_skills_fs})
    assert "write pkg:PACKAGE/FOLDER" in str(info.value)
    assert "roots" in str(info.value)
