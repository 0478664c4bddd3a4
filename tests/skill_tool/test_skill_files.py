"""The skill tool over real skill folders (tether-skills-fs): what load_skill hands the model,
and a hostile root that must not hide the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether_skill_tool
import tether_skills_fs
from tether.models import FunctionModel, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import MemoryStore

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["skills-fs", "skill-tool"]

[plugin.skills-fs]
roots = ["skills"]
project = false
user = false

[plugin.skill-tool]
body_max_chars = {body_max}

[agent.main]
model = "scripted:none.toml"
"""


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    folder.mkdir()
    return folder


def write(skills: Path, name: str, body: str) -> Path:
    path = skills / name / "SKILL.md"
    path.parent.mkdir()
    path.write_text(f"---\nname: {name}\ndescription: Use for {name}.\n---\n\n{body}\n")
    return path


async def run(tether_kernel, tmp_path: Path, *responses, prompt: str = "go", body_max=50_000):
    kernel = tether_kernel(
        PROFILE.format(body_max=body_max),
        {"skills-fs": tether_skills_fs, "skill-tool": tether_skill_tool.SkillToolPlugin},
    )
    queue = list(responses)
    model = FunctionModel(lambda request: queue.pop(0) if queue else "done")
    agent = await compose_agent(kernel, MemoryStore(), model=model)
    async with agent:
        await agent.run(prompt)
    return agent, model


def load(name: str) -> ModelResponse:
    call = ToolCall(id="c1", name="load_skill", arguments={"name": name})
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")


async def test_load_skill_lists_the_bundled_files_and_fills_in_base_dir(
    tether_kernel, tmp_path: Path, skills: Path
) -> None:
    path = write(skills, "pdf-forms", "Run `python {baseDir}/scripts/fill.py`.")
    (path.parent / "scripts").mkdir()
    (path.parent / "scripts" / "fill.py").write_text("print()")
    (path.parent / "reference.md").write_text("# Reference")
    agent, _ = await run(tether_kernel, tmp_path, load("pdf-forms"))
    result = next(m for m in agent.messages if m.role == "tool")
    assert result.content == "\n".join(
        [
            '<skill_content name="pdf-forms">',
            "<skill_resources>",
            f"Base directory for this skill: {path.parent}",
            "Resolve relative paths mentioned by this skill against the base directory before "
            "using them. Load referenced resources only as needed.",
            "Files bundled with this skill (relative to the base directory):",
            "- reference.md",
            "- scripts/fill.py",
            "Files: skills/pdf-forms/ (in your workspace; read them with your file tools)",
            "</skill_resources>",
            "",
            "<skill_instructions>",
            f"Run `python {path.parent}/scripts/fill.py`.",
            "</skill_instructions>",
            "</skill_content>",
        ]
    )


async def test_load_skill_and_the_gesture_cut_a_long_body_at_the_setting(
    tether_kernel, tmp_path: Path, skills: Path
) -> None:
    body = "\n".join(f"Step {n}." for n in range(1, 200))
    path = write(skills, "long", body)
    agent, model = await run(
        tether_kernel, tmp_path, load("long"), prompt="/long please", body_max=100
    )
    result = next(m for m in agent.messages if m.role == "tool")
    gesture = next(
        m for m in model.requests[0].messages if '<skill_content name="long">' in m.content
    )
    for content in (result.content, gesture.content):
        assert "Step 12.\n</skill_instructions>" in content
        assert "Step 13." not in content
        assert (
            f"characters of this skill's instructions are shown. The rest is in {path}, from "
            "line 18 of 204: read it from there when the task needs it."
        ) in content


async def test_a_symlink_loop_in_the_root_does_not_hide_the_catalog(
    tether_kernel, tmp_path: Path, skills: Path
) -> None:
    (skills / "loop").symlink_to(skills / "loop")
    write(skills, "review", "Review carefully.")
    _agent, model = await run(tether_kernel, tmp_path)
    catalog = model.requests[0].messages[-1].content
    assert "<available_skills>\n- `review`: Use for review.\n</available_skills>" in catalog
