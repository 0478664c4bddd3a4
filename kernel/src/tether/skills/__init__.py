"""Skills: progressive disclosure of task-specific instructions.

The model sees a cheap catalog (name and description); it loads a skill's body only when it
needs it. Providers list candidates and load definitions; the scoped :class:`SkillRegistry`
merges them per scope chain. The skill contracts (what a skill is, ``SkillProvider`` and its
factory) are defined in :mod:`tether.contracts` and re-exported here under the same names.
"""

from __future__ import annotations

from ..contracts import (
    SKILL_NAME_MAX,
    SKILL_NAME_PATTERN,
    BundledFiles,
    DirectoryResources,
    InvocationPolicy,
    OpaqueResources,
    ResourceBase,
    SkillCandidate,
    SkillDefinition,
    SkillFile,
    SkillLocation,
    SkillObservation,
    SkillProvider,
    SkillProviderBlocking,
    SkillProviderChanges,
    SkillProviderDiagnostics,
    SkillProviderFactory,
    SkillProviderFiles,
    SkillSummary,
    SkippedSkill,
    UrlResources,
    is_skill_name,
)
from ._files import (
    SKILL_FILE_MAX_BYTES,
    SkillFileRefused,
    SkillFileTooLarge,
    bundled_path,
    describe_file_type,
    read_bundled_file,
    read_skill_file,
)
from ._registry import (
    DEFAULT_CACHE_ENTRIES,
    RUNTIME_PROVIDER,
    RUNTIME_RANK,
    SkillCatalog,
    SkillProviderControl,
    SkillRegistration,
    SkillRegistry,
)
from ._render import (
    BASE_DIR_PLACEHOLDER,
    DEFAULT_BODY_MAX_CHARS,
    RenderableSkill,
    escape_attribute,
    escape_text,
    render_skill_content,
)

__all__ = (
    "BASE_DIR_PLACEHOLDER",
    "DEFAULT_BODY_MAX_CHARS",
    "DEFAULT_CACHE_ENTRIES",
    "RUNTIME_PROVIDER",
    "RUNTIME_RANK",
    "SKILL_FILE_MAX_BYTES",
    "SKILL_NAME_MAX",
    "SKILL_NAME_PATTERN",
    "BundledFiles",
    "DirectoryResources",
    "InvocationPolicy",
    "OpaqueResources",
    "RenderableSkill",
    "ResourceBase",
    "SkillCandidate",
    "SkillCatalog",
    "SkillDefinition",
    "SkillFile",
    "SkillFileRefused",
    "SkillFileTooLarge",
    "SkillLocation",
    "SkillObservation",
    "SkillProvider",
    "SkillProviderBlocking",
    "SkillProviderChanges",
    "SkillProviderControl",
    "SkillProviderDiagnostics",
    "SkillProviderFactory",
    "SkillProviderFiles",
    "SkillRegistration",
    "SkillRegistry",
    "SkillSummary",
    "SkippedSkill",
    "UrlResources",
    "bundled_path",
    "describe_file_type",
    "escape_attribute",
    "escape_text",
    "is_skill_name",
    "read_bundled_file",
    "read_skill_file",
    "render_skill_content",
)
