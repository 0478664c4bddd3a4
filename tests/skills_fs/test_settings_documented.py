"""Every setting of the skill plugins is documented in its README, with its default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

import tether_skill_tool
import tether_skills_fs

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(
    ("settings", "readme"),
    [
        (tether_skills_fs.Settings, "providers/skills-fs/README.md"),
        (tether_skill_tool.Settings, "plugins/skill-tool/README.md"),
    ],
)
def test_every_setting_is_in_the_readme_with_its_default(
    settings: type[BaseModel], readme: str
) -> None:
    text = (ROOT / readme).read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in text.splitlines()
        if line.startswith("| `")
    }
    for name, field in settings.model_fields.items():
        assert f"`{name}`" in rows, f"{readme} does not document {name}"
        default = json.dumps(field.default if field.default != () else [])
        assert rows[f"`{name}`"].startswith(f"`{default}`"), (name, rows[f"`{name}`"])
