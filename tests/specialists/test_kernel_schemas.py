"""The parameters schemas the kernel writes for its own tools (declared subagents, deferred
subagents, task tools) skip the meta-schema check when tools are built
(``tether.agents._tools.kernel_schema``), so this checks each of them against it; and the
check's verdict cache keeps answering like jsonschema."""

from __future__ import annotations

import jsonschema
import pytest

from tether.agents import Specialist, Tool
from tether.agents._tools import schema_problem
from tether.errors import AgentError, ErrorCode
from tether.specialists import task_tools
from tether.specialists._specialists import declared_tools


def _kernel_tools() -> list[Tool]:
    specialists = [
        Specialist("writer", "main.writer", "Writes.", True),
        Specialist("editor", "main.editor", "Edits.", "deferred"),
    ]
    return list(declared_tools(specialists, "main", []))


def test_every_kernel_tool_schema_is_valid_json_schema():
    tools = _kernel_tools()
    assert {t.name for t in tools} == {
        "writer",
        "find_subagents",
        "call_subagent",
        *(t.name for t in task_tools()),
    }
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(dict(tool.parameters))


def test_an_invalid_schema_is_refused_every_time_with_jsonschemas_words():
    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    with pytest.raises(jsonschema.SchemaError) as expected:
        jsonschema.Draft202012Validator.check_schema(bad)
    for _ in range(2):  # the second answer comes from the cache
        assert schema_problem(bad) == expected.value.message
        with pytest.raises(AgentError) as caught:
            Tool("count", "Counts.", lambda a, c: "", bad)
        assert caught.value.code is ErrorCode.TOOL_INVALID
        assert expected.value.message in caught.value.message


def test_the_cache_tells_look_alike_schemas_apart():
    # 1 and True compare equal in Python; as JSON Schema values they are not the same.
    valid = {"type": "object", "properties": {"x": {"type": "string", "minLength": 1}}}
    invalid = {"type": "object", "properties": {"x": {"type": "string", "minLength": True}}}
    assert schema_problem(valid) is None
    assert schema_problem(invalid) is not None
    assert schema_problem(valid) is None


def test_container_enums_are_checked_by_json_rules_not_pythons():
    # [True] == [1] in Python; JSON Schema tells them apart, so the quick check must not decide.
    tool = Tool(
        "pick",
        "Picks.",
        lambda a, c: "",
        {"type": "object", "properties": {"flags": {"type": "array", "enum": [[True]]}}},
    )
    assert tool.argument_errors({"flags": [True]}) == []
    assert tool.argument_errors({"flags": [1]}) != []
    loose = Tool(
        "any", "Any.", lambda a, c: "", {"type": "object", "properties": {"o": {"type": "object"}}}
    )
    assert loose.argument_errors({"o": {"k": 1}}) == []
    assert loose.argument_errors({"o": [1]}) != []
