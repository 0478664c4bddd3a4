"""One skill file read leniently, as the Agent Skills client guidance asks.

Lenient means: a name that differs from its folder or an over-long description is loaded with a
warning; a missing description, unreadable YAML, an invalid name or an invocation switch that is
not plainly true or false skips the skill (fail closed) with a warning that names the fix.

Every message quotes a value through :func:`shown`, which is bounded: a file is untrusted, and a
value may be megabytes long or (through YAML aliases) stand for billions of values.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass
from typing import Any, cast

from tether.skills import SKILL_NAME_MAX, InvocationPolicy, is_skill_name

from ._frontmatter import (
    expansion_problem,
    load_frontmatter,
    quote_colon_values,
    split_frontmatter,
)

__all__ = (
    "DESCRIPTION_MAX",
    "LEGACY_KEYS",
    "SKILL_FILE",
    "SWITCH_KEYS",
    "ParsedSkill",
    "SkillFileInvalid",
    "first_meaningful_line",
    "parse_flag",
    "parse_skill",
    "shown",
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
#: The invocation switches tether reads, at the top level or under ``metadata:`` (where the
#: Agent Skills standard allows extra fields); a switch that hides anywhere hides.
SWITCH_KEYS = ("disable-model-invocation", "user-invocable")

#: The longest YAML error text quoted in a message.
_PROBLEM_MAX = 200
#: The longest value quoted in a message.
_SHOWN_MAX = 100

_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdict = 4

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
    body_line: int = 1
    """The line of the file the body starts on (after the frontmatter and blank lines)."""


def shown(value: object) -> str:
    """A short ``repr`` of any value (at most 100 characters: strings, containers and levels
    cut), for messages about untrusted files."""
    text = _REPR.repr(value)
    return text if len(text) <= _SHOWN_MAX else text[: _SHOWN_MAX - 3] + "..."


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


def _yaml_problem(exc: Exception) -> str:
    problem = getattr(exc, "problem", None) or str(exc).split("\n", 1)[0]
    problem = problem if len(problem) <= _PROBLEM_MAX else problem[: _PROBLEM_MAX - 3] + "..."
    mark = getattr(exc, "problem_mark", None)
    # Marks count from zero and the frontmatter text starts on the opening fence's line.
    return f"{problem} (line {mark.line + 1})" if mark is not None else problem


def _retry_quoted(frontmatter: str, error: Exception, notes: list[tuple[str, str]]) -> Any:
    quoted = quote_colon_values(frontmatter)
    if quoted is not None:
        try:
            data = load_frontmatter(quoted)
        except Exception:  # any failure: the original error is the one to report
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
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # Beyond YAML errors (FrontmatterYAMLError, a ValueError), PyYAML raises whatever
        # building a value raises: ValueError for a date like 2024-13-01 or !!float x. Any of
        # them means the YAML cannot be read.
        data = _retry_quoted(frontmatter, exc, notes)
    problem = expansion_problem(data, len(frontmatter))
    if problem is not None:
        raise SkillFileInvalid(*problem)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SkillFileInvalid(
            "its frontmatter is not a mapping of keys to values",
            "write key: value lines between the --- fences",
        )
    return cast("dict[str, Any]", data)  # parsed YAML: a mapping, read by string keys


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
            f"its name {shown(raw)} is not text", f'quote it: name: "{_suggest_name(shown(raw))}"'
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
            f"its description {shown(raw)} is not text", "write the description as quoted text"
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


def _switch_tables(data: dict[str, Any]) -> list[tuple[str, dict[Any, Any]]]:
    """Where invocation switches are read: the top level, and ``metadata`` when a mapping."""
    tables: list[tuple[str, dict[Any, Any]]] = [("", data)]
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        tables.append(("metadata.", cast("dict[Any, Any]", metadata)))  # parsed YAML
    return tables


def _invocation(data: dict[str, Any]) -> InvocationPolicy:
    """The policy, failing closed: a switch that hides wins wherever it is, and a switch that
    cannot be read (a legacy spelling, a value that is not a boolean) drops the skill."""
    model, user = True, True
    for prefix, table in _switch_tables(data):
        for legacy, replacement in LEGACY_KEYS.items():
            if legacy in table:
                raise SkillFileInvalid(
                    f"it uses the unsupported key {prefix}{legacy}",
                    f"write {prefix}{replacement} instead",
                )
        for key in SWITCH_KEYS:
            if key not in table:
                continue
            flag = parse_flag(table[key])
            if flag is None:
                raise SkillFileInvalid(
                    f"its {prefix}{key} is {shown(table[key])}, not true or false",
                    f"write {prefix}{key}: true or false",
                )
            if key == "disable-model-invocation":
                model = model and not flag
            else:
                user = user and flag
    return _POLICIES[(model, user)]


def _when_to_use(data: dict[str, Any], notes: list[tuple[str, str]]) -> str | None:
    """``when_to_use`` (or ``when-to-use``), at the top level, else under ``metadata``."""
    for prefix, table in _switch_tables(data):
        key = "when_to_use" if "when_to_use" in table else "when-to-use"
        raw = table.get(key)
        if raw is None:
            continue
        if not isinstance(raw, str):
            notes.append(
                (f"its {prefix}{key} is not text (ignored)", f"write {prefix}{key} as quoted text")
            )
            return None
        return raw.strip() or None
    return None


def _metadata(data: dict[str, Any], notes: list[tuple[str, str]]) -> dict[str, Any] | None:
    raw = data.get("metadata")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        notes.append(
            ("its metadata is not a mapping (ignored)", "write metadata as key: value lines")
        )
        return None
    mapping = cast("dict[object, Any]", raw)  # parsed YAML: any keys, any values
    return {str(key): value for key, value in mapping.items()}


def parse_skill(text: str, *, expected_name: str, flat: bool) -> ParsedSkill:
    """Read one skill file's text.

    :param expected_name: the folder's name (packaged) or the file's stem (flat): the name
        when the frontmatter has none, and what a differing name is compared with.
    :param flat: a ``NAME.md`` file: its description may fall back to its first line.
    :raises SkillFileInvalid: the file is not a loadable skill.
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    stripped = text.lstrip()
    frontmatter, raw_body = _split(stripped)
    notes: list[tuple[str, str]] = []
    data = _load_yaml(frontmatter, notes) if frontmatter is not None else {}
    body = raw_body.strip()
    # raw_body is the tail of stripped: count the lines before the body's first character.
    leading = len(raw_body) - len(raw_body.lstrip())
    body_line = (
        text.count("\n", 0, len(text) - len(stripped))
        + stripped.count("\n", 0, len(stripped) - len(raw_body) + leading)
        + 1
    )
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
        body_line=body_line,
    )
