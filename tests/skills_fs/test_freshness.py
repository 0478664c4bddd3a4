"""Changes on disk are seen without a restart; a failed read is never cached as the truth."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import cast

import pytest

from tether.skills import SkillRegistry
from tether_skills_fs import FileSystemSkillProvider, Settings

from .conftest import listed, observe, write_flat, write_skill

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "skills"


@pytest.fixture(params=[True, False], ids=["watched", "unwatched"])
def provider(root: Path, request: pytest.FixtureRequest) -> FileSystemSkillProvider:
    """Told of changes (inotify, where there is one) and looking for them: both see them."""
    settings = Settings(roots=(root,), project=False, user=False)
    return FileSystemSkillProvider(settings, watch=cast(bool, request.param))


@pytest.fixture
def registry(provider: FileSystemSkillProvider) -> SkillRegistry:
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)
    return registry


async def test_an_edited_body_is_seen_by_get_without_invalidation(
    registry: SkillRegistry, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "notes")
    first = await registry.get("notes", cwd=tmp_path)
    assert first is not None
    assert "The notes instructions." in first.content
    path.write_text(path.read_text().replace("The notes instructions.", "Edited instructions."))
    again = await registry.get("notes", cwd=tmp_path)
    assert again is not None
    assert again.content == "# notes\n\nEdited instructions."


async def test_a_vanished_skill_gets_none(
    provider: FileSystemSkillProvider, registry: SkillRegistry, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "packaged")
    write_flat(root, "flat.md", "# A flat skill")
    found = await listed(provider, tmp_path)
    await registry.list(cwd=tmp_path)
    shutil.rmtree(root / "packaged")
    (root / "flat.md").unlink()
    assert await provider.get(found["packaged"], cwd=tmp_path) is None
    assert await provider.get(found["flat"], cwd=tmp_path) is None
    assert await registry.get("packaged", cwd=tmp_path) is None


async def test_a_skill_that_became_invalid_gets_none_with_a_warning(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = write_skill(root, "fragile")
    candidate = (await listed(provider, tmp_path))["fragile"]
    path.write_text("---\nname: fragile\n---\nno description any more")
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        assert await provider.get(candidate, cwd=tmp_path) is None
    assert f"skill {path} is no longer loadable: its description is missing" in caplog.text


async def test_a_renamed_skill_is_dropped_by_the_registry_on_get(
    registry: SkillRegistry, root: Path, tmp_path: Path
) -> None:
    path = write_skill(root, "before")
    await registry.list(cwd=tmp_path)
    path.write_text(path.read_text().replace("name: before", "name: after"))
    revision = registry.revision
    assert await registry.get("before", cwd=tmp_path) is None
    assert registry.revision > revision  # the provider's listing was invalidated


async def test_changed_is_false_until_something_changes(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "steady")
    assert await provider.changed(cwd=tmp_path) is False  # never listed: nothing is stale
    await provider.list(cwd=tmp_path)
    assert await provider.changed(cwd=tmp_path) is False
    assert await provider.changed(cwd=tmp_path) is False


@pytest.mark.parametrize("change", ["add", "edit", "remove", "add-skill-file", "remove-root"])
async def test_changed_notices_each_kind_of_change(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, change: str
) -> None:
    # Everything here was written just now, so the root folder's time is within the
    # granularity of the listing: the root is compared entry by entry, and even an edit in place
    # is seen on the next call. What a call sees of an older root, and what waits for the full
    # check, is in test_change_detection.py.
    path = write_skill(root, "existing")
    (root / "not-yet").mkdir()
    await provider.list(cwd=tmp_path)
    if change == "add":
        write_skill(root, "added")
    elif change == "edit":
        path.write_text(path.read_text().replace("Use for existing work", "A new description"))
    elif change == "remove":
        shutil.rmtree(root / "existing")
    elif change == "add-skill-file":
        write_skill(root, "not-yet")
    else:
        shutil.rmtree(root)
    assert await provider.changed(cwd=tmp_path) is True


async def test_an_added_skill_is_listed_after_a_refresh(
    registry: SkillRegistry, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "first")
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["first"]
    write_skill(root, "second")
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["first"]  # cached
    assert await registry.refresh(cwd=tmp_path) is True
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["first", "second"]
    assert await registry.refresh(cwd=tmp_path) is False


async def test_a_root_created_after_the_first_listing_is_noticed(
    registry: SkillRegistry, root: Path, tmp_path: Path
) -> None:
    assert (await registry.list(cwd=tmp_path)).summaries == ()
    write_skill(root, "late")
    assert await registry.refresh(cwd=tmp_path) is True
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["late"]


async def test_a_root_that_is_a_symlink_loop_is_skipped_and_the_listing_stays_complete(
    provider: FileSystemSkillProvider,
    registry: SkillRegistry,
    root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A loop stays until someone fixes the link: a permanent problem, not a transient one.
    root.symlink_to(root)
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        observation = await observe(provider, tmp_path)
    assert (observation.candidates, observation.complete) == ((), True)
    assert [(s.path, s.reason) for s in observation.skipped] == [
        (
            str(root),
            "it is a symlink loop (a link that leads back to itself); fix the link, or point "
            "the root elsewhere",
        )
    ]
    assert "permissions" not in caplog.text
    assert (await registry.list(cwd=tmp_path)).complete
    root.unlink()
    write_skill(root, "recovered")
    assert await registry.refresh(cwd=tmp_path) is True  # the fingerprint saw the fix
    assert [s.name for s in (await registry.list(cwd=tmp_path)).summaries] == ["recovered"]


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
async def test_an_io_error_on_a_skill_file_keeps_its_siblings_but_is_incomplete(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    # /proc/self/mem is a regular file whose first byte cannot be read (EIO), even as root:
    # a real I/O error, which may pass, so the listing must not be cached as the truth.
    write_skill(root, "sibling")
    failing = root / "failing" / "SKILL.md"
    failing.parent.mkdir()
    failing.symlink_to("/proc/self/mem")
    observation = await observe(provider, tmp_path)
    assert [c.name for c in observation.candidates] == ["sibling"]
    assert observation.complete is False
    [skipped] = observation.skipped
    assert skipped.name == "failing"
    assert skipped.reason.startswith("it could not be read (")
    assert skipped.reason.endswith(
        "check its permissions; it is missing from this catalog until it can be read"
    )


async def test_a_permission_error_on_a_root_is_transient(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tether_skills_fs._scan as scan_module

    write_skill(root, "kept-out")
    real = scan_module.os.scandir

    def scandir(path: object) -> object:
        if Path(str(path)) == root:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(scan_module.os, "scandir", scandir)
    observation = await observe(provider, tmp_path)
    assert (observation.candidates, observation.complete) == ((), False)
