"""``diagnose`` (for ``tether check``): roots that are missing, empty, or hold their skills
deeper than the layout tether reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.skills import SkillProviderBlocking, SkillProviderDiagnostics, SkillRegistry
from tether_skills_fs import FileSystemSkillProvider, Settings

from .conftest import project_root, user_root, write_flat, write_skill

pytestmark = pytest.mark.anyio

LAYOUT = "ROOT/NAME/SKILL.md or ROOT/NAME.md"


async def advice(
    tmp_path: Path, *roots: Path | str, project: bool = False, user: bool = False
) -> list[str]:
    provider = FileSystemSkillProvider(Settings(roots=roots, project=project, user=user))
    assert isinstance(provider, SkillProviderDiagnostics)
    return list(await provider.diagnose(cwd=tmp_path))


async def test_a_root_in_good_order_gets_no_advice(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    write_flat(root, "notes.md", "# Notes")
    assert await advice(tmp_path, root) == []


async def test_missing_default_roots_get_no_advice(
    tmp_path: Path, home: Path, project: Path
) -> None:
    assert await advice(project, project=True, user=True) == []
    user_root(home).mkdir(parents=True)
    project_root(project).mkdir(parents=True)
    assert await advice(project, project=True, user=True) == []  # empty, but not named


async def test_a_named_root_that_is_missing_or_empty(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a skill", encoding="utf-8")
    assert await advice(tmp_path, missing, empty) == [
        f"skills root {missing} does not exist; create it, or fix or remove it in roots in "
        "[plugin.skills-fs]",
        f"skills root {empty} is empty: it holds no skill ({LAYOUT}); add skills to it or "
        "remove it from roots in [plugin.skills-fs]",
    ]


async def test_a_root_whose_skills_sit_deeper_names_the_nearest_and_the_root_to_use(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    write_skill(repo / "skills" / "documents", "pdf")
    write_skill(repo / "skills" / "documents", "docx")
    write_skill(repo / "skills" / "web" / "extra", "fetch")
    assert await advice(tmp_path, repo) == [
        f"skills root {repo} holds no skill where tether reads them ({LAYOUT}), but 3 SKILL.md "
        f"files deeper (the nearest: {repo / 'skills' / 'documents' / 'docx' / 'SKILL.md'}): "
        f"point the root at {repo / 'skills' / 'documents'}, or move each skill folder "
        "directly into the root"
    ]


async def test_a_category_folder_beside_real_skills_is_named(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    write_skill(root / "anthropic", "xlsx")
    assert await advice(tmp_path, root) == [
        f"folder {root / 'anthropic'} in skills root {root} holds no SKILL.md, but 1 deeper "
        f"(the nearest: {root / 'anthropic' / 'xlsx' / 'SKILL.md'}); tether reads {LAYOUT} "
        f"only: add {root / 'anthropic'} to roots in [plugin.skills-fs], or move those skill "
        "folders up"
    ]


async def test_a_misspelled_skill_file_is_named(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    (root / "docx").mkdir()
    (root / "docx" / "Skill.md").write_text("---\ndescription: d\n---\n", encoding="utf-8")
    assert await advice(tmp_path, root) == [
        f"skill folder {root / 'docx'} holds Skill.md, which tether does not read: rename it "
        "SKILL.md"
    ]
    only = tmp_path / "only"
    (only / "docx").mkdir(parents=True)
    (only / "docx" / "Skill.md").write_text("---\ndescription: d\n---\n", encoding="utf-8")
    assert await advice(tmp_path, only) == [
        f"skill folder {only / 'docx'} holds Skill.md, which tether does not read: rename it "
        "SKILL.md"
    ]


async def test_a_skill_file_directly_in_a_root_and_a_missing_package(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_flat(root, "SKILL.md", "---\ndescription: d\n---\n")
    assert await advice(tmp_path, root, "pkg:no_such_package_here/skills") == [
        f"skills root {root} holds {root / 'SKILL.md'} directly, which is not a skill "
        f"({LAYOUT}): move it into a folder named after the skill",
        "skills root pkg:no_such_package_here/skills is skipped: package no_such_package_here "
        "is not installed; install it (uv add ...) or remove the root from [plugin.skills-fs] "
        "roots",
    ]


async def test_a_root_that_is_a_symlink_loop_or_a_file(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    file = tmp_path / "file"
    file.write_text("x", encoding="utf-8")
    assert await advice(tmp_path, loop, file) == [
        f"skills root {loop}: it is a symlink loop (a link that leads back to itself); fix the "
        "link, or point the root elsewhere",
        f"skills root {file} is not a folder; point it at a folder",
    ]


async def test_the_registry_gathers_the_advice_of_every_visible_provider(tmp_path: Path) -> None:
    registry = SkillRegistry()
    provider = FileSystemSkillProvider(
        Settings(roots=(tmp_path / "missing",), project=False, user=False)
    )
    registry.register_provider(lambda control: provider, name=provider.name)
    assert await registry.diagnose(cwd=tmp_path) == [
        (
            "skills-fs",
            f"skills root {tmp_path / 'missing'} does not exist; create it, or fix or remove "
            "it in roots in [plugin.skills-fs]",
        )
    ]


async def test_read_blocking_the_provider_answers_what_list_and_diagnose_answer(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    write_skill(root, "pdf")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("no frontmatter\n", encoding="utf-8")
    missing = tmp_path / "missing"
    provider = FileSystemSkillProvider(Settings(roots=(root, missing), project=False, user=False))
    assert isinstance(provider, SkillProviderBlocking)
    read = provider.list_blocking(cwd=tmp_path)
    assert not provider.watching  # a command that reads once opens no watch
    assert [c.name for c in read.candidates] == ["pdf"]
    assert [s.path for s in read.skipped] == [str(root / "broken" / "SKILL.md")]
    assert read == await provider.list(cwd=tmp_path)
    assert await provider.changed(cwd=tmp_path) is False  # remembered as a listing
    assert list(provider.diagnose_blocking(cwd=tmp_path)) == await advice(tmp_path, root, missing)
    provider.close()
