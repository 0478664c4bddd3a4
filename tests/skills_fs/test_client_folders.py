"""The skill folders people already have: Claude Code's ``.claude/skills`` (project) and
``~/.claude/skills`` (user) are read by default beside ``.agents/skills``; other agents' folders
on request (``folders``); a project's folders stay inside the project (docs/trust.md)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from tether.skills import SkillRegistry
from tether_skills_fs import PROJECT_RANK, USER_RANK, FileSystemSkillProvider, Settings

from .conftest import observe, project_root, user_root, write_skill

pytestmark = pytest.mark.anyio

SUPERPOWERS = Path("/work/shared/corpora/superpowers/skills")


def claude_project(project: Path) -> Path:
    return project / ".claude" / "skills"


def claude_user(home: Path) -> Path:
    return home / ".claude" / "skills"


async def catalog_of(provider: FileSystemSkillProvider, cwd: Path) -> dict[str, str]:
    """Name → source of the winner, as a registry resolves it."""
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    catalog = await registry.list(cwd=cwd)
    return {summary.name: summary.source for summary in catalog.summaries}


async def test_claude_code_folders_are_read_by_default(home: Path, project: Path) -> None:
    write_skill(claude_project(project), "team-review")
    write_skill(claude_user(home), "my-notes")

    assert await catalog_of(FileSystemSkillProvider(), project) == {
        "team-review": "project-claude",
        "my-notes": "user-claude",
    }


async def test_the_agents_folder_wins_a_name_over_the_claude_folder_of_its_level(
    home: Path, project: Path
) -> None:
    for root in (claude_project(project), project_root(project)):
        write_skill(root, "both-project", description=f'"from {root.parent.name}"')
    for root in (claude_user(home), user_root(home)):
        write_skill(root, "both-user", description=f'"from {root.parent.name}"')
    write_skill(claude_user(home), "claude-user-vs-agents-project")
    write_skill(project_root(project), "claude-user-vs-agents-project")
    provider = FileSystemSkillProvider()

    assert await catalog_of(provider, project) == {
        "both-project": "project-agents",
        "both-user": "user-agents",
        "claude-user-vs-agents-project": "project-agents",
    }
    ranks = {c.source: c.rank for c in (await observe(provider, project)).candidates}
    assert ranks["project-agents"] == PROJECT_RANK < ranks["project-claude"] < 250
    assert ranks["user-agents"] == USER_RANK < ranks["user-claude"] < 550


async def test_the_folders_setting_orders_and_picks_the_folders(home: Path, project: Path) -> None:
    write_skill(claude_project(project), "shared", description='"claude"')
    write_skill(project_root(project), "shared", description='"agents"')
    write_skill(project / ".github" / "skills", "copilot-only")
    write_skill(home / ".gemini" / "skills", "gemini-only")

    flipped = FileSystemSkillProvider(Settings(folders=("claude", "agents")))
    assert await catalog_of(flipped, project) == {"shared": "project-claude"}

    more = FileSystemSkillProvider(Settings(folders=("agents", "claude", "copilot", "gemini")))
    assert await catalog_of(more, project) == {
        "shared": "project-agents",
        "copilot-only": "project-copilot",
        "gemini-only": "user-gemini",
    }

    none = FileSystemSkillProvider(Settings(folders=()))
    assert await catalog_of(none, project) == {}


def test_an_unknown_folder_family_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(folders=("claude", "windsurf"))
    assert "windsurf" in str(caught.value)
    assert "copilot" in str(caught.value)


async def test_the_project_and_user_switches_cover_every_folder(home: Path, project: Path) -> None:
    write_skill(claude_project(project), "in-project")
    write_skill(claude_user(home), "in-home")

    assert await catalog_of(FileSystemSkillProvider(Settings(user=False)), project) == {
        "in-project": "project-claude"
    }
    assert await catalog_of(FileSystemSkillProvider(Settings(project=False)), project) == {
        "in-home": "user-claude"
    }


async def test_one_skill_linked_into_two_folders_is_listed_once_without_a_warning(
    home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(project_root(project), "linked")
    claude_project(project).mkdir(parents=True)
    (claude_project(project) / "linked").symlink_to("../../.agents/skills/linked")
    provider = FileSystemSkillProvider()

    with caplog.at_level(logging.WARNING):
        observation = await observe(provider, project)
        assert await catalog_of(provider, project) == {"linked": "project-agents"}
    assert [c.source for c in observation.candidates] == ["project-agents"]
    assert not caplog.records


@pytest.mark.skipif(not SUPERPOWERS.is_dir(), reason="the superpowers corpus is not here")
async def test_a_real_collection_installed_in_the_users_claude_folder_loads(
    home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copytree(SUPERPOWERS, claude_user(home))
    provider = FileSystemSkillProvider()

    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        observation = await observe(provider, project)
    assert observation.complete
    assert len(observation.candidates) == 14
    assert {c.source for c in observation.candidates} == {"user-claude"}
    assert not caplog.records
    for candidate in observation.candidates:
        definition = await provider.get(candidate, cwd=project)
        assert definition is not None
        assert definition.content.strip()


# ------------------------------------------------------------------- the trust boundary


async def test_a_project_skill_linked_outside_the_project_is_skipped(
    tmp_path: Path, home: Path, project: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write_skill(outside, "secret-notes")
    write_skill(claude_project(project), "fine")
    (claude_project(project) / "secret-notes").symlink_to(outside / "secret-notes")
    write_skill(project_root(project), "flat-host")
    (project_root(project) / "leak.md").symlink_to(outside / "secret-notes" / "SKILL.md")

    observation = await observe(FileSystemSkillProvider(), project)

    assert [c.name for c in observation.candidates] == ["flat-host", "fine"]
    assert observation.complete
    skipped = {entry.name: entry for entry in observation.skipped}
    assert set(skipped) == {"secret-notes", "leak"}
    reason = skipped["secret-notes"].reason
    assert "outside the project" in reason
    assert str(project) in reason
    assert str(outside / "secret-notes" / "SKILL.md") in reason


async def test_a_project_skills_folder_linked_outside_the_project_is_skipped(
    tmp_path: Path, home: Path, project: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write_skill(outside, "secret-notes")
    (project / ".claude").mkdir()
    claude_project(project).symlink_to(outside)

    observation = await observe(FileSystemSkillProvider(), project)

    assert observation.candidates == ()
    assert [entry.path for entry in observation.skipped] == [str(claude_project(project))]
    assert "outside the project" in observation.skipped[0].reason


async def test_user_folders_may_link_anywhere(tmp_path: Path, home: Path, project: Path) -> None:
    outside = tmp_path / "my-collection"
    write_skill(outside, "mine")
    claude_user(home).mkdir(parents=True)
    (claude_user(home) / "mine").symlink_to(outside / "mine")
    (home / ".agents").mkdir()
    user_root(home).symlink_to(outside)

    assert await catalog_of(FileSystemSkillProvider(), project) == {"mine": "user-agents"}
    observation = await observe(FileSystemSkillProvider(), project)
    assert not observation.skipped


async def test_a_project_skill_swapped_for_a_link_outside_after_listing_does_not_load(
    tmp_path: Path, home: Path, project: Path
) -> None:
    outside = tmp_path / "elsewhere"
    write_skill(outside, "swapped", description='"outside"')
    path = write_skill(claude_project(project), "swapped")
    provider = FileSystemSkillProvider()
    (candidate,) = (await observe(provider, project)).candidates

    shutil.rmtree(path.parent)
    path.parent.symlink_to(outside / "swapped")

    assert await provider.get(candidate, cwd=project) is None


async def test_a_project_skills_files_are_read_inside_the_skill_and_the_project(
    tmp_path: Path, home: Path, project: Path
) -> None:
    folder = write_skill(claude_project(project), "forms").parent
    (folder / "references").mkdir()
    (folder / "references" / "fields.md").write_text("Fields.")
    provider = FileSystemSkillProvider()
    (candidate,) = (await observe(provider, project)).candidates

    found = await provider.read_file(candidate, "references/fields.md", cwd=project, max_bytes=99)
    assert found is not None
    assert (found.path, found.data) == ("references/fields.md", b"Fields.")
    assert found.location == str(folder / "references" / "fields.md")

    outside = tmp_path / "elsewhere"
    write_skill(outside, "forms")
    shutil.rmtree(folder)
    folder.symlink_to(outside / "forms")
    assert await provider.read_file(candidate, "SKILL.md", cwd=project, max_bytes=9999) is None
