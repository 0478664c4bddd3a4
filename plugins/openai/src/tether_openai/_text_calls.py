"""Tool calls small models write as text instead of structured calls (opt-in per endpoint).

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

__all__ = ("TextCallFormat", "parse_text_calls")

TextCallFormat = Literal["json", "xml"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)


def parse_text_calls(text: str, form: TextCallFormat) -> list[tuple[str, dict[str, Any]]]:
    """The ``(name, arguments)`` calls written in ``text``; text that is not a call is skipped."""
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


def _json_calls(block: str) -> list[tuple[str, dict[str, Any]]]:
    try:
        data: object = json.loads(block.strip())
    except json.JSONDecodeError:
        return []
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
