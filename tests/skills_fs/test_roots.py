"""Which roots are read for a working directory, and which skill wins a name."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from tether.skills import SkillRegistry
from tether_skills_fs import (
    CUSTOM_RANK,
    PACKAGE_RANK,
    PROJECT_RANK,
    USER_RANK,
    FileSystemSkillProvider,
    Settings,
)

from .conftest import listed, observe, project_root, user_root, write_skill

pytestmark = pytest.mark.anyio


async def winners(provider: FileSystemSkillProvider, cwd: Path) -> dict[str, str]:
    """Name → source of the winner, as a registry resolves it."""
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    catalog = await registry.list(cwd=cwd)
    return {summary.name: summary.source for summary in catalog.summaries}


async def test_project_skills_beat_custom_then_user_then_package_skills(
    tmp_path: Path, home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "acme_skills"
    (package / "skills").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    custom = tmp_path / "custom"
    for name in ("everywhere", "not-in-project", "user-and-package", "package-only"):
        write_skill(package / "skills", name, description=f'"package {name}"')
    for name in ("everywhere", "not-in-project", "user-and-package"):
        write_skill(user_root(home), name, description=f'"user {name}"')
    for name in ("everywhere", "not-in-project"):
        write_skill(custom, name, description=f'"custom {name}"')
    write_skill(project_root(project), "everywhere", description='"project everywhere"')
    provider = FileSystemSkillProvider(Settings(roots=(custom, "pkg:acme_skills/skills")))

    assert await winners(provider, project) == {
        "everywhere": "project-agents",
        "not-in-project": "custom",
        "user-and-package": "user-agents",
        "package-only": "package",
    }
    ranks = {c.source: c.rank for c in (await observe(provider, project)).candidates}
    assert ranks == {
        "project-agents": PROJECT_RANK,
        "custom": CUSTOM_RANK,
        "user-agents": USER_RANK,
        "package": PACKAGE_RANK,
    }


async def test_project_skills_beat_user_skills(home: Path, project: Path) -> None:
    write_skill(user_root(home), "review", description='"the user one"')
    write_skill(project_root(project), "review", description='"the project one"')
    provider = FileSystemSkillProvider()
    assert (await listed(provider, project))["review"].description == "the project one"
    assert await winners(provider, project) == {"review": "project-agents"}


async def test_the_project_root_is_the_nearest_ancestor_holding_git(project: Path) -> None:
    write_skill(project_root(project), "from-root")
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    write_skill(nested / ".agents" / "skills", "from-nested")
    names = set(await listed(FileSystemSkillProvider(), nested))
    assert names == {"from-root"}


async def test_without_git_the_working_directory_is_the_project(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    write_skill(project_root(folder), "here")
    assert set(await listed(FileSystemSkillProvider(), folder)) == {"here"}


async def test_a_git_file_marks_a_worktree_as_the_project(tmp_path: Path) -> None:
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: /elsewhere\n")
    write_skill(project_root(worktree), "in-worktree")
    assert set(await listed(FileSystemSkillProvider(), worktree / "sub")) == {"in-worktree"}


async def test_user_skills_follow_home(home: Path, tmp_path: Path) -> None:
    write_skill(user_root(home), "mine")
    candidate = (await listed(FileSystemSkillProvider(), tmp_path))["mine"]
    assert candidate.source == "user-agents"
    assert candidate.path == str(user_root(home) / "mine" / "SKILL.md")


async def test_project_and_user_roots_can_be_turned_off(home: Path, project: Path) -> None:
    write_skill(user_root(home), "user-skill")
    write_skill(project_root(project), "project-skill")
    settings = Settings(project=False, user=False)
    assert await listed(FileSystemSkillProvider(settings), project) == {}
    assert set(await listed(FileSystemSkillProvider(Settings(user=False)), project)) == {
        "project-skill"
    }


async def test_custom_roots_keep_their_order(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write_skill(first, "shared", description='"from first"')
    write_skill(second, "shared", description='"from second"')
    write_skill(second, "only-second")
    provider = FileSystemSkillProvider(Settings(roots=(first, second)))
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    catalog = await registry.list(cwd=tmp_path)
    assert [s.name for s in catalog.summaries] == ["only-second", "shared"]
    assert catalog.candidates["shared"].description == "from first"


async def test_a_folder_reached_twice_is_read_once_under_its_best_rank(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Working in the home folder (no .git): the project root is the user root.
    write_skill(user_root(home), "once")
    provider = FileSystemSkillProvider(Settings(roots=(user_root(home),)))
    with caplog.at_level(logging.WARNING):
        candidates = (await observe(provider, home)).candidates
    assert [(c.name, c.source) for c in candidates] == [("once", "project-agents")]
    assert not caplog.records


async def test_a_missing_root_is_simply_empty(tmp_path: Path) -> None:
    provider = FileSystemSkillProvider(Settings(roots=(tmp_path / "nowhere",)))
    observation = await observe(provider, tmp_path)
    assert observation.candidates == ()
    assert observation.complete


async def test_a_package_root_serves_the_skills_a_library_ships(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "my_library"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    skill = write_skill(package / "skills", "library-helper")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    provider = FileSystemSkillProvider(Settings(roots=("pkg:my_library/skills",)))
    candidate = (await listed(provider, tmp_path))["library-helper"]
    assert (candidate.source, candidate.rank, candidate.path) == ("package", 550.0, str(skill))
    definition = await provider.get(candidate, cwd=tmp_path)
    assert definition is not None
    assert definition.content.startswith("# library-helper")


async def test_a_package_that_is_not_installed_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FileSystemSkillProvider(Settings(roots=("pkg:no_such_library_xyz/skills",)))
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        observation = await observe(provider, tmp_path)
    assert observation.candidates == ()
    assert observation.complete
    assert "package no_such_library_xyz is not installed" in caplog.text


@pytest.mark.parametrize(
    "root", ["pkg:", "pkg:my-library/skills", "pkg:lib/../secrets", "pkg:lib//skills"]
)
def test_a_malformed_package_root_is_a_settings_error(root: str) -> None:
    with pytest.raises(ValidationError, match="is not a package root"):
        Settings(roots=(root,))


def test_relative_roots_resolve_against_the_profile_folder(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {"roots": ["skills", "pkg:my_library/skills", "/abs/skills"]},
        context={"tether_profile_dir": tmp_path},
    )
    assert settings.roots == (tmp_path / "skills", "pkg:my_library/skills", Path("/abs/skills"))


async def test_a_root_with_more_entries_than_the_bound_is_cut_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "many"
    for index in range(5):
        write_skill(root, f"skill-{index}")
    provider = FileSystemSkillProvider(Settings(roots=(root,), max_skills_per_root=3))
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        names = list(await listed(provider, tmp_path))
    assert names == ["skill-0", "skill-1", "skill-2"]
    assert "has 5 entries; only the first 3 by name were read" in caplog.text
    assert "max_skills_per_root" in caplog.text


def test_one_string_is_one_root(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {"roots": "skills"}, context={"tether_profile_dir": tmp_path}
    )
    assert settings.roots == (tmp_path / "skills",)
