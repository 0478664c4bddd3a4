"""Tool calls small models write as text instead of structured calls (per endpoint; on for the
local presets).

``auto``: every form below, wherever it is in the text: each JSON object that is a call (in a
fence, inside ``<tool_call>`` or ``<tools>`` tags, in prose, or with its braces doubled as in
``{{"name": ..., "arguments": {...}}}``), and ``<function=NAME>`` blocks.

``json``: a fenced JSON block (or the whole answer) holding ``{"name": ..., "arguments": {...}}``
(``parameters`` is taken for ``arguments``), or a list of such objects.

``xml``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes, Qwen) or
``<function=NAME><parameter=KEY>VALUE</parameter></function>`` (Qwen3-Coder), with or without
the ``<tool_call>`` wrapper. A parameter value that is JSON is decoded, any other is a string.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from ._json import json_array, json_object

__all__ = ("TextCallFormat", "parse_text_calls", "skill_names")

TextCallFormat = Literal["auto", "json", "xml"]
#: The longest text ``auto`` searches (it tries a JSON object at every ``{``).
MAX_SCANNED_CHARS = 200_000

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)
#: A skill of the catalog tether-skill-tool shows: ``- `NAME`: description``.
_CATALOG = re.compile(r"<available_skills>\n(.*?)</available_skills>", re.DOTALL)
_CATALOG_ENTRY = re.compile(r"^- `([^`\s]+)`:", re.MULTILINE)


def parse_text_calls(
    text: str, form: TextCallFormat, known: frozenset[str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The ``(name, arguments)`` calls written in ``text``, in order; text that is not a call
    is skipped. With ``known``, ``auto`` keeps only calls of those names (so that a JSON object
    in prose that merely has a ``name`` does not hide the call after it)."""
    if form == "auto":
        return _any_calls(text[:MAX_SCANNED_CHARS], known)
    if form == "json":
        blocks = _FENCE.findall(text) or [text]
        return [call for block in blocks for call in _json_calls(block)]
    calls: list[tuple[str, dict[str, Any]]] = []
    for block in _TOOL_CALL.findall(text) or [text]:
        functions = _FUNCTION.findall(block)
        if functions:
            calls += [(name, _parameters(body)) for name, body in functions]
        elif block is not text:
            calls += _json_calls(block)
    return calls


def skill_names(texts: list[str]) -> frozenset[str]:
    """The skills named in the ``<available_skills>`` catalogs among ``texts`` (the messages
    tether-skill-tool appends), so that a skill's name written as a call can become a
    ``load_skill`` call."""
    return frozenset(
        name
        for text in texts
        if "<available_skills>" in text
        for block in _CATALOG.findall(text)
        for name in _CATALOG_ENTRY.findall(block)
    )


def _any_calls(text: str, known: frozenset[str] | None) -> list[tuple[str, dict[str, Any]]]:
    calls = _scan(text, known)
    if not calls and "{{" in text:
        # Braces doubled throughout, as a prompt template escapes them: read them single.
        calls = _scan(text.replace("{{", "{").replace("}}", "}"), known)
    return calls


def _scan(text: str, known: frozenset[str] | None) -> list[tuple[str, dict[str, Any]]]:
    """The ``<function=...>`` blocks and the JSON objects that are calls in ``text``, in the
    order they are written. A call's own arguments are not searched again; any other object
    is searched inside."""
    found: list[tuple[int, tuple[str, dict[str, Any]]]] = [
        (match.start(), (match.group(1), _parameters(match.group(2))))
        for match in _FUNCTION.finditer(text)
    ]
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            value, end = None, start + 1
        calls = _calls_in(value) if value is not None else []
        calls = [call for call in calls if known is None or call[0] in known]
        found += [(start, call) for call in calls]
        start = text.find("{", end if calls else start + 1)
    found.sort(key=lambda item: item[0])
    return [call for _, call in found]


def _json_calls(block: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        data: object = json.loads(block.strip())
    except json.JSONDecodeError:
        return []
    return _calls_in(data)


def _calls_in(data: object) -> list[tuple[str, dict[str, Any]]]:
    """The calls a JSON value is: one call object, or a list of them."""
    items = json_array(data)
    calls: list[tuple[str, dict[str, Any]]] = []
    for value in items if items is not None else [data]:
        item = json_object(value)
        if item is None:
            continue
        function = json_object(item.get("function"))
        if function is not None:  # {"type": "function", "function": {...}}
            item = function
        name = item.get("name")
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                continue
        fields = json_object(arguments)
        if isinstance(name, str) and name and fields is not None:
            calls.append((name, fields))
    return calls


def _parameters(body: str) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for key, raw in _PARAMETER.findall(body):
        value = raw.strip("\n")
        try:
            arguments[key] = json.loads(value)
        except json.JSONDecodeError:
            arguments[key] = value
    return arguments
