"""What ``get`` hands over besides the body: the files bundled with the skill, and the line of
the file the body starts on (so a body cut for the model can say where the rest is)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.skills import BundledFiles, SkillDefinition, render_skill_content
from tether_skills_fs import FileSystemSkillProvider, Settings
from tether_skills_fs._bundle import MAX_EXAMINED

from .conftest import listed, write_flat, write_skill

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "skills"


def provider_for(root: Path, **settings: int) -> FileSystemSkillProvider:
    return FileSystemSkillProvider(
        Settings(roots=(root,), project=False, user=False, **settings)  # type: ignore[arg-type]
    )


async def load(provider: FileSystemSkillProvider, name: str, cwd: Path) -> SkillDefinition:
    definition = await provider.get((await listed(provider, cwd))[name], cwd=cwd)
    assert definition is not None
    return definition


def touch(folder: Path, *names: str) -> None:
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")


async def test_the_files_beside_a_skill_are_listed_shallowest_first(
    root: Path, tmp_path: Path
) -> None:
    folder = write_skill(root, "pdf-forms").parent
    touch(folder, "reference.md", "LICENSE.txt", "scripts/fill.py", "scripts/lib/util.py")
    touch(folder, "references/forms.md", ".hidden", ".git/config", "scripts/__pycache__/a.pyc")
    definition = await load(provider_for(root), "pdf-forms", tmp_path)
    assert definition.bundled_files == BundledFiles(
        paths=(
            "LICENSE.txt",
            "reference.md",
            "references/forms.md",
            "scripts/fill.py",
            "scripts/lib/util.py",
        )
    )


async def test_the_listing_is_capped_and_counts_the_rest(root: Path, tmp_path: Path) -> None:
    folder = write_skill(root, "many").parent
    touch(folder, *(f"references/r{n:02d}.md" for n in range(12)))
    definition = await load(provider_for(root, max_bundled_files=5), "many", tmp_path)
    assert definition.bundled_files == BundledFiles(
        paths=tuple(f"references/r{n:02d}.md" for n in range(5)), omitted=7
    )


async def test_a_folder_too_big_to_walk_says_the_count_is_a_floor(
    root: Path, tmp_path: Path
) -> None:
    folder = write_skill(root, "vendored").parent
    (folder / "node_modules").mkdir()
    for n in range(MAX_EXAMINED + 10):
        (folder / "node_modules" / f"f{n:05d}").touch()
    definition = await load(provider_for(root, max_bundled_files=2), "vendored", tmp_path)
    files = definition.bundled_files
    assert files is not None
    assert files.more is True
    assert len(files.paths) == 2
    assert files.omitted > 0


async def test_links_are_followed_but_never_loop_and_odd_entries_are_left_out(
    root: Path, tmp_path: Path
) -> None:
    folder = write_skill(root, "linked").parent
    touch(folder, "docs/guide.md")
    (folder / "references").symlink_to(folder / "docs")
    (folder / "references" / "back").symlink_to(folder)  # a loop through the skill itself
    shared = tmp_path / "shared"
    touch(shared, "outside.md")
    (folder / "shared").symlink_to(shared)  # out of the skill: read_skill_file refuses it
    (folder / "leak.md").symlink_to(shared / "outside.md")
    (folder / "self").symlink_to(folder / "self")
    (folder / "broken").symlink_to(tmp_path / "nowhere")
    touch(folder, "bad\nname.md")
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "pipe")
    definition = await load(provider_for(root), "linked", tmp_path)
    assert definition.bundled_files == BundledFiles(paths=("docs/guide.md",))


async def test_no_listing_for_a_flat_skill_or_when_turned_off(root: Path, tmp_path: Path) -> None:
    write_flat(root, "flat.md", "# A flat skill")
    touch(write_skill(root, "packaged").parent, "scripts/run.sh")
    assert (await load(provider_for(root), "flat", tmp_path)).bundled_files is None
    off = provider_for(root, max_bundled_files=0)
    assert (await load(off, "packaged", tmp_path)).bundled_files is None
    assert (await load(provider_for(root), "packaged", tmp_path)).bundled_files == BundledFiles(
        paths=("scripts/run.sh",)
    )


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (b"---\nname: lines\ndescription: d\n---\n\n# Body\n", 6),
        (b"\xef\xbb\xbf\n\n---\r\nname: lines\r\ndescription: d\r\n---\r\n# Body\r\n", 7),
        (b"# Body first\n", 1),
        (b"\n\n\n# After blank lines\n", 4),
    ],
)
async def test_content_line_is_where_the_body_starts_in_the_file(
    root: Path, tmp_path: Path, raw: bytes, line: int
) -> None:
    path = write_flat(root, "lines.md", "")
    path.write_bytes(raw)
    definition = await load(provider_for(root), "lines", tmp_path)
    assert definition.content_line == line
    assert path.read_bytes().decode("utf-8-sig").splitlines()[line - 1].startswith("# ")


async def test_a_long_body_reaches_the_model_cut_with_the_line_to_read_from(
    root: Path, tmp_path: Path
) -> None:
    body = "\n".join(f"Step {n}: run {{baseDir}}/scripts/step{n}.sh" for n in range(1, 401))
    path = write_skill(root, "long", text=f"---\ndescription: Long\n---\n\n{body}\n")
    definition = await load(provider_for(root), "long", tmp_path)
    text = render_skill_content(definition, max_body_chars=1000)
    shown = text.split("<skill_instructions>\n", 1)[1].split("\n</skill_instructions>", 1)[0]
    last = shown.splitlines()[-1]
    assert last.startswith("Step ")
    assert last.endswith(".sh")
    assert f"run {path.parent}/scripts/step1.sh" in shown
    next_step = int(last.split()[1].rstrip(":")) + 1
    lines = path.read_text(encoding="utf-8").splitlines()
    line = next(n for n, content in enumerate(lines, 1) if content.startswith(f"Step {next_step}:"))
    assert f"The rest is in {path}, from line {line:,} of {len(lines):,}:" in text
