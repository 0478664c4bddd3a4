"""Skill folders written into tmp_path; every test gets its own empty home folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.skills import SkillCandidate, SkillObservation
from tether_skills_fs import FileSystemSkillProvider


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$HOME`` for the test: the user root is ``home/.agents/skills``."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project (it holds ``.git``); its skills root is ``project/.agents/skills``."""
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def user_root(home: Path) -> Path:
    return home / ".agents" / "skills"


def project_root(project: Path) -> Path:
    return project / ".agents" / "skills"


def frontmatter(**fields: object) -> str:
    """``---`` fenced ``key: value`` lines; values are written as given (raw YAML)."""
    lines = [f"{key.replace('__', '-')}: {value}" for key, value in fields.items()]
    return "---\n" + "\n".join(lines) + "\n---\n"


def write_skill(root: Path, folder: str, text: str | None = None, **fields: object) -> Path:
    """``root/folder/SKILL.md``: ``text`` as is, or frontmatter from ``fields`` and a body."""
    if text is None:
        fields.setdefault("name", folder)
        fields.setdefault("description", f"Use for {folder} work")
        text = frontmatter(**fields) + f"\n# {folder}\n\nThe {folder} instructions.\n"
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_flat(root: Path, filename: str, text: str) -> Path:
    """``root/filename``: a flat skill file."""
    path = root / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def observe(provider: FileSystemSkillProvider, cwd: Path) -> SkillObservation:
    result = await provider.list(cwd=cwd)
    assert isinstance(result, SkillObservation)
    return result


async def listed(provider: FileSystemSkillProvider, cwd: Path) -> dict[str, SkillCandidate]:
    """The provider's candidates by name (the first, best-ranked, of a name wins)."""
    found: dict[str, SkillCandidate] = {}
    for candidate in sorted((await observe(provider, cwd)).candidates, key=lambda c: c.rank):
        found.setdefault(candidate.name, candidate)
    return found
