"""Real and generated collections of skills load whole, with the right winners."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tether.skills import SkillRegistry
from tether_skills_fs import FileSystemSkillProvider, Settings

from .conftest import observe, project_root, user_root

pytestmark = pytest.mark.anyio

SUPERPOWERS = Path("/work/shared/corpora/superpowers/skills")


@pytest.mark.skipif(not SUPERPOWERS.is_dir(), reason="the superpowers corpus is not here")
async def test_every_superpowers_skill_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FileSystemSkillProvider(Settings(roots=(SUPERPOWERS,), project=False, user=False))
    with caplog.at_level(logging.WARNING, logger="tether.skills.fs"):
        observation = await observe(provider, tmp_path)
    folders = sorted(p.name for p in SUPERPOWERS.iterdir() if (p / "SKILL.md").is_file())
    assert len(folders) == 14
    assert observation.complete
    assert [c.name for c in observation.candidates] == folders
    assert not caplog.records
    for candidate in observation.candidates:
        assert candidate.description.strip()
        assert candidate.source == "custom"
        definition = await provider.get(candidate, cwd=tmp_path)
        assert definition is not None
        assert definition.content.strip()
        assert not definition.content.startswith("---")


def _write(root: Path, name: str, origin: str, flat: bool) -> None:
    text = (
        f"---\nname: {name}\ndescription: {origin} copy of {name}, use it for task {name}\n"
        f"metadata:\n  origin: {origin}\n---\n\n# {name}\n\nSteps for {name}.\n"
    )
    if flat:
        (root / f"{name}.md").write_text(text, encoding="utf-8")
    else:
        (root / name).mkdir()
        (root / name / "SKILL.md").write_text(text, encoding="utf-8")


async def test_a_generated_corpus_over_three_roots_loads_with_the_right_winners(
    tmp_path: Path, home: Path, project: Path
) -> None:
    custom = tmp_path / "custom"
    layout = {
        project_root(project): range(0, 800),  # project: 0-799
        custom: range(500, 1300),  # custom: 500-1299
        user_root(home): range(0, 1400),  # user: everything, and 1300-1399 alone
    }
    for root, numbers in layout.items():
        root.mkdir(parents=True)
        for number in numbers:
            _write(root, f"skill-{number:04d}", root.name, flat=number % 3 == 0)
    provider = FileSystemSkillProvider(Settings(roots=(custom,)))
    registry = SkillRegistry()
    registry.register_provider(lambda control: provider, name=provider.name)

    catalog = await registry.list(cwd=project)

    assert catalog.complete
    assert sum(len(numbers) for numbers in layout.values()) == 3000
    expected = {
        **{f"skill-{n:04d}": "user-agents" for n in range(1300, 1400)},
        **{f"skill-{n:04d}": "custom" for n in range(800, 1300)},
        **{f"skill-{n:04d}": "project-agents" for n in range(0, 800)},
    }
    assert {s.name: s.source for s in catalog.summaries} == expected
    assert catalog.candidates["skill-0700"].metadata == {"origin": "skills"}
    assert catalog.candidates["skill-1200"].metadata == {"origin": "custom"}
    assert len(catalog.shadowed["skill-0600"]) == 2
    definition = await registry.get("skill-1230", cwd=project)
    assert definition is not None
    assert definition.content == "# skill-1230\n\nSteps for skill-1230."
