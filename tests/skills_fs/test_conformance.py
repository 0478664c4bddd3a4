"""skills-fs passes the SkillProvider conformance suite that ships with tether."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.testing.skill_provider_conformance import (
    DirectorySkillAuthor,
    SkillProviderConformance,
)
from tether_skills_fs import FileSystemSkillProvider, Settings


class TestFileSystemSkillProvider(SkillProviderConformance):
    @pytest.fixture
    def provider(self, tmp_path: Path) -> FileSystemSkillProvider:
        return FileSystemSkillProvider(Settings(roots=(tmp_path / "skills",)))

    @pytest.fixture
    def author(self, tmp_path: Path) -> DirectorySkillAuthor:
        return DirectorySkillAuthor(tmp_path / "skills")


class TestFlatSkills(SkillProviderConformance):
    """The same behaviours with flat ``NAME.md`` skills in the project root."""

    @pytest.fixture
    def cwd(self, tmp_path: Path) -> Path:
        (tmp_path / "project" / ".git").mkdir(parents=True)
        return tmp_path / "project"

    @pytest.fixture
    def provider(self) -> FileSystemSkillProvider:
        return FileSystemSkillProvider()

    @pytest.fixture
    def author(self, cwd: Path) -> FlatAuthor:
        return FlatAuthor(cwd / ".agents" / "skills")


class FlatAuthor:
    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, *, description: str, body: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / f"{name}.md").write_text(f"# {description}\n\n{body}\n", encoding="utf-8")

    def remove(self, name: str) -> None:
        (self.root / f"{name}.md").unlink()
