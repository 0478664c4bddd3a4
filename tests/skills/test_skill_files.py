"""``SkillRegistry.read_file``: the contract a provider serves bundled files under
(:class:`tether.skills.SkillProviderFiles`), and ``read_bundled_file`` over real folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.errors import ErrorCode, SkillError
from tether.skills import (
    SkillCandidate,
    SkillFile,
    SkillFileRefused,
    SkillFileTooLarge,
    SkillProviderFiles,
    SkillRegistry,
    bundled_path,
    read_bundled_file,
)

from .test_registry import MemoryProvider, add, candidate

pytestmark = pytest.mark.anyio


class FileProvider(MemoryProvider):
    """Serves whatever ``answer`` says; records the paths it was asked for."""

    def __init__(self, answer: object) -> None:
        super().__init__([candidate("docs", provider="files")], name="files")
        self.answer = answer
        self.asked: list[str] = []

    async def read_file(
        self, candidate: SkillCandidate, path: str, *, cwd: Path, max_bytes: int
    ) -> object:
        self.asked.append(path)
        return self.answer


def registry_with(provider: MemoryProvider) -> SkillRegistry:
    registry = SkillRegistry()
    add(registry, provider)
    return registry


async def test_a_provider_gets_the_path_clean_and_its_file_comes_back() -> None:
    provider = FileProvider(SkillFile(path="references/a.md", data=b"A"))
    registry = registry_with(provider)
    assert isinstance(provider, SkillProviderFiles)
    assert registry.serves_files()
    found = await registry.read_file("docs", "./references//a.md", max_bytes=10)
    assert found == SkillFile(path="references/a.md", data=b"A")
    assert provider.asked == ["references/a.md"]


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../x.md", "it leaves the skill's folder (..)"),
        ("a/../../x.md", "it leaves the skill's folder (..)"),
        ("/etc/passwd", "it is an absolute path"),
        ("c:/x", "it is an absolute path"),
        ("a\\b.md", "it uses \\ between folders"),
        ("a\x00b", "it holds a control character"),
        ("", "it is empty"),
        ("./", "it names the skill's folder, not a file"),
    ],
)
async def test_a_bad_path_never_reaches_the_provider(path: str, problem: str) -> None:
    provider = FileProvider(None)
    with pytest.raises(SkillFileRefused) as caught:
        await registry_with(provider).read_file("docs", path, max_bytes=10)
    assert caught.value.problem == problem
    assert provider.asked == []
    with pytest.raises(SkillFileRefused):
        bundled_path(path)


async def test_skills_whose_provider_serves_no_files_are_refused() -> None:
    registry = registry_with(MemoryProvider([candidate("plain")]))
    registry.register({"name": "coded", "description": "In code.", "content": "Body."})
    assert not registry.serves_files()
    with pytest.raises(SkillFileRefused) as caught:
        await registry.read_file("plain", "a.md", max_bytes=10)
    assert caught.value.problem == (
        'skill "plain" comes from provider "memory", which does not serve its files'
    )
    with pytest.raises(SkillFileRefused) as caught:
        await registry.read_file("coded", "a.md", max_bytes=10)
    assert caught.value.problem == 'skill "coded" is defined in code and bundles no files'
    assert await registry.read_file("unknown", "a.md", max_bytes=10) is None
    assert await registry.read_file("Not A Name", "a.md", max_bytes=10) is None


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("text", "read_file() returned str, not a SkillFile"),
        (SkillFile(path="a.md", data=b"x" * 11), "returned 11 bytes of a.md, over the cap of 10"),
    ],
)
async def test_a_provider_that_breaks_the_contract_fails_loudly(
    answer: object, message: str
) -> None:
    with pytest.raises(SkillError) as caught:
        await registry_with(FileProvider(answer)).read_file("docs", "a.md", max_bytes=10)
    assert caught.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert message in str(caught.value)


async def test_the_cap_must_be_a_positive_integer() -> None:
    with pytest.raises(SkillError) as caught:
        await registry_with(FileProvider(None)).read_file("docs", "a.md", max_bytes=0)
    assert caught.value.code is ErrorCode.SKILL_INVALID


def test_read_bundled_file_confines_reads_to_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "skill"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "a.md").write_text("A")
    (tmp_path / "secret").write_text("S")
    (folder / "out.md").symlink_to(tmp_path / "secret")
    (folder / "in.md").symlink_to(folder / "refs" / "a.md")
    os.mkfifo(folder / "pipe")
    (folder / "big.md").write_bytes(b"x" * 11)

    assert read_bundled_file(folder, "refs/a.md", max_bytes=10) == (
        str(folder / "refs" / "a.md"),
        b"A",
    )
    assert read_bundled_file(folder, "in.md", max_bytes=10)[1] == b"A"
    with pytest.raises(SkillFileRefused, match="leads outside the skill's folder"):
        read_bundled_file(folder, "out.md", max_bytes=10)
    with pytest.raises(SkillFileRefused, match="FIFO"):
        read_bundled_file(folder, "pipe", max_bytes=10)
    with pytest.raises(SkillFileTooLarge) as caught:
        read_bundled_file(folder, "big.md", max_bytes=10)
    assert (caught.value.size, caught.value.limit) == (11, 10)
    with pytest.raises(FileNotFoundError):
        read_bundled_file(folder, "missing.md", max_bytes=10)
