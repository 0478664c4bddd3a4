"""The kernel's confinement (``tether.ground``) on its own: what ``confine`` resolves and
refuses, and the check after opening that closes the check-then-use race."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import ErrorCode, WorkspaceError
from tether.ground import PathRefused, check_opened, confine, resolve_path, write_confined

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symbolic links, /proc")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "a.md").write_text("a\n")
    return folder.resolve()


def test_relative_absolute_and_round_trip_paths_inside_resolve(root: Path) -> None:
    assert confine("docs/a.md", root) == root / "docs" / "a.md"
    assert confine(str(root / "docs" / "a.md"), root) == root / "docs" / "a.md"
    assert confine("docs/../docs/./a.md", root) == root / "docs" / "a.md"
    assert confine(f"../{root.name}/new/file.txt", root) == root / "new" / "file.txt"
    assert confine(".", root) == root


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("..", "leaves the workspace"),
        ("docs/../../x", "leaves the workspace"),
        ("/etc/passwd", "leaves the workspace"),
        ("/proc/self/root/etc/passwd", "goes through /proc"),
        ("/proc/self/cwd/docs/a.md", "goes through /proc"),
        ("a\0b", "contains a NUL character"),
        ("half \ud800", "is not valid Unicode (a lone surrogate U+D800 at character 5)"),
    ],
)
def test_paths_that_leave_are_path_outside_workspace(root: Path, path: str, why: str) -> None:
    with pytest.raises(WorkspaceError) as caught:
        confine(path, root)
    assert caught.value.code == ErrorCode.PATH_OUTSIDE_WORKSPACE
    assert why in caught.value.message
    assert caught.value.remedy is not None


def test_a_link_in_the_middle_or_at_the_end_is_followed_before_the_check(root: Path) -> None:
    (root / "docs" / "up").symlink_to("../..")
    (root / "last").symlink_to("/etc/hostname")
    for path in ("docs/up/secret", "last"):
        with pytest.raises(WorkspaceError, match="leads through a symbolic link out of"):
            confine(path, root)
    assert resolve_path("docs/up", root) == root.parent


def test_a_folder_swapped_for_a_link_after_the_check_is_caught_once_open(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    checked = confine("docs", root)  # the check passes; then the folder is swapped
    (root / "docs").rename(root / "old-docs")
    (root / "docs").symlink_to(outside)
    fd = os.open(checked, os.O_RDONLY | os.O_DIRECTORY)  # followed: where the race leads
    try:
        with pytest.raises(PathRefused) as caught:
            check_opened(fd, (root,), "the folder")
        assert caught.value.outside
    finally:
        os.close(fd)
    with pytest.raises(WorkspaceError) as refused:
        write_confined(root, "docs/planted.txt", b"x")
    assert refused.value.code == ErrorCode.PATH_OUTSIDE_WORKSPACE
    assert list(outside.iterdir()) == []


COMPONENTS = ["..", ".", "docs", "a.md", "up", "loop", "out", "in", "missing", ""]


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A workspace with links of every kind: up and out of it, inside it, in a loop."""
    folder = tmp_path / "linked"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "a.md").write_text("a\n")
    (folder / "up").symlink_to("..")
    (folder / "out").symlink_to(tmp_path)
    (folder / "in").symlink_to("docs")
    (folder / "docs" / "loop").symlink_to("../docs/loop")
    return folder.resolve()


@settings(max_examples=300)
@given(st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=6), st.booleans())
def test_confine_agrees_with_the_kernel_and_never_lets_a_path_out(
    linked: Path, parts: list[str], absolute: bool
) -> None:
    path = "/".join(parts)
    if absolute:
        path = str(linked / path)
    try:
        resolved = confine(path, linked)
    except WorkspaceError as exc:
        refused = exc.code
    else:
        refused = None
    if refused is not None:
        assert refused == ErrorCode.PATH_OUTSIDE_WORKSPACE
        return
    assert resolved == linked or linked in resolved.parents
    try:
        real = Path(os.path.realpath(linked / path, strict=True))
    except OSError:
        return  # missing (kept as written) or a loop: nothing the kernel would open
    assert resolved == real
