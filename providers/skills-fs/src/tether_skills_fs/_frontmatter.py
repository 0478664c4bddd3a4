"""Splitting a skill file into YAML frontmatter and body, and reading the YAML quickly.

The splitting is python-frontmatter's (its YAML handler's two lines), with exact ``---``
fences. Loading has a fast path: most skill frontmatter is plain ``key: value`` lines (and one
level of nested ``key: value`` under a ``metadata:`` line) whose values PyYAML would read as
strings; those are read directly, which is several times faster than building PyYAML's node
graph. Anything else (flow collections, block scalars, anchors, numbers, booleans, comments,
escapes...) goes to PyYAML's C loader, so the result is always what ``yaml.safe_load`` would
return. PyYAML is imported for the first frontmatter the fast path cannot read, not before: a
catalog of plain skills never pays for its import (issue 39's startup figures).

What PyYAML returns may be far larger than the text: aliases share one value many times (an
"alias bomb" of a few hundred bytes stands for billions of values) and may even make a value
contain itself. :func:`expansion_problem` measures the value as if every alias were written
out, within a budget, so nothing downstream ever walks an exploding value.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, cast

__all__ = (
    "FRONTMATTER_MAX_CHARS",
    "FRONTMATTER_MAX_DEPTH",
    "FRONTMATTER_MAX_VALUES",
    "FrontmatterYAMLError",
    "expansion_problem",
    "load_frontmatter",
    "quote_colon_values",
    "split_frontmatter",
)

#: Frontmatter values (keys, items, scalars) counted with aliases written out. The budget is
#: this or the frontmatter's length, whichever is larger: text without aliases never exceeds it.
FRONTMATTER_MAX_VALUES = 10_000
#: Characters of text in the frontmatter's scalars, counted the same way.
FRONTMATTER_MAX_CHARS = 1_000_000
#: Nesting levels; aliases can nest a value deeper than libyaml's own limit (1000).
FRONTMATTER_MAX_DEPTH = 100

# A key the fast path may read: no YAML 1.1 boolean or null word (those keys are not strings).
_KEY = r"[A-Za-z_][A-Za-z0-9_-]*"
_LINE = re.compile(rf"^({_KEY}):(?: (.*))?$")
_NESTED = re.compile(rf"^( +)({_KEY}):(?: (.*))?$")
# Compared lowercased; PyYAML reads some case variants of these as booleans or null.
_SPECIAL_WORDS = frozenset(["yes", "no", "true", "false", "on", "off", "null"])
# Characters after which the fast path gives up on a whole frontmatter: tabs, line breaks
# YAML knows beyond "\n", a byte-order mark, and anything YAML refuses as non-printable.
_HARD = re.compile("[\t\r\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_PLAIN_START_EXTRA = frozenset("_(/$")
# For the colon fallback: a top-level plain pair, and value starts that are not plain scalars.
_COLON_PAIR = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_-]*):[ \t]+(\S.*?)[ \t]*$")
_NOT_PLAIN = tuple("'\"|>[{&*!%@`#")


#: A frontmatter fence: a line of exactly three dashes (trailing blanks allowed).
_FENCE = re.compile(r"^---[ \t]*$", re.MULTILINE)


class FrontmatterYAMLError(ValueError):
    """PyYAML refused the frontmatter; ``problem`` and ``problem_mark`` are its error's."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.problem: str | None = getattr(error, "problem", None)
        self.problem_mark: Any = getattr(error, "problem_mark", None)


def _slow_load(fm: str) -> Any:
    import yaml  # only for what the fast path cannot read

    # libyaml when PyYAML was built with it (the pure-Python loader is ten times slower).
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(fm, Loader=loader)
    except yaml.YAMLError as exc:
        raise FrontmatterYAMLError(exc) from exc


def split_frontmatter(text: str) -> tuple[str | None, str] | None:
    """``(frontmatter, body)``; frontmatter ``None`` when the text has none.

    Returns ``None`` when a frontmatter is opened by ``---`` but never closed.
    """
    if not _FENCE.match(text):
        return None, text
    parts = _FENCE.split(text, 2)
    if len(parts) != 3:
        return None
    _before, fm, body = parts
    return fm, body


def load_frontmatter(fm: str) -> Any:
    """What ``yaml.safe_load(fm)`` returns; raises :class:`FrontmatterYAMLError` (a
    ``ValueError``) where it raises ``yaml.YAMLError``, and what it raises otherwise."""
    fast = _fast_load(fm)
    return fast if fast is not None else _slow_load(fm)


def _scalar(value: str | None) -> tuple[bool, str | None]:
    """(understood, string) for a value PyYAML would read as a string or null."""
    if value is None:
        return True, None
    value = value.strip(" ")
    if not value:
        return True, None
    first = value[0]
    if first == '"':
        inner = value[1:-1]
        if len(value) >= 2 and value[-1] == '"' and '"' not in inner and "\\" not in inner:
            return True, inner
        return False, None
    if first == "'":
        inner = value[1:-1]
        if len(value) >= 2 and value[-1] == "'" and "'" not in inner:
            return True, inner
        return False, None
    if not (first.isalpha() or first in _PLAIN_START_EXTRA):
        return False, None
    if ": " in value or " #" in value or value.endswith(":") or value.lower() in _SPECIAL_WORDS:
        return False, None
    return True, value


def _fast_load(fm: str) -> dict[str, Any] | None:
    """The mapping for simple frontmatter, or ``None`` to let PyYAML read it."""
    if _HARD.search(fm):
        return None
    data: dict[str, Any] = {}
    parent: str | None = None  # a key with no value: a nested mapping may follow
    nested: dict[str, Any] | None = None
    indent = ""
    for line in fm.split("\n"):
        if not line.strip(" "):
            continue
        top = _LINE.match(line)
        if top is not None:
            key = top[1]
            ok, value = _scalar(top[2])
            if not ok or key.lower() in _SPECIAL_WORDS:
                return None
            data[key] = value
            parent, nested = (key if value is None else None), None
            continue
        sub = _NESTED.match(line)
        if sub is None or parent is None:
            return None
        if nested is None:
            nested, indent = {}, sub[1]
            data[parent] = nested
        elif sub[1] != indent:
            return None
        key = sub[2]
        ok, value = _scalar(sub[3])
        if not ok or value is None or key.lower() in _SPECIAL_WORDS:
            return None  # an empty nested value may open a deeper level: PyYAML decides
        nested[key] = value
    return data


def quote_colon_values(fm: str) -> str | None:
    """Quote plain top-level values holding a colon (``description: Use when: x``), the
    Agent Skills guidance's fallback for hand-written YAML; ``None`` if there is none."""
    lines = fm.split("\n")
    changed = False
    for index, line in enumerate(lines):
        match = _COLON_PAIR.match(line)
        if match and ":" in match[2] and not match[2].startswith(_NOT_PLAIN):
            lines[index] = f"{match[1]}: '{match[2].replace(chr(39), chr(39) * 2)}'"
            changed = True
    return "\n".join(lines) if changed else None


def expansion_problem(data: Any, size: int) -> tuple[str, str] | None:
    """``(problem, remedy)`` when ``data``, read from ``size`` characters of YAML, expands
    beyond the budgets (aliases written out, cycles never ending); ``None`` when it fits.

    Iterative, and it stops at the budget: its cost is bounded whatever ``data`` is.
    """
    max_values = max(FRONTMATTER_MAX_VALUES, size)
    max_chars = max(FRONTMATTER_MAX_CHARS, size)
    values = chars = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        values += 1
        if depth > FRONTMATTER_MAX_DEPTH:
            return (
                f"its frontmatter nests deeper than {FRONTMATTER_MAX_DEPTH} levels (or a value "
                "contains itself through an alias)",
                "flatten it and write the values out without aliases (*name)",
            )
        # Parsed YAML: containers of anything.
        children: list[object] | None = None
        if isinstance(value, dict):
            pairs = cast("dict[object, object]", value).items()
            children = [part for pair in pairs for part in pair]
        elif isinstance(value, list | tuple | set | frozenset):
            children = list(cast("Collection[object]", value))
        elif isinstance(value, str | bytes):
            chars += len(value)
        if children is not None:
            stack.extend((child, depth + 1) for child in children)
        # Every value found so far: the ones walked and the ones waiting.
        if values + len(stack) > max_values or chars > max_chars:
            unit = "values" if chars <= max_chars else "characters"
            limit = max_values if unit == "values" else max_chars
            return (
                f"its frontmatter expands to more than {limit:,} {unit} (YAML anchors and "
                "aliases repeat values, or a value contains itself)",
                "write the values out without anchors (&name) and aliases (*name)",
            )
    return None
