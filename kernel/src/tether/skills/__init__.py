"""Skills: progressive disclosure of task-specific instructions.

The model sees a cheap catalog (name and description); it loads a skill's body only when it
needs it. Providers list candidates and load definitions; the scoped :class:`SkillRegistry`
merges them per scope chain.
"""

from __future__ import annotations

from ._registry import (
    DEFAULT_CACHE_ENTRIES,
    RUNTIME_PROVIDER,
    RUNTIME_RANK,
    SkillCatalog,
    SkillProviderControl,
    SkillRegistration,
    SkillRegistry,
)
from ._render import RenderableSkill, escape_attribute, escape_text, render_skill_content
from ._types import (
    SKILL_NAME_MAX,
    SKILL_NAME_PATTERN,
    DirectoryResources,
    InvocationPolicy,
    OpaqueResources,
    ResourceBase,
    SkillCandidate,
    SkillDefinition,
    SkillObservation,
    SkillProvider,
    SkillProviderFactory,
    SkillSummary,
    UrlResources,
    is_skill_name,
)

__all__ = (
    "DEFAULT_CACHE_ENTRIES",
    "RUNTIME_PROVIDER",
    "RUNTIME_RANK",
    "SKILL_NAME_MAX",
    "SKILL_NAME_PATTERN",
    "DirectoryResources",
    "InvocationPolicy",
    "OpaqueResources",
    "RenderableSkill",
    "ResourceBase",
    "SkillCandidate",
    "SkillCatalog",
    "SkillDefinition",
    "SkillObservation",
    "SkillProvider",
    "SkillProviderControl",
    "SkillProviderFactory",
    "SkillRegistration",
    "SkillRegistry",
    "SkillSummary",
    "UrlResources",
    "escape_attribute",
    "escape_text",
    "is_skill_name",
    "render_skill_content",
)
