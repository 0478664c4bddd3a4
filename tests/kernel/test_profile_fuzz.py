"""Fuzz: whatever a profile file holds, loading it (``load_kernel``, ``tether check``) either
works or raises a :class:`tether.TetherError` with a code: never another exception, never a hang.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import tether
from tether.cli import cli

from .hostile import (
    encoded,
    hostile_values,
    odd_text,
    raw_files,
    toml_document,
    toml_string,
    toml_value,
)

#: The one-line shape of every error: ``... [CODE]`` with a known code.
ERROR_LINE = re.compile(r"^[^\n]* \[(?P<code>[A-Z_]+)\]$")


def optional(keys: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A table with any subset of ``keys`` (each with its strategy) and a stray key or two."""
    return st.builds(
        lambda known, stray: {**stray, **known},
        st.fixed_dictionaries({}, optional=keys),
        st.dictionaries(odd_text, hostile_values, max_size=2),
    )


agent_tables = hostile_values | optional(
    {
        "plugins": hostile_values | st.lists(odd_text, max_size=3),
        "plugin": hostile_values | st.dictionaries(odd_text, hostile_values, max_size=2),
        "description": hostile_values,
        "model": hostile_values | odd_text.map(lambda name: f"scripted:{name}"),
        "instructions": hostile_values,
    }
)

#: Profiles with every known key, each given values of every type (and some right ones).
profiles = optional(
    {
        "extends": hostile_values,
        "tether": hostile_values
        | optional(
            {
                "plugins": hostile_values | st.lists(odd_text, max_size=3),
                "store": hostile_values,
                "plugin_dirs": hostile_values | st.lists(odd_text, max_size=2),
            }
        ),
        "plugin": hostile_values | st.dictionaries(odd_text, hostile_values, max_size=2),
        "agent": hostile_values
        | st.dictionaries(odd_text | st.just("main"), agent_tables, max_size=2),
    }
)


def check_outcome(path: Path) -> None:
    """Load ``path`` both ways; only success or a coded one-line TetherError may come out."""
    error: tether.TetherError | None = None
    try:
        tether.load_kernel(path, entry_points=False)
    except tether.TetherError as exc:
        error = exc
    if error is not None:
        assert error.code in tether.ErrorCode
        assert ERROR_LINE.match(str(error)), str(error)
    result = CliRunner().invoke(cli, ["check", "--profile", str(path)])
    assert result.exit_code in (0, 2), result.output
    if not isinstance(result.exception, SystemExit | None):
        raise AssertionError("tether check raised") from result.exception
    assert "Traceback" not in result.stderr
    if result.exit_code == 2:
        (line,) = result.stderr.splitlines()
        assert line.startswith("ERROR: ")
        match = ERROR_LINE.match(line)
        assert match is not None, line
        assert match["code"] in tether.ErrorCode.__members__
        assert match["code"] not in ("UNEXPECTED_ERROR", "PLUGIN_UNEXPECTED_ERROR"), line


@given(data=raw_files)
def test_any_bytes_as_a_profile(tmp_path, data):
    path = tmp_path / "tether.toml"
    path.write_bytes(data)
    check_outcome(path)


@given(document=profiles, bom=st.booleans())
def test_any_values_in_the_known_keys(tmp_path, document, bom):
    path = tmp_path / "tether.toml"
    path.write_bytes(encoded(toml_document(document), bom))
    check_outcome(path)


@given(
    agent=odd_text,
    key=st.sampled_from(["model", "instructions", "plugins", "description"]),
    value=hostile_values,
    base=hostile_values,
)
def test_any_values_in_tables_written_the_usual_way_and_extended(tmp_path, agent, key, value, base):
    (tmp_path / "base.toml").write_text(f"[tether]\nstore = {toml_value(base)}\n")
    path = tmp_path / "tether.toml"
    path.write_text(
        f'extends = "base.toml"\n[agent.{toml_string(agent)}]\n{key} = {toml_value(value)}\n'
    )
    check_outcome(path)
