"""Hypothesis strategies for hostile TOML documents: random bytes, byte order marks, deep
nesting, huge integers, odd Unicode, and every known key given a value of the wrong type.

Shared by the profile fuzz tests and the model-script fuzz tests.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

BOM = b"\xef\xbb\xbf"

#: Text as a TOML file may hold it: any Unicode scalar value (no lone surrogates, which UTF-8
#: cannot encode), including controls, right-to-left marks, combining marks and emoji.
odd_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    [
        "",
        " ",
        "\u202e\u0041\u0301",  # right-to-left override, a combining accent
        "\U0001f600" * 3,
        "\x00",
        "\x7f\x1b[2K",
        "../../etc/passwd",
        "/dev/zero",
        "~nobody/x",
        "sqlite:",
        "sqlite:/dev/null",
        "memory",
        "scripted:",
        "function::",
        "a" * 300,
        "main",
        "tether.toml",
    ]
)


class _Raw:
    """Text written into the document as it is (a number no ``int`` can print, a bracket)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


#: Integers a TOML file may hold, and some it may not (more digits than Python converts).
huge_ints = (
    st.integers()
    | st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**100])
    # Built, not listed: hypothesis prints the elements it samples from, and Python cannot
    # print an int of more than 4300 digits.
    | st.sampled_from([4301, 5000]).map(lambda digits: 10**digits - 1)
)

floats = st.floats(allow_nan=True, allow_infinity=True)

too_long_decimals = st.sampled_from([_Raw("9" * 4301), _Raw("-" + "1" * 5000), _Raw("1e99999")])

scalars = st.booleans() | huge_ints | floats | odd_text | too_long_decimals

#: Values of any TOML type, nested a little.
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=12,
)


def deep(depth: int, kind: str) -> Any:
    """A value ``depth`` arrays or tables deep."""
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "array" else {"k": value}
    return value


deep_values = st.builds(deep, st.integers(50, 1200), st.sampled_from(["array", "table"]))

hostile_values = values | deep_values


def toml_key(key: str) -> str:
    return toml_string(key)


def toml_string(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_value(value: Any) -> str:
    """An inline TOML rendering of ``value``, for any depth."""
    return _render(value, json=False)


def json_text(value: Any) -> str:
    """A JSON rendering of ``value`` (``NaN`` and ``Infinity`` as Python writes them), for any
    depth and any integer size."""
    return _render(value, json=True)


def _render(value: Any, *, json: bool) -> str:
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            parts.append(item.text)
        elif isinstance(item, bool):
            parts.append("true" if item else "false")
        elif isinstance(item, int):
            parts.append(_int_text(item, json=json))
        elif isinstance(item, float):
            parts.append(_float_text(item, json=json))
        elif isinstance(item, str):
            parts.append(toml_string(item))  # valid JSON too: only \", \\ and \uXXXX
        elif isinstance(item, list):
            stack.append(_Raw("]"))
            for index, element in reversed(list(enumerate(item))):
                stack.append(element)
                if index:
                    stack.append(_Raw(", "))
            stack.append(_Raw("["))
        elif isinstance(item, dict):
            stack.append(_Raw("}"))
            for index, (key, element) in reversed(list(enumerate(item.items()))):
                stack.append(element)
                stack.append(_Raw(f"{toml_key(str(key))}{': ' if json else ' = '}"))
                if index:
                    stack.append(_Raw(", "))
            stack.append(_Raw("{"))
        else:
            raise TypeError(type(item))
    return "".join(parts)


def _int_text(value: int, *, json: bool) -> str:
    if abs(value) < 10**4000:
        return str(value)
    if json:  # JSON has no hex: the decimal digits, written without str() (which refuses)
        return ("-" if value < 0 else "") + "9" * 4400
    return ("-" if value < 0 else "") + "0x" + format(abs(value), "x")


def _float_text(value: float, *, json: bool) -> str:
    if math.isnan(value):
        return "NaN" if json else "nan"
    if math.isinf(value):
        text = "Infinity" if json else "inf"
        return text if value > 0 else "-" + text
    return repr(value)


def toml_document(tables: dict[str, Any]) -> str:
    """Top-level ``key = value`` lines (tables as inline tables)."""
    return "".join(f"{toml_key(key)} = {toml_value(value)}\n" for key, value in tables.items())


def encoded(text: str, bom: bool) -> bytes:
    return (BOM if bom else b"") + text.encode("utf-8")


#: Raw file contents: random bytes, random text, with or without a byte order mark.
raw_files = (
    st.binary(max_size=300)
    | st.builds(encoded, odd_text, st.booleans())
    | st.builds(lambda data: BOM + data, st.binary(max_size=100))
)
