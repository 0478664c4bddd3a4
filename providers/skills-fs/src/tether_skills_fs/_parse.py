"""One skill file read leniently, as the Agent Skills client guidance asks.

Lenient means: a name that differs from its folder or an over-long description is loaded with a
warning; a missing description, unreadable YAML, an invalid name or an invocation switch that is
not plainly true or false skips the skill (fail closed) with a warning that names the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tether.skills import SKILL_NAME_MAX, InvocationPolicy, is_skill_name

from ._frontmatter import YAMLError, load_frontmatter, quote_colon_values, split_frontmatter

__all__ = (
    "DESCRIPTION_MAX",
    "LEGACY_KEYS",
    "SKILL_FILE",
    "ParsedSkill",
    "SkillFileInvalid",
    "first_meaningful_line",
    "parse_flag",
    "parse_skill",
)

#: The file that makes a folder a packaged skill.
SKILL_FILE = "SKILL.md"
#: The Agent Skills limit; longer descriptions load with a warning.
DESCRIPTION_MAX = 1024
#: Spellings of the invocation switches that tether does not read: a skill using one is dropped,
#: so a switch meant to hide a skill never silently fails open.
LEGACY_KEYS = {
    "disableModelInvocation": "disable-model-invocation",
    "modelInvocable": "disable-model-invocation (inverted)",
    "userInvocable": "user-invocable",
}

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
# Four possible policies, built once (they are frozen).
_POLICIES = {
    (model, user): InvocationPolicy(model_invocable=model, user_invocable=user)
    for model in (True, False)
    for user in (True, False)
}


class SkillFileInvalid(Exception):
    """The file is not a loadable skill: ``problem`` says why, ``remedy`` how to fix it."""

    def __init__(self, problem: str, remedy: str) -> None:
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{problem}; {remedy}")


@dataclass(frozen=True, slots=True)
class ParsedSkill:
    """What a skill file says, validated."""

    name: str
    description: str
    when_to_use: str | None
    invocation: InvocationPolicy
    metadata: dict[str, Any] | None
    body: str
    notes: tuple[tuple[str, str], ...]
    """Lenient findings as (problem, remedy): the skill loads, but its author should know."""


def parse_flag(value: object) -> bool | None:
    """A YAML bool, 0/1, or true/false/yes/no/on/off/1/0 in any case; ``None`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def first_meaningful_line(body: str) -> str | None:
    """The first non-empty, non-fence line, stripped of leading ``#>*-`` and spaces (as eve)."""
    for line in body.split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith(("```", "~~~")):
            continue
        text = stripped.lstrip("#>*- \t").strip()
        if text:
            return text
    return None


def _suggest_name(value: str) -> str:
    words = re.findall(r"[a-z0-9]+", value.lower())
    return "-".join(words)[:SKILL_NAME_MAX].strip("-") or "my-skill"


def _split(text: str) -> tuple[str | None, str]:
    """(frontmatter or ``None``, body) of a file's text."""
    parts = split_frontmatter(text)
    if parts is None:
        raise SkillFileInvalid(
            "its frontmatter opens with --- but never closes",
            "end the frontmatter with a line of three dashes",
        )
    return parts


def _yaml_problem(exc: YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).split("\n", 1)[0]
    mark = getattr(exc, "problem_mark", None)
    # Marks count from zero and the frontmatter text starts on the opening fence's line.
    return f"{problem} (line {mark.line + 1})" if mark is not None else problem


def _retry_quoted(frontmatter: str, error: YAMLError, notes: list[tuple[str, str]]) -> Any:
    quoted = quote_colon_values(frontmatter)
    if quoted is not None:
        try:
            data = load_frontmatter(quoted)
        except YAMLError:
            pass
        else:
            notes.append(
                (
                    "its frontmatter has a value with an unquoted colon (read as if quoted)",
                    "quote that value",
                )
            )
            return data
    raise SkillFileInvalid(
        f"its frontmatter is not valid YAML: {_yaml_problem(error)}",
        "fix the YAML; quote values that contain ': ' or ' #'",
    )


def _load_yaml(frontmatter: str, notes: list[tuple[str, str]]) -> dict[str, Any]:
    try:
        data = load_frontmatter(frontmatter)
    except YAMLError as exc:
        data = _retry_quoted(frontmatter, exc, notes)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SkillFileInvalid(
            "its frontmatter is not a mapping of keys to values",
            "write key: value lines between the --- fences",
        )
    return data


def _name(data: dict[str, Any], expected: str, flat: bool, notes: list[tuple[str, str]]) -> str:
    where = "file" if flat else "folder"
    raw = data.get("name")
    if raw is None:
        if not is_skill_name(expected):
            raise SkillFileInvalid(
                f"it has no name and its {where} name {expected!r} is not a skill name",
                f"add name: {_suggest_name(expected)}",
            )
        if not flat:
            notes.append(
                ("its frontmatter has no name (the folder's name is used)", f"add name: {expected}")
            )
        return expected
    if not isinstance(raw, str):
        raise SkillFileInvalid(
            f"its name {raw!r} is not text", f'quote it: name: "{_suggest_name(str(raw))}"'
        )
    if len(raw) > SKILL_NAME_MAX:
        raise SkillFileInvalid(
            f"its name has {len(raw)} characters, more than {SKILL_NAME_MAX}", "shorten it"
        )
    if not is_skill_name(raw):
        raise SkillFileInvalid(
            f"its name {raw!r} is not a skill name (lowercase letters, digits and single hyphens, "
            f"at most {SKILL_NAME_MAX} characters)",
            f"rename it, e.g. {_suggest_name(raw)}",
        )
    if raw != expected:
        notes.append(
            (
                f'its name "{raw}" differs from its {where} "{expected}" (loaded as "{raw}")',
                f"rename the {where} or the name so they agree",
            )
        )
    return raw


def _description(data: dict[str, Any], body: str, flat: bool, notes: list[tuple[str, str]]) -> str:
    raw = data.get("description")
    if raw is not None and not isinstance(raw, str):
        raise SkillFileInvalid(
            f"its description {raw!r} is not text", "write the description as quoted text"
        )
    description = (raw or "").strip()
    if not description and flat:
        description = first_meaningful_line(body) or ""
    if not description:
        what = "is empty" if raw is not None else "is missing"
        raise SkillFileInvalid(
            f"its description {what}",
            "add description: what the skill does and when to use it",
        )
    if len(description) > DESCRIPTION_MAX:
        notes.append(
            (
                f"its description has {len(description)} characters, more than {DESCRIPTION_MAX}",
                "shorten it and move detail into the body",
            )
        )
    return description


def _invocation(data: dict[str, Any]) -> InvocationPolicy:
    for legacy, replacement in LEGACY_KEYS.items():
        if legacy in data:
            raise SkillFileInvalid(
                f"it uses the unsupported key {legacy}", f"write {replacement} instead"
            )
    switches: dict[str, bool] = {}
    for key in ("disable-model-invocation", "user-invocable"):
        if key not in data:
            continue
        flag = parse_flag(data[key])
        if flag is None:
            raise SkillFileInvalid(
                f"its {key} is {data[key]!r}, not true or false", f"write {key}: true or false"
            )
        switches[key] = flag
    return _POLICIES[
        (not switches.get("disable-model-invocation", False), switches.get("user-invocable", True))
    ]


def _when_to_use(data: dict[str, Any], notes: list[tuple[str, str]]) -> str | None:
    key = "when_to_use" if "when_to_use" in data else "when-to-use"
    raw = data.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        notes.append((f"its {key} is not text (ignored)", f"write {key} as quoted text"))
        return None
    return raw.strip() or None


def _metadata(data: dict[str, Any], notes: list[tuple[str, str]]) -> dict[str, Any] | None:
    raw = data.get("metadata")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        notes.append(
            ("its metadata is not a mapping (ignored)", "write metadata as key: value lines")
        )
        return None
    return {str(key): value for key, value in raw.items()}


def parse_skill(text: str, *, expected_name: str, flat: bool) -> ParsedSkill:
    """Read one skill file's text.

    :param expected_name: the folder's name (packaged) or the file's stem (flat): the name
        when the frontmatter has none, and what a differing name is compared with.
    :param flat: a ``NAME.md`` file: its description may fall back to its first line.
    :raises SkillFileInvalid: the file is not a loadable skill.
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    frontmatter, body = _split(text.lstrip())
    notes: list[tuple[str, str]] = []
    data = _load_yaml(frontmatter, notes) if frontmatter is not None else {}
    body = body.strip()
    invocation = _invocation(data)
    name = _name(data, expected_name, flat, notes)
    description = _description(data, body, flat, notes)
    return ParsedSkill(
        name=name,
        description=description,
        when_to_use=_when_to_use(data, notes),
        invocation=invocation,
        metadata=_metadata(data, notes),
        body=body,
        notes=tuple(notes),
    )
