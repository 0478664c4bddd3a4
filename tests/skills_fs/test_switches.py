"""Invocation switches are read at the top level and under ``metadata:``, failing closed, so
the strict validator's advice (move unknown fields under ``metadata:``) is true for tether."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.skills import InvocationPolicy
from tether_skills_fs import LEGACY_KEYS, FileSystemSkillProvider, Settings
from tether_skills_fs._validate import LEGACY_SWITCHES, check_skill

from .conftest import observe, write_skill

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "skills"


@pytest.fixture
def provider(root: Path) -> FileSystemSkillProvider:
    return FileSystemSkillProvider(Settings(roots=(root,), project=False, user=False))


def text(lines: str) -> str:
    return f"---\nname: hidden\ndescription: A hidden skill.\n{lines}---\n\nBody.\n"


async def policy(provider: FileSystemSkillProvider, cwd: Path) -> InvocationPolicy | str:
    observation = await observe(provider, cwd)
    if observation.skipped:
        return observation.skipped[0].reason
    [candidate] = observation.candidates
    return candidate.invocation


@pytest.mark.parametrize(
    ("lines", "model", "user"),
    [
        ("disable-model-invocation: true\n", False, True),
        ("metadata:\n  disable-model-invocation: 'true'\n", False, True),
        ("metadata:\n  user-invocable: 'false'\n", True, False),
        # A switch that hides wins wherever it is written.
        ("disable-model-invocation: off\nmetadata:\n  disable-model-invocation: 1\n", False, True),
        ("disable-model-invocation: on\nmetadata:\n  disable-model-invocation: no\n", False, True),
        ("user-invocable: true\nmetadata:\n  user-invocable: off\n", True, False),
    ],
)
async def test_a_switch_is_read_at_the_top_level_and_under_metadata(
    provider: FileSystemSkillProvider,
    root: Path,
    tmp_path: Path,
    lines: str,
    model: bool,
    user: bool,
) -> None:
    write_skill(root, "hidden", text=text(lines))
    assert await policy(provider, tmp_path) == InvocationPolicy(
        model_invocable=model, user_invocable=user
    )


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        (
            "metadata:\n  disable-model-invocation: maybe\n",
            "its metadata.disable-model-invocation is 'maybe', not true or false; write "
            "metadata.disable-model-invocation: true or false",
        ),
        (
            "metadata:\n  disableModelInvocation: 'true'\n",
            "it uses the unsupported key metadata.disableModelInvocation; write "
            "metadata.disable-model-invocation instead",
        ),
    ],
)
async def test_a_switch_under_metadata_that_cannot_be_read_drops_the_skill(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path, lines: str, reason: str
) -> None:
    write_skill(root, "hidden", text=text(lines))
    assert await policy(provider, tmp_path) == reason


async def test_when_to_use_is_read_under_metadata_when_not_at_the_top_level(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    write_skill(root, "hidden", text=text("metadata:\n  when_to_use: After an outage\n"))
    [candidate] = (await observe(provider, tmp_path)).candidates
    assert candidate.when_to_use == "After an outage"


async def test_following_the_validators_advice_keeps_a_hidden_skill_hidden(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    folder = write_skill(root, "hidden", text=text("disable-model-invocation: true\n")).parent
    [problem] = check_skill(folder).problems
    assert problem.startswith('unexpected field "disable-model-invocation" (SKILL.md line 4)')
    assert "move it under metadata: (tether reads it there too and still hides" in problem
    # Do what it says: the skill passes the strict check and stays out of the model's reach.
    moved = text("metadata:\n  disable-model-invocation: 'true'\n")
    (folder / "SKILL.md").write_text(moved, encoding="utf-8")
    assert check_skill(folder).valid
    assert check_skill(folder).warnings == ()
    assert await policy(provider, tmp_path) == InvocationPolicy(model_invocable=False)


async def test_following_the_advice_about_a_legacy_spelling_keeps_the_skill_hidden(
    provider: FileSystemSkillProvider, root: Path, tmp_path: Path
) -> None:
    folder = write_skill(root, "hidden", text=text("disableModelInvocation: true\n")).parent
    [problem] = check_skill(folder).problems
    assert problem.endswith(
        "tether does not read this spelling and skips a skill that uses it (at the top level "
        "or under metadata:); write disable-model-invocation under metadata: instead"
    )
    moved = text("metadata:\n  disable-model-invocation: 'true'\n")
    (folder / "SKILL.md").write_text(moved, encoding="utf-8")
    assert check_skill(folder).valid
    assert await policy(provider, tmp_path) == InvocationPolicy(model_invocable=False)


def test_the_validator_and_the_loader_know_the_same_legacy_spellings() -> None:
    assert LEGACY_SWITCHES == LEGACY_KEYS
