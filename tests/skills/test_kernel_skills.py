"""``runtime.skills``: every plugin instance's ``tether_skill_providers`` in its scope layer."""

from __future__ import annotations

from pathlib import Path

import pytest

import tether
from tether.errors import ErrorCode, SkillError
from tether.skills import (
    SkillCandidate,
    SkillDefinition,
    SkillProviderControl,
    SkillProviderFactory,
)
from tether.testing import make_runtime

pytestmark = pytest.mark.anyio


class Settings(tether.PluginSettings):
    skills: dict[str, float]
    """Skill name -> rank, listed by this instance's provider."""


class Listing:
    """Lists its instance's skills; the description says which layer it came from."""

    def __init__(self, layer: str, skills: dict[str, float]) -> None:
        self.name = "listing"
        self.layer = layer
        self.skills = skills

    async def list(self, *, cwd: Path) -> list[SkillCandidate]:
        return [
            SkillCandidate(
                name=name,
                description=f"From the {self.layer} layer.",
                rank=rank,
                provider=self.name,
                source=self.layer,
            )
            for name, rank in self.skills.items()
        ]

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition:
        return SkillDefinition(
            name=candidate.name,
            description=candidate.description,
            provider=self.name,
            source=self.layer,
            content=f"{candidate.name} from {self.layer}.",
        )


class PluginObject:
    def __init__(self) -> None:
        self.controls: list[SkillProviderControl] = []

    @tether.hookimpl
    def tether_settings_model(self):
        return Settings

    @tether.hookimpl
    def tether_skill_providers(self, settings: Settings):
        layer = "global" if "global-only" in settings.skills else "agent"

        def create(control: SkillProviderControl) -> Listing:
            self.controls.append(control)
            return Listing(layer, settings.skills)

        return [SkillProviderFactory(name="listing", create=create)]


PROFILE = """
[tether]
plugins = ["p"]
[plugin.p]
skills = { global-only = 100, shared = 10 }

[agent.main]
plugins = ["p"]
[agent.main.plugin.p]
skills = { agent-only = 100, shared = 900 }

[agent.helper]
"""


async def test_hook_tether_skill_providers_reaches_kernel_skills(tether_profile):
    plugin = PluginObject()
    runtime = make_runtime(tether_profile(PROFILE), {"p": plugin})
    assert plugin.controls == []  # built on first use
    registry = runtime.skills
    assert runtime.skills is registry
    assert len(plugin.controls) == 2  # one provider per instance, same name in two layers

    main = await registry.list(scope=runtime.kernel.agent_scope("main"))
    assert [(s.name, s.description) for s in main.summaries] == [
        ("agent-only", "From the agent layer."),
        ("global-only", "From the global layer."),
        ("shared", "From the agent layer."),  # nearest layer wins despite rank 900 vs 10
    ]
    assert main.complete
    shared = await registry.get("shared", scope=runtime.kernel.agent_scope("main"))
    assert shared is not None
    assert shared.content == "shared from agent."

    helper = await registry.list(scope=runtime.kernel.agent_scope("helper"))
    assert [(s.name, s.source) for s in helper.summaries] == [
        ("global-only", "global"),
        ("shared", "global"),
    ]
    assert await registry.list(scope=runtime.kernel.global_scope) is await registry.list()


def test_hook_tether_skill_providers_with_a_reserved_name_fails_loudly(tether_profile):
    class Reserved:
        @tether.hookimpl
        def tether_skill_providers(self):
            return [SkillProviderFactory(name="runtime", create=lambda control: None)]  # type: ignore[arg-type, return-value]

    runtime = make_runtime(tether_profile('[tether]\nplugins = ["r"]\n'), {"r": Reserved()})
    with pytest.raises(SkillError) as info:
        runtime.skills  # noqa: B018 - building the registry is what fails
    assert info.value.code is ErrorCode.SKILL_PROVIDER_INVALID
    assert str(info.value) == (
        'plugin "r" (inline plugin): skill provider name "runtime" is reserved for runtime skills '
        "(scope global); give the provider another name [SKILL_PROVIDER_INVALID]"
    )
    assert info.value.plugin == "r"
