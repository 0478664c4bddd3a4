"""A cloned repository's skills are untrusted: hostile files cost one entry, never the catalog.

Alias bombs, values PyYAML cannot build, FIFOs, devices, huge files and symlink loops are each
skipped on their own, with a reason, while their siblings load and the listing stays complete.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import anyio
import pytest

from tether.skills import SKILL_FILE_MAX_BYTES, SkillRegistry
from tether.testing import scaled
from tether_skills_fs import FileSystemSkillProvider, Settings

from .conftest import frontmatter, observe, write_flat, write_skill

pytestmark = pytest.mark.anyio

#: Everything here must finish far sooner; a regression hangs or eats memory instead.
DEADLINE = scaled(20)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    folder.mkdir()
    return folder


@pytest.fixture
def provider(root: Path) -> FileSystemSkillProvider:
    return FileSystemSkillProvider(Settings(roots=(root,), project=False, user=False))


def alias_bomb(levels: int = 9, key: str = "description") -> str:
    """Frontmatter whose ``key`` stands for 9**levels strings, in a few hundred bytes."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        aliases = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    lines.append(f"{key}: *a{levels - 1}")
    return "---\nname: bomb\n" + "\n".join(lines) + "\n---\n\n# Bomb\n"


async def skipped_reasons(provider: FileSystemSkillProvider, cwd: Path) -> dict[str, str]:
    observation = await observe(provider, cwd)
    assert observation.complete
    return {entry.name or entry.path: entry.reason for entry in observation.skipped}


# ------------------------------------------------------------------ YAML that explodes


@pytest.mark.parametrize("key", ["description", "metadata", "name", "disable-model-invocation"])
async def test_an_alias_bomb_is_skipped_quickly_with_a_short_reason(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, key: str
) -> None:
    write_skill(root, "bomb", text=alias_bomb(key=key))
    write_skill(root, "sibling")
    started = time.monotonic()
    with anyio.fail_after(DEADLINE):
        observation = await observe(provider, tmp_path)
    assert time.monotonic() - started < DEADLINE
    assert [c.name for c in observation.candidates] == ["sibling"]
    assert observation.complete
    [entry] = observation.skipped
    assert entry.name == "bomb"
    assert entry.reason == (
        "its frontmatter expands to more than 10,000 values (YAML anchors and aliases repeat "
        "values, or a value contains itself); write the values out without anchors (&name) "
        "and aliases (*name)"
    )


async def test_a_value_that_contains_itself_is_skipped(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "loop", text="---\ndescription: &d [*d]\n---\nbody")
    reasons = await skipped_reasons(provider, tmp_path)
    assert reasons["loop"].startswith("its frontmatter nests deeper than 100 levels (or a value")


async def test_a_few_anchors_and_aliases_still_load(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    text = "---\ndescription: &d Shared text\nmetadata:\n  summary: *d\n---\nbody"
    write_skill(root, "shared", text=text)
    [candidate] = (await observe(provider, tmp_path)).candidates
    assert candidate.description == "Shared text"
    assert candidate.metadata == {"summary": "Shared text"}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("2024-13-01", "month must be in 1..12"),
        ("!!float not-a-number", "could not convert string to float"),
        ("!!python/object:os.system x", "could not determine a constructor"),
        ("!!omap [x]", "expected a mapping of length 1"),
    ],
)
async def test_a_value_pyyaml_cannot_build_is_skipped_not_raised(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, value: str, problem: str
) -> None:
    write_skill(root, "odd", description=value)
    write_skill(root, "sibling")
    observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["sibling"]
    [entry] = observation.skipped
    assert entry.reason.startswith("its frontmatter is not valid YAML: ")
    assert problem in entry.reason


async def test_a_huge_value_is_quoted_short(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "listy", description="[" + ", ".join(["x" * 5000] * 200) + "]")
    reasons = await skipped_reasons(provider, tmp_path)
    assert len(reasons["listy"]) < 200, reasons
    assert reasons["listy"].startswith("its description ['xxxxx")


# ------------------------------------------------------------------ special files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("link", [False, True])
async def test_a_skill_file_that_is_a_fifo_is_skipped_without_blocking(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, link: bool
) -> None:
    write_skill(root, "sibling")
    fifo = root / "piped" / "SKILL.md"
    fifo.parent.mkdir()
    if link:
        os.mkfifo(tmp_path / "pipe")
        fifo.symlink_to(tmp_path / "pipe")
    else:
        os.mkfifo(fifo)
    os.mkfifo(root / "flat-pipe.md")
    with anyio.fail_after(DEADLINE):
        reasons = await skipped_reasons(provider, tmp_path)
    expected = (
        "it is a FIFO (named pipe), not a regular file; replace it with a regular file (only "
        "regular files are read as skills)"
    )
    assert reasons == {"piped": expected, "flat-pipe": expected}


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/stdin", "/dev/null"])
async def test_a_skill_file_that_links_to_a_device_is_skipped(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, device: str
) -> None:
    if not os.path.exists(device):
        pytest.skip(f"{device} is not here")
    (root / "device").mkdir()
    (root / "device" / "SKILL.md").symlink_to(device)
    (root / "flat-device.md").symlink_to(device)
    write_skill(root, "sibling")
    with anyio.fail_after(DEADLINE):
        observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["sibling"]
    assert observation.complete
    assert sorted(entry.name or "" for entry in observation.skipped) == ["device", "flat-device"]
    assert all("not a regular file" in entry.reason for entry in observation.skipped)


async def test_a_skill_file_over_the_cap_is_skipped_with_its_size_and_the_cap(
    root: Path, tmp_path: Path
) -> None:
    provider = FileSystemSkillProvider(
        Settings(roots=(root,), project=False, user=False, max_skill_file_bytes=1000)
    )
    write_skill(root, "large", text=frontmatter(description="Big") + "x" * 2000)
    write_skill(root, "small")
    reasons = await skipped_reasons(provider, tmp_path)
    size = (root / "large" / "SKILL.md").stat().st_size
    assert reasons == {
        "large": f"it is {size:,} bytes, over the cap of 1,000 bytes; move detail into files "
        "beside it (references/), or raise max_skill_file_bytes in [plugin.skills-fs]"
    }


async def test_the_default_cap_is_one_mebibyte(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    assert SKILL_FILE_MAX_BYTES == 1024 * 1024
    at_cap = write_skill(root, "at-cap", text=frontmatter(description="Fits") + "\n")
    with at_cap.open("r+b") as handle:
        handle.truncate(SKILL_FILE_MAX_BYTES)  # padded with NULs in the body
    over = write_skill(root, "over-cap", text=frontmatter(description="Too big") + "\n")
    with over.open("r+b") as handle:
        handle.truncate(SKILL_FILE_MAX_BYTES + 1)
    observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["at-cap"]
    assert [entry.name for entry in observation.skipped] == ["over-cap"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
async def test_get_of_a_skill_file_replaced_by_a_fifo_is_none_without_blocking(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = write_skill(root, "swapped")
    [candidate] = (await observe(provider, tmp_path)).candidates
    path.unlink()
    os.mkfifo(path)
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"), anyio.fail_after(DEADLINE):
        assert await provider.get(candidate, cwd=tmp_path) is None
    assert f"skill {path} is no longer loadable: it is a FIFO (named pipe)" in caplog.text


async def test_get_of_a_skill_file_grown_over_the_cap_is_none(root: Path, tmp_path: Path) -> None:
    provider = FileSystemSkillProvider(
        Settings(roots=(root,), project=False, user=False, max_skill_file_bytes=1000)
    )
    path = write_skill(root, "growing")
    [candidate] = (await observe(provider, tmp_path)).candidates
    path.write_text(frontmatter(name="growing", description="d") + "y" * 5000, encoding="utf-8")
    assert await provider.get(candidate, cwd=tmp_path) is None


# ------------------------------------------------------------------ symlink loops


async def test_symlink_loops_are_skipped_one_by_one_and_the_rest_stays_complete(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (root / "ping").symlink_to(root / "pong")
    (root / "pong").symlink_to(root / "ping")
    (root / "self.md").symlink_to(root / "self.md")
    (root / "inner").mkdir()
    (root / "inner" / "SKILL.md").symlink_to(root / "inner" / "SKILL.md")
    write_skill(root, "sibling")
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["sibling"]
    assert observation.complete
    reasons = {entry.name or entry.path: entry.reason for entry in observation.skipped}
    assert sorted(reasons) == ["inner", "ping", "pong", "self"]
    assert all(
        reason.startswith("it is a symlink loop (a link that leads back to itself); fix or remove")
        for reason in reasons.values()
    )
    assert "permissions" not in caplog.text


async def test_a_symlink_loop_does_not_keep_the_registry_from_caching(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    (root / "loop").symlink_to(root / "loop")
    write_skill(root, "kept")
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    first = await registry.list(cwd=tmp_path)
    assert first.complete
    assert await registry.list(cwd=tmp_path) is first  # cached: the loop is not transient
    assert [entry.name for entry in first.skipped] == ["loop"]
    assert {entry.provider for entry in first.skipped} == {"skills-fs"}


# ------------------------------------------------------------------ every skip is recorded


async def test_every_kind_of_skip_is_recorded_with_its_path_and_reason(
    root: Path, tmp_path: Path
) -> None:
    provider = FileSystemSkillProvider(
        Settings(
            roots=(root, "pkg:not_installed_anywhere/skills"),
            project=False,
            user=False,
            max_skills_per_root=5,
        )
    )
    write_skill(root, "bad-yaml", text="---\nname: bad-yaml\ndescription: [unclosed\n---\n")
    (root / "latin1").mkdir()
    (root / "latin1" / "SKILL.md").write_bytes(b"---\ndescription: caf\xe9\n---\n")
    write_skill(root, "no-description", text=frontmatter(name="no-description") + "body")
    write_skill(root, "bad-name", name="Bad_Name")
    write_flat(root, "SKILL.md", "# loose")
    (root / "broken").symlink_to(tmp_path / "nowhere")
    write_skill(root, "good")
    write_skill(root, "zz-cut-off")  # the sixth skill entry by name: over the limit
    observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["good"]
    assert observation.complete
    found = {entry.path: entry.reason for entry in observation.skipped}
    assert found == {
        str(root / "SKILL.md"): "a SKILL.md directly in a skills root is not a skill; move it "
        "into a folder named after the skill",
        str(root / "broken"): "it is a broken symlink; fix or remove it",
        str(root): "it has 6 entries; only the first 5 by name were read; raise "
        "max_skills_per_root in [plugin.skills-fs]",
        str(root / "bad-name" / "SKILL.md"): "its name 'Bad_Name' is not a skill name "
        "(lowercase letters, digits and single hyphens, at most 64 characters); rename it, "
        "e.g. bad-name",
        str(root / "bad-yaml" / "SKILL.md"): found[str(root / "bad-yaml" / "SKILL.md")],
        str(root / "latin1" / "SKILL.md"): "it is not UTF-8 text (byte 0xe9 at offset 20); "
        "save it as UTF-8",
        str(root / "no-description" / "SKILL.md"): "its description is missing; add "
        "description: what the skill does and when to use it",
        "pkg:not_installed_anywhere/skills": "package not_installed_anywhere is not installed; "
        "install it (uv add ...) or remove the root from [plugin.skills-fs] roots",
    }
    assert found[str(root / "bad-yaml" / "SKILL.md")].startswith(
        "its frontmatter is not valid YAML: "
    )


async def test_hostile_entries_do_not_make_every_turn_look_like_a_change(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    # The registry asks changed() at every turn: a hostile entry must not churn the catalog.
    write_skill(root, "bomb", text=alias_bomb())
    (root / "loop").symlink_to(root / "loop")
    (root / "broken").symlink_to(tmp_path / "nowhere")
    (root / "device.md").symlink_to(os.devnull)
    (root / "inner").mkdir()
    (root / "inner" / "SKILL.md").symlink_to(root / "inner" / "SKILL.md")
    if hasattr(os, "mkfifo"):
        (root / "piped").mkdir()
        os.mkfifo(root / "piped" / "SKILL.md")
    write_skill(root, "sibling")
    observation = await observe(provider, tmp_path)
    assert len(observation.skipped) >= 5
    assert await provider.changed(cwd=tmp_path) is False
    (root / "loop").unlink()
    write_skill(root, "loop")
    assert await provider.changed(cwd=tmp_path) is True
