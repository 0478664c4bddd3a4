"""Skills added or removed on disk reach the catalog at the agent's next turn (tether-skills-fs
watching its root folders, the skill tool asking at the start of each turn)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import tether_skill_tool
import tether_skills_fs
from tether.models import FunctionModel
from tether.runtime import compose_agent
from tether.store import MemoryStore

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["skills-fs", "skill-tool"]

[plugin.skills-fs]
roots = ["{root}"]
project = false
user = false

[agent.main]
model = "scripted:none.toml"
"""


def write(root: Path, name: str) -> None:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: Use for {name}.\n---\n\nDo {name}.\n")


def age(root: Path) -> None:
    """Everything under ``root`` a minute old, so its folder's time is trusted."""
    stamp = time.time_ns() - 60 * 10**9
    for item in [*sorted(root.rglob("*"), reverse=True), root]:
        os.utime(item, ns=(stamp, stamp))


def catalog_names(text: str) -> list[str]:
    return [line.split("`")[1] for line in text.splitlines() if line.startswith("- `")]


async def test_a_skill_added_then_removed_on_disk_changes_the_next_turns_catalog(
    tether_kernel, tmp_path: Path
) -> None:
    root = tmp_path / "skills"
    write(root, "first")
    age(root)
    kernel = tether_kernel(
        PROFILE.format(root=root),
        {"skills-fs": tether_skills_fs, "skill-tool": tether_skill_tool.SkillToolPlugin},
    )
    model = FunctionModel(lambda request: "done")
    agent = await compose_agent(kernel, MemoryStore(), model=model)
    async with agent:
        await agent.run("one")
        assert catalog_names(model.requests[-1].messages[-1].content) == ["first"]
        write(root, "second")
        await agent.run("two")
        assert catalog_names(model.requests[-1].messages[-1].content) == ["first", "second"]
        await agent.run("three")  # nothing changed: nothing appended
        assert model.requests[-1].messages[-1].content == "three"
        shutil.rmtree(root / "first")
        await agent.run("four")
        assert catalog_names(model.requests[-1].messages[-1].content) == ["second"]
