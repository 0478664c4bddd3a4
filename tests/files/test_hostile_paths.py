"""Hostile paths against the file tools: ``..``, absolute paths, symbolic links out (to /etc, in
chains, in the middle of a path, as the last component), ``/proc/self/root``, hard links and NUL
characters. Each is refused with ``PATH_OUTSIDE_WORKSPACE`` (or, for a hard link, a refused
write), the model reads why, and nothing outside the workspace is read or written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.errors import ErrorCode

from .conftest import call

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(os.name != "posix", reason="symbolic and hard links, /proc"),
]

SECRET = "top secret\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


def hostile(outside: Path):
    def prepare(root: Path) -> None:
        (root / "notes.txt").write_text("inside\n")
        (root / "to-etc").symlink_to("/etc")
        (root / "to-secret").symlink_to(outside / "secret.txt")
        (root / "chain-1").symlink_to("chain-2")
        (root / "chain-2").symlink_to("chain-3")
        (root / "chain-3").symlink_to(outside)
        (root / "to-proc").symlink_to("/proc/self/root")
        (root / "loop-a").symlink_to("loop-b")
        (root / "loop-b").symlink_to("loop-a")
        (root / "inner").symlink_to("notes.txt")  # a link that stays inside is fine
        os.link(outside / "secret.txt", root / "linked.txt")

    return prepare


OUTSIDE_READS = [
    ("../outside/secret.txt", "leaves the workspace"),
    ("../../../../../../etc/passwd", "leaves the workspace"),
    ("/etc/passwd", "leaves the workspace"),
    ("to-etc/passwd", "leads through a symbolic link out of the workspace"),
    ("to-secret", "leads through a symbolic link out of the workspace"),
    ("chain-1/secret.txt", "leads through a symbolic link out of the workspace"),
    ("/proc/self/root/etc/passwd", "goes through /proc, whose links lead anywhere"),
    ("to-proc/etc/passwd", "goes through /proc, whose links lead anywhere"),
    ("loop-a", "more than 40 symbolic links"),
    ("notes\0.txt", "contains a NUL character"),
]


@pytest.mark.parametrize(("path", "why"), OUTSIDE_READS)
async def test_reading_outside_the_workspace_is_refused(files_run, outside, path, why):
    run = await files_run(
        [
            call("read_file", 1, path=path),
            call("list_files", 2, path=path),
            call("search_files", 3, pattern="secret|root", path=path),
        ],
        prepare=hostile(outside),
    )
    for result in run.results:
        assert result.is_error
        assert why in result.content
        assert result.content.endswith(f"[{ErrorCode.PATH_OUTSIDE_WORKSPACE}]")
        assert SECRET.strip() not in result.content
        assert "root:x:0" not in result.content


async def test_the_refusal_names_the_path_the_root_and_the_fix(files_run, outside):
    run = await files_run([call("read_file", 1, path="../outside/secret.txt")])
    (text,) = run.texts
    root = run.root
    assert text == (
        f'error: path "../outside/secret.txt" leaves the workspace {root} (it resolves to '
        f"{outside / 'secret.txt'}); use a path inside it, relative to the workspace, such as "
        "notes/todo.md [PATH_OUTSIDE_WORKSPACE]"
    )


@pytest.mark.parametrize(
    "path", ["../outside/planted.txt", "/tmp/planted.txt", "to-etc/planted", "chain-1/planted.txt"]
)
async def test_writing_outside_the_workspace_is_refused_and_nothing_is_written(
    files_run, outside, path
):
    run = await files_run(
        [
            call("write_file", 1, path=path, content="planted"),
            call("edit_file", 2, path="to-secret", old_string="top", new_string="no"),
        ],
        prepare=hostile(outside),
    )
    assert all(m.is_error and "[PATH_OUTSIDE_WORKSPACE]" in m.content for m in run.results)
    assert not (outside / "planted.txt").exists()
    assert not Path("/tmp/planted.txt").exists()
    assert (outside / "secret.txt").read_text() == SECRET


async def test_a_hard_linked_file_may_be_read_but_not_written(files_run, outside):
    run = await files_run(
        [
            call("read_file", 1, path="linked.txt"),
            call("write_file", 2, path="linked.txt", content="overwritten"),
            call("edit_file", 3, path="linked.txt", old_string="top", new_string="no"),
        ],
        prepare=hostile(outside),
    )
    read, write, edit = run.texts
    assert read == "     1\ttop secret"
    reason = (
        "the file has 2 hard links; a hard link can reach a file outside the allowed folders, "
        "so files with more than one are refused"
    )
    assert write == f'error: "linked.txt" was not written: {reason}'
    assert edit == f'error: "linked.txt" was not edited: {reason}'
    assert (outside / "secret.txt").read_text() == SECRET
    assert (run.root / "linked.txt").read_text() == SECRET


async def test_links_that_stay_inside_are_followed_and_listed_not_entered(files_run, outside):
    run = await files_run(
        [
            call("read_file", 1, path="inner"),
            call("list_files", 2),
            call("search_files", 3, pattern="secret|inside"),
            call("list_files", 4, glob="**/*.txt"),
        ],
        prepare=hostile(outside),
    )
    inner, listing, found, globbed = run.texts
    assert inner == "     1\tinside"
    assert "to-etc -> /etc" in listing
    assert "chain-3 -> " in listing
    # Searching and globbing walk the workspace without entering links (to-etc, chain-3).
    assert found == "linked.txt:1: top secret\nnotes.txt:1: inside"
    assert globbed == "[the workspace, files matching **/*.txt]\nlinked.txt\nnotes.txt"


async def test_writing_through_a_link_swapped_in_as_the_last_component_is_refused(
    files_run, outside
):
    def prepare(root: Path) -> None:
        (root / "report.txt").symlink_to(outside / "secret.txt")

    run = await files_run(
        [call("write_file", 1, path="report.txt", content="overwritten")], prepare=prepare
    )
    assert run.results[0].is_error
    assert "[PATH_OUTSIDE_WORKSPACE]" in run.texts[0]
    assert (outside / "secret.txt").read_text() == SECRET
