"""The quick schema checks of tether.agents._tools agree with jsonschema: a schema the quick
check calls valid is valid against the draft 2020-12 meta-schema, and arguments the flat check
accepts are valid; what it is unsure of goes to jsonschema, whose messages users read."""

from __future__ import annotations

import copy
import itertools
import subprocess
import sys
from typing import Any

import jsonschema
import pytest

from tether.agents import Tool
from tether.contracts._tools import _surely_valid, schema_problem  # pyright: ignore[reportPrivateUsage]
from tether.errors import AgentError

BASE: dict[str, Any] = {
    "type": "object",
    "title": "Search",
    "description": "Search the notes.",
    "properties": {
        "query": {"type": "string", "description": "words", "examples": ["launch"]},
        "limit": {"type": "integer", "default": 5, "deprecated": False},
        "mode": {"type": "string", "enum": ["any", "all"]},
        "score": {"type": "number", "readOnly": True, "$comment": "x"},
        "flags": {"type": "array"},
        "extra": {"type": "object", "writeOnly": False},
        "strict": {"type": "boolean", "title": "Strict"},
    },
    "required": ["query"],
    "additionalProperties": False,
}

#: Changes to BASE: each one alone, then every pair, is checked both ways.
CHANGES: list[tuple[tuple[str, ...], Any]] = [
    (("title",), 3),
    (("description",), None),
    (("required",), ["query", "query"]),
    (("required",), [1]),
    (("required",), "query"),
    (("required",), ("query",)),
    (("additionalProperties",), {"type": "string"}),
    (("additionalProperties",), "no"),
    (("properties", "query", "type"), "text"),
    (("properties", "query", "type"), ["string", "null"]),
    (("properties", "query", "examples"), "launch"),
    (("properties", "limit", "deprecated"), "no"),
    (("properties", "limit", "default"), {"any": "thing"}),
    (("properties", "mode", "enum"), []),
    (("properties", "mode", "enum"), "any"),
    (("properties", "score", "readOnly"), 1),
    (("properties", "score", "$comment"), ["x"]),
    (("properties", "strict", "title"), False),
    (("properties", "flags", "minItems"), -1),
    (("properties", "flags", "minItems"), 1),
    (("properties", "extra"), True),
    (("properties", "extra"), "string"),
    (("properties",), []),
    (("$defs",), {"a": {"type": "string"}}),
    (("required",), []),
    (("additionalProperties",), True),
    (("properties", "query", "description"), "les mots à chercher"),
]


def _changed(changes: tuple[tuple[tuple[str, ...], Any], ...]) -> dict[str, Any]:
    schema = copy.deepcopy(BASE)
    for path, value in changes:
        target: Any = schema
        for key in path[:-1]:
            if not isinstance(target, dict):
                break
            target = target.setdefault(key, {})
        else:
            if isinstance(target, dict):
                target[path[-1]] = value
    return schema


def _cases() -> list[dict[str, Any]]:
    singles = [(change,) for change in CHANGES]
    pairs = list(itertools.combinations(CHANGES, 2))
    return [BASE, *(_changed(changes) for changes in (*singles, *pairs))]


def _meta_valid(schema: dict[str, Any]) -> bool:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return True


def test_a_schema_the_quick_check_calls_valid_is_valid_for_jsonschema() -> None:
    cases = _cases()
    quick = [case for case in cases if _surely_valid(case)]
    assert BASE in quick
    assert len(quick) >= 4  # changes that keep it flat and well typed stay quick
    for case in quick:
        assert _meta_valid(case), case
    # And schema_problem, which tries the quick check first, still gives jsonschema's verdict.
    for case in cases:
        assert (schema_problem(case) is None) == _meta_valid(case), case


def test_arguments_the_flat_check_accepts_are_valid_and_errors_come_from_jsonschema() -> None:
    tool = Tool("search", "Search.", lambda arguments, context: "ok", BASE)
    validator = jsonschema.Draft202012Validator(BASE)
    samples: list[dict[str, Any]] = [
        {"query": "launch"},
        {"query": "launch", "limit": 3, "mode": "all", "score": 1.5, "strict": True},
        {"query": "launch", "flags": [1, "x"], "extra": {"a": 1}},
        {"query": 3},
        {"limit": 3},
        {"query": "launch", "limit": True},
        {"query": "launch", "limit": 2.0},
        {"query": "launch", "mode": "some"},
        {"query": "launch", "other": 1},
    ]
    for arguments in samples:
        errors = tool.argument_errors(arguments)
        assert (not errors) == validator.is_valid(arguments), arguments
    assert tool.argument_errors({"query": "launch", "mode": "some"}) == [
        "mode: 'some' is not one of ['any', 'all']"
    ]


def test_an_invalid_schema_is_still_refused_with_jsonschemas_reason() -> None:
    bad = _changed(((("properties", "query", "type"), "text"),))
    with pytest.raises(AgentError, match="not a valid JSON Schema: 'text' is not valid"):
        Tool("search", "Search.", lambda arguments, context: "ok", bad)


def test_making_a_flat_tool_does_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "from tether.agents import Tool\n"
        f"Tool('search', 'Search.', lambda arguments, context: 'ok', {BASE!r})\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
