"""What ``changed()`` sees on each call (root folders), and what only the full check sees, when
the provider looks for changes (``watch=False``: not Linux, or inotify refused); what a watched
provider is told is in test_watched_changes.py.

Folder times are set explicitly with ``os.utime`` (a minute old) rather than by sleeping: a
folder changed less than :data:`MTIME_GRANULARITY_NS` before a read is not trusted, and the
tests below must say which path they exercise.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest

from tether.skills import SkillRegistry
from tether_skills_fs import FileSystemSkillProvider, Settings
from tether_skills_fs._scan import MTIME_GRANULARITY_NS

from .conftest import listed, write_flat, write_skill

pytestmark = pytest.mark.anyio


class Clock:
    """The provider's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "skills"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def provider(root: Path, clock: Clock) -> FileSystemSkillProvider:
    settings = Settings(roots=(root,), project=False, user=False)
    return FileSystemSkillProvider(settings, full_check_seconds=5, clock=clock, watch=False)


def age(*paths: Path, seconds: float = 60) -> None:
    """Set the modification time of ``paths`` (and of everything under the folders among them)
    ``seconds`` into the past."""
    stamp = time.time_ns() - int(seconds * 1e9)
    for path in paths:
        below = sorted(path.rglob("*"), reverse=True) if path.is_dir() else []
        for item in [*below, path]:  # children first: touching them moves their folder
            os.utime(item, ns=(stamp, stamp), follow_symlinks=False)


def edit_in_place(path: Path, old: str, new: str) -> None:
    """Rewrite ``path`` through the same inode: no folder's time moves."""
    text = path.read_text()
    with path.open("r+") as file:
        file.truncate()
        file.write(text.replace(old, new))


@pytest.mark.parametrize("change", ["add", "remove", "rename", "add-flat", "remove-root"])
async def test_a_change_of_a_roots_entries_is_seen_on_the_next_call(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, change: str
) -> None:
    write_skill(root, "existing")
    write_flat(root, "flat.md", "---\nname: flat\ndescription: A flat one\n---\nBody\n")
    age(root)
    await provider.list(cwd=tmp_path)
    assert await provider.changed(cwd=tmp_path) is False
    if change == "add":
        write_skill(root, "added")
    elif change == "remove":
        (root / "flat.md").unlink()
    elif change == "rename":
        (root / "existing").rename(root / "renamed")
    elif change == "add-flat":
        write_flat(root, "other.md", "---\nname: other\ndescription: Another\n---\nBody\n")
    else:
        (root / "flat.md").unlink()
        (root / "existing" / "SKILL.md").unlink()
        (root / "existing").rmdir()
        root.rmdir()
    assert await provider.changed(cwd=tmp_path) is True


async def test_an_edit_in_place_waits_for_the_full_check(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, clock: Clock
) -> None:
    path = write_skill(root, "steady")
    age(root)
    await provider.list(cwd=tmp_path)
    edit_in_place(path, "Use for steady work", "A new description")
    clock.now += 4.9
    assert await provider.changed(cwd=tmp_path) is False  # no folder moved: not seen yet
    clock.now += 0.1
    assert await provider.changed(cwd=tmp_path) is True  # five seconds on: every file is read


async def test_a_full_check_that_finds_nothing_waits_another_interval(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, clock: Clock
) -> None:
    path = write_skill(root, "steady")
    age(root)
    await provider.list(cwd=tmp_path)
    clock.now += 5
    assert await provider.changed(cwd=tmp_path) is False  # the full check, nothing changed
    edit_in_place(path, "Use for steady work", "A new description")
    clock.now += 4.9
    assert await provider.changed(cwd=tmp_path) is False
    clock.now += 0.1
    assert await provider.changed(cwd=tmp_path) is True


async def test_full_check_seconds_zero_reads_every_file_on_every_call(
    root: Path, tmp_path: Path
) -> None:
    settings = Settings(roots=(root,), project=False, user=False)
    provider = FileSystemSkillProvider(settings, full_check_seconds=0, watch=False)
    path = write_skill(root, "steady")
    age(root)
    await provider.list(cwd=tmp_path)
    assert await provider.changed(cwd=tmp_path) is False
    edit_in_place(path, "Use for steady work", "A new description")
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_skill_file_written_into_an_existing_folder_is_seen_on_the_next_call(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    # mkdir first, SKILL.md later: only the folder's time moves, not the root's.
    write_skill(root, "existing")
    (root / "drafting").mkdir()
    age(root)
    await provider.list(cwd=tmp_path)
    assert await provider.changed(cwd=tmp_path) is False
    write_skill(root, "drafting")
    age(root / "drafting")
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_skipped_file_fixed_in_place_is_seen_on_the_next_call(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "broken", "---\nname: broken\n---\nno description yet\n")
    age(root)
    assert (await listed(provider, tmp_path)) == {}
    assert await provider.changed(cwd=tmp_path) is False
    edit_in_place(path, "name: broken\n", "name: broken\ndescription: Fixed now\n")
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_root_changed_too_recently_is_compared_entry_by_entry(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "fresh")
    age(root)
    age(root, seconds=MTIME_GRANULARITY_NS / 1e9 / 2)  # within the granularity of the read
    await provider.list(cwd=tmp_path)
    edit_in_place(path, "Use for fresh work", "A new description")
    # An untrusted root folder: its entries are compared, which sees the edited file.
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_root_touched_without_a_change_of_entries_is_trusted_again(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "steady")
    age(root)
    await provider.list(cwd=tmp_path)
    (root / ".editor-swap").write_text("")  # hidden: not an entry, but the root's time moves
    (root / ".editor-swap").unlink()
    stamp = time.time_ns() - 30 * 10**9  # as if that happened half a minute ago
    os.utime(root, ns=(stamp, stamp))
    assert await provider.changed(cwd=tmp_path) is False  # compared entry by entry: same
    edit_in_place(path, "Use for steady work", "A new description")
    assert await provider.changed(cwd=tmp_path) is False  # trusted again: the folder only


async def test_loading_a_skill_whose_summary_changed_makes_the_listing_stale(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    path = write_skill(root, "tuned")
    age(root)
    await registry.list(cwd=tmp_path)
    edit_in_place(path, "Use for tuned work", "Use for retuned work")
    assert await registry.refresh(cwd=tmp_path) is False  # between full checks
    definition = await registry.get("tuned", cwd=tmp_path)
    assert definition is not None
    assert definition.description == "Use for retuned work"
    assert await registry.refresh(cwd=tmp_path) is True
    [summary] = (await registry.list(cwd=tmp_path)).summaries
    assert summary.description == "Use for retuned work"
    assert await registry.refresh(cwd=tmp_path) is False


async def test_loading_an_unchanged_skill_leaves_the_listing_fresh(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "body-only")
    age(root)
    candidate = (await listed(provider, tmp_path))["body-only"]
    edit_in_place(path, "The body-only instructions.", "Other instructions.")
    definition = await provider.get(candidate, cwd=tmp_path)
    assert definition is not None
    assert "Other instructions." in definition.content
    assert await provider.changed(cwd=tmp_path) is False  # a body is not in the catalog


@pytest.mark.parametrize("value", [-1, math.inf, math.nan, True, "5"])
def test_a_bad_full_check_interval_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="full_check_seconds must be a finite number >= 0"):
        FileSystemSkillProvider(full_check_seconds=value)  # type: ignore[arg-type]
