"""What ``changed()`` is told by the watches (Linux's inotify): every change of a root's
entries or of a skill file is seen on the next call, edits in place included, and nothing
else churns the catalog. What an unwatched provider sees is in test_change_detection.py.

Root folders are aged (``os.utime``) as there: a watched listing must not depend on folder
times at all, so the tests below would pass as well with fresh folders.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import tether_skills_fs._provider as provider_module
from tether_skills_fs import FileSystemSkillProvider, Settings

from .conftest import listed, write_flat, write_skill
from .test_change_detection import Clock, age, edit_in_place

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "skills"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def provider(root: Path, clock: Clock) -> Iterator[FileSystemSkillProvider]:
    settings = Settings(roots=(root,), project=False, user=False)
    provider = FileSystemSkillProvider(settings, full_check_seconds=5, clock=clock)
    yield provider
    provider.close()


async def listed_watched(provider: FileSystemSkillProvider, cwd: Path) -> None:
    await listed(provider, cwd)
    assert provider.watching  # on Linux the listing is watched: a regression fails here
    assert await provider.changed(cwd=cwd) is False


@pytest.mark.parametrize(
    "change",
    [
        "add",
        "remove",
        "rename",
        "add-flat",
        "remove-root",
        "edit-in-place",
        "edit-flat-in-place",
        "save-by-rename",
        "skill-file-into-folder",
        "fix-skipped-file",
    ],
)
async def test_every_change_is_seen_on_the_next_call(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, change: str
) -> None:
    path = write_skill(root, "existing")
    flat = write_flat(root, "flat.md", "---\nname: flat\ndescription: A flat one\n---\nBody\n")
    broken = write_skill(root, "broken", "---\nname: broken\n---\nno description yet\n")
    (root / "drafting").mkdir()
    age(root)
    await listed_watched(provider, tmp_path)
    if change == "add":
        write_skill(root, "added")
    elif change == "remove":
        shutil.rmtree(root / "existing")
    elif change == "rename":
        (root / "existing").rename(root / "renamed")
    elif change == "add-flat":
        write_flat(root, "other.md", "---\nname: other\ndescription: Another\n---\nBody\n")
    elif change == "remove-root":
        shutil.rmtree(root)
    elif change == "edit-in-place":
        edit_in_place(path, "Use for existing work", "A new description")
    elif change == "edit-flat-in-place":
        edit_in_place(flat, "A flat one", "A new description")
    elif change == "save-by-rename":  # how many editors save: write aside, rename over
        aside = path.with_name(".SKILL.md.swp")
        aside.write_text(path.read_text().replace("Use for existing work", "Renamed over"))
        aside.replace(path)
    elif change == "skill-file-into-folder":
        write_skill(root, "drafting")
    else:
        edit_in_place(broken, "name: broken\n", "name: broken\ndescription: Fixed now\n")
    assert await provider.changed(cwd=tmp_path) is True
    assert await provider.changed(cwd=tmp_path) is True  # stale until listed again


async def test_files_that_are_not_in_the_catalog_change_nothing(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "busy")
    (root / "busy" / "scripts").mkdir()
    age(root)
    await listed_watched(provider, tmp_path)
    (root / ".editor-swap").write_text("")  # hidden in a root: not an entry
    (root / ".editor-swap").unlink()
    (root / "busy" / "notes.txt").write_text("a skill's scratch file")
    (root / "busy" / "scripts" / "run.py").write_text("print('hi')")
    os.utime(root)  # a root's time moved without a change of entries
    assert await provider.changed(cwd=tmp_path) is False


async def test_a_listing_seen_again_is_watched_afresh(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "steady")
    await listed_watched(provider, tmp_path)
    edit_in_place(path, "Use for steady work", "First edit")
    assert await provider.changed(cwd=tmp_path) is True
    assert (await listed(provider, tmp_path))["steady"].description == "First edit"
    assert await provider.changed(cwd=tmp_path) is False
    edit_in_place(path, "First edit", "Second edit")
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_skill_file_that_is_a_link_is_watched_where_it_leads(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    elsewhere = write_skill(tmp_path / "shared", "linked")
    (root / "linked").mkdir(parents=True)
    (root / "linked" / "SKILL.md").symlink_to(elsewhere)
    age(root)
    await listed_watched(provider, tmp_path)
    edit_in_place(elsewhere, "Use for linked work", "A new description")  # no watched folder
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_root_created_after_the_listing_is_seen_on_the_next_call(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    await listed_watched(provider, tmp_path)  # the root is missing: nothing to watch
    write_skill(root, "late")
    assert await provider.changed(cwd=tmp_path) is True


async def test_a_root_pointed_elsewhere_is_seen_at_the_full_check(
    root: Path, tmp_path: Path, clock: Clock
) -> None:
    # A symlink's target changing is an event of the folder holding the link, which no
    # watch covers: the full check finds it, comparing each root's folder.
    first = tmp_path / "first"
    second = tmp_path / "second"
    write_skill(first, "one")
    write_skill(second, "two")
    link = tmp_path / "link"
    link.symlink_to(first)
    settings = Settings(roots=(link,), project=False, user=False)
    provider = FileSystemSkillProvider(settings, full_check_seconds=5, clock=clock)
    try:
        await listed_watched(provider, tmp_path)
        link.unlink()
        link.symlink_to(second)
        clock.now += 4.9
        assert await provider.changed(cwd=tmp_path) is False  # not seen yet
        clock.now += 0.1
        assert await provider.changed(cwd=tmp_path) is True
    finally:
        provider.close()


async def test_a_new_project_root_is_seen_at_the_full_check(tmp_path: Path, clock: Clock) -> None:
    # Roots that appear because the working directory's project changed (a .git created
    # above it) are not in any watched folder: the full check finds them.
    cwd = tmp_path / "work" / "here"
    cwd.mkdir(parents=True)
    settings = Settings(project=True, user=False)
    provider = FileSystemSkillProvider(settings, full_check_seconds=5, clock=clock)
    try:
        await listed_watched(provider, cwd)
        (tmp_path / "work" / ".git").mkdir()
        clock.now += 5
        assert await provider.changed(cwd=cwd) is True
    finally:
        provider.close()


async def test_a_change_under_one_working_directory_leaves_others_fresh(
    tmp_path: Path, clock: Clock
) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    for project in (one, two):
        (project / ".git").mkdir(parents=True)
        write_skill(project / ".agents" / "skills", "local")
    provider = FileSystemSkillProvider(Settings(user=False), clock=clock)
    try:
        await listed_watched(provider, one)
        await listed_watched(provider, two)
        write_skill(one / ".agents" / "skills", "added")
        assert await provider.changed(cwd=two) is False
        assert await provider.changed(cwd=one) is True
    finally:
        provider.close()


async def test_a_closed_provider_lists_anew_and_then_looks_for_changes(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "steady")
    age(root)
    await listed_watched(provider, tmp_path)
    provider.close()
    assert not provider.watching
    assert await provider.changed(cwd=tmp_path) is True  # nothing reports its changes now
    await listed(provider, tmp_path)
    assert await provider.changed(cwd=tmp_path) is False
    edit_in_place(path, "Use for steady work", "A new description")
    assert await provider.changed(cwd=tmp_path) is False  # unwatched: waits for the full check


async def test_watch_false_looks_for_changes(root: Path, tmp_path: Path) -> None:
    write_skill(root, "steady")
    settings = Settings(roots=(root,), project=False, user=False)
    provider = FileSystemSkillProvider(settings, watch=False)
    await listed(provider, tmp_path)
    assert not provider.watching


async def test_a_change_the_new_listing_read_does_not_make_it_stale(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    # A loaded skill that no longer matches its listing makes changed() True before the
    # watch's events are read; the listing that follows has read the change already.
    path = write_skill(root, "tuned")
    candidate = (await listed(provider, tmp_path))["tuned"]
    edit_in_place(path, "Use for tuned work", "Use for retuned work")
    assert await provider.get(candidate, cwd=tmp_path) is not None  # the listing is stale
    assert await provider.changed(cwd=tmp_path) is True
    assert (await listed(provider, tmp_path))["tuned"].description == "Use for retuned work"
    assert await provider.changed(cwd=tmp_path) is False


async def test_a_change_another_turn_was_told_of_during_a_listing_is_not_lost(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two agents share the provider: while one lists again (the read done, its listing not yet
    # stored), the other's turn reads the watch's events. The new listing must still see them.
    path = write_skill(root, "shared")
    await listed_watched(provider, tmp_path)
    read_done = threading.Event()
    resume = threading.Event()

    def paused_scan(*args: Any) -> Any:
        result = real_scan(*args)
        read_done.set()
        assert resume.wait(30), "the test never resumed the listing"
        return result

    real_scan = provider_module.scan
    monkeypatch.setattr(provider_module, "scan", paused_scan)  # a pause, the real scan
    async with anyio.create_task_group() as group:
        group.start_soon(listed, provider, tmp_path)
        assert await anyio.to_thread.run_sync(read_done.wait, 30)
        edit_in_place(path, "Use for shared work", "Changed after the read")
        assert await provider.changed(cwd=tmp_path) is True  # the old listing: told
        resume.set()
    assert await provider.changed(cwd=tmp_path) is True  # the new one read before the change
