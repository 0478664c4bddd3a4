"""``read_skill_file``: the model reads a loaded skill's bundled files, confined to the skill's
folder, size-capped, hostile files refused as skills-fs refuses them; through scripted runs over
real folders (tether-skills-fs)."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path

import pytest

import tether_skill_tool
import tether_skills_fs
from tether.models import FunctionModel, Message, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import MemoryStore

pytestmark = pytest.mark.anyio

SUPERPOWERS = Path("/work/shared/corpora/superpowers/skills")
#: The first bytes of a 1x1 PNG (enough for the type to be told by its signature).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)

PROFILE = """
[tether]
plugins = ["skills-fs", "skill-tool"]

[plugin.skills-fs]
roots = ["skills"]
project = false
user = false

[plugin.skill-tool]
{tool_settings}

[agent.main]
model = "scripted:none.toml"
"""


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    folder.mkdir()
    return folder


def write(skills: Path, name: str, body: str = "Follow the reference.") -> Path:
    """``skills/NAME/SKILL.md``; returns the skill's folder."""
    path = skills / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: Use for {name}.\n---\n\n{body}\n")
    return path.parent


def read(skill: str, path: str, number: int = 1) -> ModelResponse:
    arguments = {"skill": skill, "path": path}
    call = ToolCall(id=f"r{number}", name="read_skill_file", arguments=arguments)
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")


async def run(tether_kernel, *responses: ModelResponse, tool_settings: str = "") -> list[Message]:
    kernel = tether_kernel(
        PROFILE.format(tool_settings=tool_settings),
        {"skills-fs": tether_skills_fs, "skill-tool": tether_skill_tool.SkillToolPlugin},
    )
    queue = list(responses)
    model = FunctionModel(lambda request: queue.pop(0) if queue else "done")
    agent = await compose_agent(kernel, MemoryStore(), model=model)
    async with agent:
        await agent.run("go")
    assert [t.name for t in model.requests[0].tools] == ["load_skill", "read_skill_file"]
    return [m for m in agent.messages if m.role == "tool"]


async def results(tether_kernel, *calls: tuple[str, str], tool_settings: str = "") -> list[str]:
    responses = [read(skill, path, n) for n, (skill, path) in enumerate(calls)]
    return [m.content for m in await run(tether_kernel, *responses, tool_settings=tool_settings)]


async def test_the_model_reads_a_bundled_reference_after_loading_the_skill(
    tether_kernel, skills: Path
) -> None:
    folder = write(skills, "pdf-forms", "Read references/fields.md first.")
    (folder / "references").mkdir()
    (folder / "references" / "fields.md").write_text("# Fields\n\nName, date, signature.\n")
    load = ToolCall(id="l1", name="load_skill", arguments={"name": "pdf-forms"})
    messages = await run(
        tether_kernel,
        ModelResponse(tool_calls=(load,), finish_reason="tool_calls"),
        read("pdf-forms", "references/fields.md"),
        read("pdf-forms", "./references//fields.md", 2),
    )
    assert "- references/fields.md" in messages[0].content
    expected = (
        '<skill_file name="pdf-forms" path="references/fields.md">\n'
        "# Fields\n\nName, date, signature.\n"
        "</skill_file>"
    )
    assert messages[1].content == expected
    assert messages[2].content == expected


@pytest.mark.skipif(not SUPERPOWERS.is_dir(), reason="the superpowers corpus is not here")
async def test_every_bundled_file_of_a_real_collection_can_be_read(
    tether_kernel, skills: Path
) -> None:
    shutil.rmtree(skills)
    shutil.copytree(SUPERPOWERS, skills)
    files = [
        (p.parent.name if p.parent.parent == skills else p.relative_to(skills).parts[0], p)
        for p in sorted(skills.rglob("*.md"))
        if p.name != "SKILL.md"
    ]
    assert len(files) >= 10
    calls = [(skill, path.relative_to(skills / skill).as_posix()) for skill, path in files]
    contents = await results(tether_kernel, *calls)
    for (_skill, path), content in zip(files, contents, strict=True):
        assert content.endswith(path.read_text(encoding="utf-8") + "</skill_file>"), path


async def test_paths_that_leave_the_skill_are_refused(tether_kernel, skills: Path) -> None:
    write(skills, "notes")
    write(skills, "other", "Other secrets.")
    contents = await results(
        tether_kernel,
        ("notes", "../other/SKILL.md"),
        ("notes", "references/../../other/SKILL.md"),
        ("notes", "/etc/passwd"),
        ("notes", "C:/Windows/win.ini"),
        ("notes", "scripts\\run.py"),
        ("notes", ""),
        ("notes", "."),
    )
    assert contents == [
        'error: file "../other/SKILL.md" of skill "notes" is refused: it leaves the skill\'s '
        "folder (..); give a path inside the skill's folder, as load_skill lists them",
        'error: file "references/../../other/SKILL.md" of skill "notes" is refused: it leaves '
        "the skill's folder (..); give a path inside the skill's folder, as load_skill lists "
        "them",
        'error: file "/etc/passwd" of skill "notes" is refused: it is an absolute path; give a '
        "path relative to the skill's folder, as load_skill lists them",
        'error: file "C:/Windows/win.ini" of skill "notes" is refused: it is an absolute path; '
        "give a path relative to the skill's folder, as load_skill lists them",
        'error: file "scripts\\\\run.py" of skill "notes" is refused: it uses \\ between folders; '
        "write / between folders, as load_skill lists them",
        'error: file "" of skill "notes" is refused: it is empty; give a path relative to the '
        "skill's folder, as load_skill lists them",
        'error: file "." of skill "notes" is refused: it names the skill\'s folder, not a file; '
        "give a path relative to the skill's folder, as load_skill lists them",
    ]


async def test_links_out_of_the_skill_are_refused_and_links_inside_it_are_read(
    tether_kernel, tmp_path: Path, skills: Path
) -> None:
    folder = write(skills, "notes")
    write(skills, "other")
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret")
    (folder / "references").mkdir()
    (folder / "references" / "real.md").write_text("Real.")
    (folder / "leak.md").symlink_to(secret)
    (folder / "sibling").symlink_to(skills / "other")
    (folder / "alias.md").symlink_to("references/real.md")
    contents = await results(
        tether_kernel, ("notes", "leak.md"), ("notes", "sibling/SKILL.md"), ("notes", "alias.md")
    )
    assert contents[0] == (
        f'error: file "leak.md" of skill "notes" is refused: it leads outside the skill\'s '
        f"folder (to {secret}); read only the skill's own files"
    )
    assert contents[1].startswith(
        'error: file "sibling/SKILL.md" of skill "notes" is refused: it leads outside'
    )
    assert contents[2] == '<skill_file name="notes" path="alias.md">\nReal.\n</skill_file>'
    assert "secret" not in "".join(contents[1:])


async def test_hostile_files_are_refused_as_skills_fs_refuses_them(
    tether_kernel, skills: Path
) -> None:
    folder = write(skills, "hostile")
    os.mkfifo(folder / "pipe.md")
    (folder / "zero.md").symlink_to("/dev/zero")
    (folder / "loop.md").symlink_to(folder / "loop.md")
    with (folder / "huge.md").open("wb") as file:
        file.truncate(10 * 1024**3)  # sparse: 10 GiB that take no room
    (folder / "references").mkdir()
    contents = await results(
        tether_kernel,
        ("hostile", "pipe.md"),
        ("hostile", "zero.md"),
        ("hostile", "loop.md"),
        ("hostile", "huge.md"),
        ("hostile", "references"),
        ("hostile", "missing.md"),
    )
    prefix = 'error: file "{}" of skill "hostile" is refused: '
    assert contents == [
        prefix.format("pipe.md") + "it is a FIFO (named pipe), not a regular file; only regular "
        "files are read",
        prefix.format("zero.md") + "it leads outside the skill's folder (to /dev/zero); read only "
        "the skill's own files",
        prefix.format("loop.md")
        + "it is a symlink loop (a link that leads back to itself); fix or remove the link",
        prefix.format("huge.md") + "it is 10,737,418,240 bytes, over the cap of 100,000 bytes "
        "(file_max_bytes in [plugin.skill-tool]); read a smaller file, or ask the user to raise "
        "the cap",
        prefix.format("references") + "it is a folder, not a regular file; name a file in it, "
        "as load_skill lists them",
        'error: skill "hostile" has no file "missing.md"; load_skill lists its files',
    ]


async def test_the_cap_is_a_setting(tether_kernel, skills: Path) -> None:
    folder = write(skills, "sized")
    (folder / "ten.md").write_text("0123456789")
    (folder / "eleven.md").write_text("0123456789A")
    contents = await results(
        tether_kernel,
        ("sized", "ten.md"),
        ("sized", "eleven.md"),
        tool_settings="file_max_bytes = 10",
    )
    assert contents[0] == '<skill_file name="sized" path="ten.md">\n0123456789\n</skill_file>'
    assert contents[1].startswith(
        'error: file "eleven.md" of skill "sized" is refused: it is 11 bytes, over the cap of '
        "10 bytes (file_max_bytes in [plugin.skill-tool])"
    )


async def test_binary_files_are_refused_and_images_are_shown(tether_kernel, skills: Path) -> None:
    folder = write(skills, "assets")
    (folder / "logo.png").write_bytes(PNG)
    (folder / "tool.bin").write_bytes(b"\x00\x01\x02\xffELF")
    (folder / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    messages = await run(
        tether_kernel,
        read("assets", "logo.png"),
        read("assets", "tool.bin", 2),
        read("assets", "latin1.txt", 3),
    )
    image, binary, latin = messages
    assert image.content == (
        f'<skill_file name="assets" path="logo.png">\n(an image, image/png, {len(PNG)} bytes: '
        "attached)\n</skill_file>"
    )
    assert [(i.mime_type, base64.b64decode(i.data)) for i in image.images] == [("image/png", PNG)]
    assert binary.content == (
        'error: file "tool.bin" of skill "assets" is refused: it is a binary file (7 bytes, not '
        "UTF-8 text); this tool reads text files and PNG, JPEG, GIF or WebP images"
    )
    assert latin.content.startswith('error: file "latin1.txt" of skill "assets" is refused: it is')


async def test_unknown_skills_and_flat_skills(tether_kernel, skills: Path) -> None:
    (skills / "flat.md").write_text("---\nname: flat\ndescription: A flat one.\n---\n\nBody.\n")
    write(skills, "hidden").joinpath("SKILL.md").write_text(
        "---\nname: hidden\ndescription: Not for the model.\ndisable-model-invocation: true\n"
        "---\n\nBody.\n"
    )
    (skills / "hidden" / "notes.md").write_text("Notes.")
    contents = await results(
        tether_kernel,
        ("Bad Name", "x.md"),
        ("nobody", "x.md"),
        ("flat", "other.md"),
        ("hidden", "notes.md"),
    )
    assert contents == [
        'error: invalid skill name "Bad Name"',
        'error: skill "nobody" is unknown or no longer available',
        'error: file "other.md" of skill "flat" is refused: a flat skill (NAME.md) has no '
        "folder of its own, so it bundles no files; make it a folder NAME/SKILL.md with its "
        "files beside it",
        'error: skill "hidden" is not available for model invocation',
    ]


async def test_the_tool_is_offered_only_when_a_provider_serves_files(tether_kernel) -> None:
    kernel = tether_kernel(
        "[tether]\nplugins = ['skill-tool']\n\n[agent.main]\nmodel = 'scripted:none.toml'\n",
        {"skill-tool": tether_skill_tool.SkillToolPlugin},
    )
    model = FunctionModel(lambda request: "done")
    agent = await compose_agent(kernel, MemoryStore(), model=model)
    async with agent:
        assert agent.runtime is not None
        agent.runtime.skills.register(
            {"name": "coded", "description": "In code.", "content": "Body."}
        )
        await agent.run("go")
    assert [t.name for t in model.requests[0].tools] == ["load_skill"]
