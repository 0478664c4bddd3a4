"""``render_skill_content``: the exact wrapper a loaded skill reaches the model in.

The same block serves the model's ``load_skill`` tool result and a user's ``/name`` gesture, so
the model sees one shape on both paths. The name rides an escaped attribute and the hints are
escaped text; the body is embedded verbatim (skills are trusted content).
"""

from __future__ import annotations

from typing import Protocol

from ..errors import ErrorCode, SkillError
from ._types import DirectoryResources, OpaqueResources, ResourceBase, UrlResources

__all__ = ("RenderableSkill", "escape_attribute", "escape_text", "render_skill_content")


class RenderableSkill(Protocol):
    """What rendering reads: a :class:`~tether.skills.SkillDefinition` has all of it."""

    @property
    def name(self) -> str: ...

    @property
    def provider(self) -> str: ...

    @property
    def resource_base(self) -> ResourceBase | None: ...

    @property
    def content(self) -> str: ...


def escape_attribute(value: str) -> str:
    """``&``, ``"`` and ``<`` escaped (not ``>``), as dsh does for the name attribute."""
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def escape_text(value: str) -> str:
    """``&``, ``<`` and ``>`` escaped, so provider text cannot open or close a framing tag."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _hints(skill: RenderableSkill) -> tuple[str, str]:
    base = skill.resource_base
    if base is None:
        return (
            f'Resources for this skill are managed by provider "{escape_text(skill.provider)}".',
            "Load referenced resources only as needed.",
        )
    if isinstance(base, DirectoryResources):
        return (
            f"Base directory for this skill: {escape_text(base.path)}",
            "Resolve relative paths mentioned by this skill against the base directory before "
            "using them. Load referenced resources only as needed.",
        )
    if isinstance(base, UrlResources):
        return (
            f"Base URL for this skill: {escape_text(base.url)}",
            "Resolve relative URLs mentioned by this skill against the base URL before using "
            "them. Load referenced resources only as needed.",
        )
    if isinstance(base, OpaqueResources):
        return (
            f"Resources for this skill: {escape_text(base.description)}",
            "Load referenced resources only as needed.",
        )
    kind = getattr(base, "kind", type(base).__name__)
    raise SkillError(
        ErrorCode.SKILL_PROVIDER_INVALID,
        f'skill "{skill.name}" has a resource base of unknown kind {kind!r}',
        where=f'skill provider "{skill.provider}"',
        remedy="use tether.skills.DirectoryResources, UrlResources or OpaqueResources, or None",
    )


def render_skill_content(skill: RenderableSkill) -> str:
    """The ``<skill_content>`` block: resource hints, then the body verbatim.

    An unknown resource-base kind is ``SKILL_PROVIDER_INVALID`` rather than a guess.
    """
    first, second = _hints(skill)
    return "\n".join(
        (
            f'<skill_content name="{escape_attribute(skill.name)}">',
            "<skill_resources>",
            first,
            second,
            "</skill_resources>",
            "",
            "<skill_instructions>",
            skill.content,
            "</skill_instructions>",
            "</skill_content>",
        )
    )
