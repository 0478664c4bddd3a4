"""A loaded skill's bundled files appear in the loading agent's workspace (``skills/<name>/``),
never in the prompt and nowhere else; written atomically, idempotently, within caps; through
scripted runs over real folders (tether-skills-fs, tether-skill-tool)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tether_skill_tool
import tether_skills_fs
from tether.errors import ErrorCode, WorkspaceError
from tether.models import FunctionModel, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.testing import make_kernel, write_profile
from tether.workspaces import (
    SKILL_FILE_MAX_BYTES,
    SKILL_MARKER,
    install_skill_files,
)

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["skills-fs", "skill-tool"]

[plugin.skills-fs]
roots = ["skills"]
project = false
user = false

[agent.main]
model = "scripted:none.toml"
"""

#: A line only the skill's reference holds.
UNIQUE = "the field names are in column B (unique-line-9313)"


def load(name: str, number: int = 1) -> ModelResponse:
    call = ToolCall(id=f"l{number}", name="load_skill", arguments={"name": name})
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    skill = tmp_path / "skills" / "pdf-forms"
    (skill / "references").mkdir(parents=True)
    (skill / "scripts").mkdir()
    (skill / "SKILL.md").write_text(
        "---\nname: pdf-forms\ndescription: Use for PDF forms.\n---\n\nRead the reference.\n"
    )
    (skill / "references" / "fields.md").write_text(UNIQUE + "\n")
    (skill / "scripts" / "fill.py").write_text("print('filled')\n")
    write_profile(tmp_path, PROFILE)
    return tmp_path


@pytest.fixture
async def runtime(project: Path):
    store = SQLiteStore(project / ".tether" / "sessions.db")
    kernel = make_kernel(
        project / "tether.toml",
        {"skills-fs": tether_skills_fs, "skill-tool": tether_skill_tool.SkillToolPlugin},
    )
    yield Runtime(kernel, store)
    await store.aclose()


async def session(runtime: Runtime, *responses: ModelResponse):
    queue = list(responses)
    model = FunctionModel(lambda request: queue.pop(0) if queue else "done")
    agent = await runtime.compose(agent="main", model=model)
    async with agent:
        await agent.run("go")
    return agent, model


async def test_a_loaded_skills_files_are_in_its_workspace_and_nowhere_else(runtime, project):
    loader, model = await session(runtime, load("pdf-forms"))
    other, _ = await session(runtime)
    folder = loader.workspace.root / "skills" / "pdf-forms"
    assert (folder / "references" / "fields.md").read_text() == UNIQUE + "\n"
    assert (folder / "scripts" / "fill.py").read_text() == "print('filled')\n"
    assert not (other.workspace.root / "skills").exists()
    # Only the skill's own folder and the loader's workspace hold the reference's text.
    holders = sorted(
        path.relative_to(project)
        for path in project.rglob("*")
        if path.is_file() and UNIQUE.encode() in path.read_bytes() and path.suffix != ".db"
    )
    assert holders == sorted(
        [
            Path("skills/pdf-forms/references/fields.md"),
            (folder / "references" / "fields.md").relative_to(project),
        ]
    )
    # The prompt is told where they are, never what they say.
    (result,) = [m.content for m in loader.messages if m.role == "tool"]
    assert "Files: skills/pdf-forms/ (in your workspace" in result
    assert all(UNIQUE not in m.content for r in model.requests for m in r.messages)


async def test_loading_a_skill_again_writes_nothing_new(runtime):
    agent, _ = await session(runtime, load("pdf-forms", 1), load("pdf-forms", 2))
    skills = agent.workspace.root / "skills"
    assert sorted(p.name for p in skills.iterdir()) == ["pdf-forms"]  # no staging left over
    marker = (skills / "pdf-forms" / SKILL_MARKER).read_text()
    assert len(marker.strip()) == 64


async def test_a_changed_skill_replaces_its_files(runtime, project):
    agent, _ = await session(runtime, load("pdf-forms"))
    skill = project / "skills" / "pdf-forms"
    (skill / "scripts" / "fill.py").unlink()
    (skill / "references" / "fields.md").write_text("new\n")
    queue = [load("pdf-forms", 2)]
    model = FunctionModel(lambda request: queue.pop(0) if queue else "done")
    again = await runtime.compose(session_id=agent.session_id, model=model)
    async with again:
        await again.run("again")
    folder = again.workspace.root / "skills" / "pdf-forms"
    assert (folder / "references" / "fields.md").read_text() == "new\n"
    assert not (folder / "scripts").exists()


# ------------------------------------------------------------------ the writer


def test_paths_that_would_leave_the_skills_folder_are_left_out(tmp_path: Path):
    outside = tmp_path / "outside.txt"
    target = install_skill_files(
        tmp_path / "ws",
        "pdf-forms",
        [
            ("../outside.txt", b"x"),
            ("/etc/evil", b"x"),
            ("a/../../b", b"x"),
            (SKILL_MARKER, b"forged"),
            ("ok/file.txt", b"kept"),
        ],
    )
    assert not outside.exists()
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == [
        SKILL_MARKER,
        "ok/file.txt",
    ]


def test_a_link_in_place_of_the_skills_folder_is_not_written_through(tmp_path: Path):
    workspace = tmp_path / "ws"
    elsewhere = tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / "skills").symlink_to(elsewhere)
    install_skill_files(workspace, "pdf-forms", [("a.md", b"a")])
    assert list(elsewhere.iterdir()) == []
    assert not os.path.islink(workspace / "skills")
    assert (workspace / "skills" / "pdf-forms" / "a.md").read_bytes() == b"a"


def test_files_over_the_cap_are_left_out(tmp_path: Path):
    target = install_skill_files(
        tmp_path, "big", [("big.bin", b"x" * (SKILL_FILE_MAX_BYTES + 1)), ("small.txt", b"s")]
    )
    assert not (target / "big.bin").exists()
    assert (target / "small.txt").read_bytes() == b"s"


def test_a_name_that_is_not_a_skill_name_is_refused(tmp_path: Path):
    with pytest.raises(WorkspaceError) as info:
        install_skill_files(tmp_path, "../escape", [("a", b"a")])
    assert info.value.code is ErrorCode.WORKSPACE_INVALID
    assert list(tmp_path.iterdir()) == []
