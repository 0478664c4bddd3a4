"""``render_skill_content``: the exact wrapper a loaded skill reaches the model in.

The same block serves the model's ``load_skill`` tool result and a user's ``/name`` gesture, so
the model sees one shape on both paths. The name rides an escaped attribute; provider text in
the hints is escaped; paths and URLs are written as they are (the model must be able to use
them); the body is embedded verbatim, cut at a cap, with ``{baseDir}`` replaced by the skill's
folder.
"""

from __future__ import annotations

from typing import Protocol, cast

from ..contracts import (
    BundledFiles,
    DirectoryResources,
    OpaqueResources,
    ResourceBase,
    UrlResources,
)
from ..errors import ErrorCode, SkillError

__all__ = (
    "BASE_DIR_PLACEHOLDER",
    "DEFAULT_BODY_MAX_CHARS",
    "RenderableSkill",
    "escape_attribute",
    "escape_text",
    "render_skill_content",
)

#: The body a model gets is cut after this many characters (about 12,000 tokens): two and a
#: half times the largest skill of the public collections tether is tested with. The skill
#: tool's ``body_max_chars`` setting changes it.
DEFAULT_BODY_MAX_CHARS = 50_000
#: Written in a body, replaced by the skill's base directory (or URL): many public skills
#: spell their scripts ``{baseDir}/scripts/run.py``.
BASE_DIR_PLACEHOLDER = "{baseDir}"
# A cut at a line end is preferred when one lies in the last half of what is shown.
_LINE_CUT_WINDOW = 0.5


class RenderableSkill(Protocol):
    """What rendering reads: a :class:`~tether.skills.SkillDefinition` has all of it.

    ``path``, ``content_line`` and ``bundled_files`` are read when present (a skill without
    them renders without a file listing, and a cut body cannot say where its rest is).
    """

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
    # Any object can be a RenderableSkill (a model_construct()ed definition, a provider's own
    # class): its base is checked, not trusted.
    base = cast(object, skill.resource_base)
    if base is None:
        return (
            f'Resources for this skill are managed by provider "{escape_text(skill.provider)}".',
            "Load referenced resources only as needed.",
        )
    if isinstance(base, DirectoryResources):
        return (
            f"Base directory for this skill: {base.path}",
            "Resolve relative paths mentioned by this skill against the base directory before "
            "using them. Load referenced resources only as needed.",
        )
    if isinstance(base, UrlResources):
        return (
            f"Base URL for this skill: {base.url}",
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


def _base_location(base: ResourceBase | None) -> str | None:
    if isinstance(base, DirectoryResources):
        return base.path
    if isinstance(base, UrlResources):
        return base.url.rstrip("/")
    return None


def _file_lines(files: BundledFiles, base: ResourceBase | None) -> list[str]:
    if not files.paths and not files.omitted:
        return []
    against = "the base URL" if isinstance(base, UrlResources) else "the base directory"
    lines = [f"Files bundled with this skill (relative to {against}):"]
    lines += [f"- {path}" for path in files.paths]
    if files.omitted or files.more:
        count = f"{'at least ' if files.more else ''}{files.omitted:,}"
        lines.append(f"({count} more file{'' if files.omitted == 1 else 's'} not listed.)")
    return lines


def _cut(content: str, limit: int) -> tuple[str, int | None]:
    """``(shown, first line not wholly shown)``; the line is ``None`` when nothing is cut."""
    if len(content) <= limit:
        return content, None
    end = content.rfind("\n", 0, limit + 1)
    if end >= limit * _LINE_CUT_WINDOW:
        shown = content[:end]
        return shown, shown.count("\n") + 2  # the line after the last one shown
    shown = content[:limit]
    return shown, shown.count("\n") + 1  # a line cut in its middle: read it again


def _cut_note(skill: RenderableSkill, shown: str, next_line: int) -> str:
    content = skill.content
    path = getattr(skill, "path", None)
    start = getattr(skill, "content_line", None)
    text = (
        f"Only the first {len(shown):,} of {len(content):,} characters of this skill's "
        "instructions are shown."
    )
    if not isinstance(path, str) or not path:
        return text + " The rest cannot be loaded through this tool."
    if isinstance(start, int) and start >= 1:
        line = start + next_line - 1
        total = start + content.count("\n")
        return text + (
            f" The rest is in {path}, from line {line:,} of {total:,}: read it from there "
            "when the task needs it."
        )
    return text + f" The rest is in {path}, after the text shown: read it when the task needs it."


def render_skill_content(
    skill: RenderableSkill, *, max_body_chars: int = DEFAULT_BODY_MAX_CHARS
) -> str:
    """The ``<skill_content>`` block: resource hints and the bundled files, then the body.

    The body is verbatim up to ``max_body_chars`` characters (as written, before
    ``{baseDir}`` is replaced); a longer one is cut at a line end where possible and a
    ``<skill_cut>`` note says what was left out and where to read it. An unknown
    resource-base kind is ``SKILL_PROVIDER_INVALID`` rather than a guess.
    """
    first, second = _hints(skill)
    base = skill.resource_base
    files = getattr(skill, "bundled_files", None)
    resources = [first, second]
    if isinstance(files, BundledFiles):
        resources += _file_lines(files, base)
    shown, next_line = _cut(skill.content, max(max_body_chars, 1))
    note = _cut_note(skill, shown, next_line) if next_line is not None else None
    location = _base_location(base)
    if location is not None:
        shown = shown.replace(BASE_DIR_PLACEHOLDER, location)
    parts = [
        f'<skill_content name="{escape_attribute(skill.name)}">',
        "<skill_resources>",
        *resources,
        "</skill_resources>",
        "",
        "<skill_instructions>",
        shown,
        "</skill_instructions>",
    ]
    if note is not None:
        parts += ["<skill_cut>", note, "</skill_cut>"]
    parts.append("</skill_content>")
    return "\n".join(parts)
