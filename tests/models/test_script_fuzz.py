"""Fuzz: whatever a ``scripted:`` model file holds, loading it gives a ScriptedModel or a
``SCRIPT_INVALID`` ModelError: never another exception, never a hang."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tether.errors import ErrorCode, ModelError
from tether.models import ScriptedModel

from ..kernel.hostile import encoded, hostile_values, json_text, odd_text, raw_files, toml_document

ERROR_LINE = re.compile(r"^[^\n]* \[SCRIPT_INVALID\]$")


def optional(keys: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda known, stray: {**stray, **known},
        st.fixed_dictionaries({}, optional=keys),
        st.dictionaries(odd_text, hostile_values, max_size=1),
    )


calls = hostile_values | optional(
    {"name": hostile_values | odd_text, "arguments": hostile_values, "id": hostile_values}
)
steps = hostile_values | optional(
    {
        "text": hostile_values | odd_text,
        "tool_calls": hostile_values | st.lists(calls, max_size=2),
        "expect": hostile_values,
        "finish_reason": hostile_values
        | st.sampled_from(["stop", "tool_calls", "length", "refusal"]),
        "usage": hostile_values
        | optional({"input_tokens": hostile_values, "output_tokens": hostile_values}),
        "fail_times": hostile_values,
        "delay": hostile_values,
    }
)
step_lists = hostile_values | st.lists(steps, max_size=3)
scripts = optional(
    {
        "steps": step_lists,
        "agents": hostile_values
        | st.dictionaries(odd_text, hostile_values | optional({"steps": step_lists}), max_size=2),
        "tasks": hostile_values
        | st.dictionaries(odd_text, hostile_values | optional({"steps": step_lists}), max_size=2),
    }
)


def load(path) -> None:
    """Load ``path``: a model, or one coded SCRIPT_INVALID line."""
    error: ModelError | None = None
    try:
        model = ScriptedModel.from_file(path)
    except ModelError as exc:
        error = exc
    else:
        assert model.remaining() == {}  # nothing asked yet: nothing to say
        return
    assert error.code is ErrorCode.SCRIPT_INVALID
    assert ERROR_LINE.match(str(error)), str(error)


@given(data=raw_files, suffix=st.sampled_from([".toml", ".json", ""]))
def test_any_bytes_as_a_script(tmp_path, data, suffix):
    path = tmp_path / f"script{suffix}"
    path.write_bytes(data)
    load(path)


@given(script=scripts, bom=st.booleans())
def test_any_values_in_a_toml_script(tmp_path, script, bom):
    path = tmp_path / "script.toml"
    path.write_bytes(encoded(toml_document(script), bom))
    load(path)


@given(script=scripts | hostile_values, bom=st.booleans())
def test_any_values_in_a_json_script(tmp_path, script, bom):
    path = tmp_path / "script.json"
    path.write_bytes(encoded(json_text(script), bom))
    load(path)
