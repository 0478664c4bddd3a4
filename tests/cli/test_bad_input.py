"""Bad input on the command line: a clear error that says what, where and how to fix it, never
a traceback, and nothing left behind (no session for a prompt that was refused)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import tether
from tether.cli import cli
from tether.cli._sessions import dumps_deep
from tether.store import SessionHeader, SQLiteStore
from tether.testing import write_profile

#: Deeper than Python's default recursion limit (1000), as a long delegation chain can be.
CHAIN = 1500


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[[steps]]\ntext = "hello"\n')
    write_profile(tmp_path, '[agent.main]\nmodel = "scripted:s.toml"\n')
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def error_line(result) -> str:
    """The one ERROR line of a failed command."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("ERROR: ")
    return line


def stored_sessions(folder) -> list[str]:
    path = folder / ".tether" / "sessions.db"
    if not path.exists():
        return []
    connection = sqlite3.connect(path)
    try:
        return [row[0] for row in connection.execute("SELECT id FROM sessions")]
    finally:
        connection.close()


# -- text arguments that are not UTF-8 --------------------------------------------------------


def test_a_prompt_that_is_not_utf8_is_refused_before_a_session_exists(project):
    assert invoke("run", "fine").exit_code == 0
    before = stored_sessions(project)
    result = invoke("run", "first", "ab\udcffc")  # what Python makes of the bytes ab\xffc
    assert result.exit_code == 2
    assert "Error: Invalid value for '[PROMPTS]...': 'ab\\xffc' is not UTF-8 text (byte 0xff " in (
        result.stderr
    )
    assert "pass it as UTF-8" in result.stderr
    assert stored_sessions(project) == before  # no new, empty session


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--session", "\udcff", "hi"],
        ["run", "--agent", "m\udcffain", "hi"],
        ["run", "--model", "scripted:\udcff", "hi"],
        ["context", "--prompt", "\udcff"],
        ["sessions", "show", "ses_\udcff"],
        ["sessions", "tree", "ses_\udcff"],
        ["sessions", "send", "ses_1", "h\udce9llo"],
    ],
)
def test_every_text_argument_that_is_not_utf8_is_a_usage_error(project, args):
    result = invoke(*args)
    assert result.exit_code == 2
    assert "is not UTF-8 text (byte 0x" in result.stderr
    assert "Traceback" not in result.stderr
    assert stored_sessions(project) == []


# -- model specs and script files ---------------------------------------------------------------


@pytest.mark.parametrize("spec", ["function::", "function::x", "function:x:", "function:..a:b"])
def test_a_malformed_function_spec_is_model_spec_unknown(project, spec):
    line = error_line(invoke("run", "--model", spec, "hi"))
    assert "is not of the form module:function" in line
    assert line.endswith("[MODEL_SPEC_UNKNOWN]")


def test_a_function_spec_naming_something_not_callable_is_model_spec_unknown(project):
    line = error_line(invoke("run", "--model", "function:os:sep", "hi"))
    assert "function model 'os:sep' names a str, not a function" in line


def test_a_function_module_that_raises_on_import_is_model_spec_unknown(project):
    (project / "exploding.py").write_text("raise RuntimeError('boom at import')\n")
    line = error_line(invoke("run", "--model", "function:exploding:model", "hi"))
    assert "cannot be imported: RuntimeError: boom at import" in line
    assert "fix the module (--debug shows the traceback)" in line


def test_a_script_that_is_not_utf8_says_where(project):
    (project / "s.toml").write_bytes(b'[[steps]]\ntext = "caf\xe9"\n')
    line = error_line(invoke("run", "hi"))
    assert line == (
        "ERROR: model script is not UTF-8 text: byte 0xe9 cannot start or continue a character "
        f"at line 2, column 12 ({project / 's.toml'}); save the file as UTF-8 [SCRIPT_INVALID]"
    )
    assert stored_sessions(project) == []


def test_a_script_that_is_a_folder_says_so(project):
    (project / "s.toml").unlink()
    (project / "s.toml").mkdir()
    line = error_line(invoke("run", "hi"))
    assert "model script is a folder, not a file" in line
    assert line.endswith("[SCRIPT_INVALID]")


def test_a_script_that_is_a_fifo_is_refused_without_reading_it(project):
    (project / "s.toml").unlink()
    os.mkfifo(project / "s.toml")  # reading it would wait for a writer forever
    line = error_line(invoke("run", "hi"))
    assert "model script is a FIFO (named pipe), not a regular file" in line


def test_a_script_behind_a_dangling_symlink_names_the_target(project):
    (project / "s.toml").unlink()
    (project / "s.toml").symlink_to(project / "gone.toml")
    line = error_line(invoke("run", "hi"))
    assert f"is a symbolic link to {project / 'gone.toml'}, which does not exist" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file whatever its mode")
def test_a_script_that_cannot_be_read_says_so(project):
    (project / "s.toml").chmod(0)
    try:
        line = error_line(invoke("run", "hi"))
    finally:
        (project / "s.toml").chmod(0o644)
    assert "model script cannot be read: Permission denied" in line
    assert "make it readable by this user" in line


def test_a_script_with_a_byte_order_mark_is_read(project):
    (project / "s.toml").write_bytes(b'\xef\xbb\xbf[[steps]]\ntext = "hello"\n')
    (project / "s.json").write_bytes(b'\xef\xbb\xbf{"steps": [{"text": "hi from json"}]}')
    assert invoke("run", "hi").stdout.splitlines()[1] == "hello"
    assert invoke("run", "--model", "scripted:s.json", "hi").stdout.splitlines()[1] == (
        "hi from json"
    )


def test_a_script_nested_too_deeply_is_script_invalid(project):
    (project / "s.json").write_text("[" * 5000 + "]" * 5000)
    line = error_line(invoke("run", "--model", "scripted:s.json", "hi"))
    assert line.endswith("[SCRIPT_INVALID]")


# -- profiles ---------------------------------------------------------------------------------


def test_a_deeply_nested_profile_is_profile_invalid_toml(project):
    (project / "tether.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    line = error_line(invoke("check"))
    assert "profile nests tables or arrays more than 100 levels deep" in line
    assert line.endswith("[PROFILE_INVALID_TOML]")


def test_a_profile_nested_past_the_limit_says_where(project):
    (project / "tether.toml").write_text("[plugin.x]\nroots = " + "[" * 120 + "]" * 120 + "\n")
    line = error_line(invoke("check"))
    assert "plugin.x.roots[0][0][0] ..." in line


def test_a_profile_with_a_byte_order_mark_is_read(project):
    (project / "tether.toml").write_bytes(b'\xef\xbb\xbf[agent.main]\nmodel = "scripted:s.toml"\n')
    result = invoke("check")
    assert result.exit_code == 0, result.output


def test_a_profile_that_is_not_utf8_says_where(project):
    (project / "tether.toml").write_bytes(b'[agent.main]\nmodel = "scripted:\xff.toml"\n')
    line = error_line(invoke("check"))
    assert line == (
        "ERROR: profile is not UTF-8 text: byte 0xff cannot start or continue a character "
        f"({project / 'tether.toml'}, line 2, column 19); save the file as UTF-8 "
        "[PROFILE_INVALID_TOML]"
    )


def test_a_profile_larger_than_any_profile_is_refused_unread(project):
    with (project / "tether.toml").open("r+b") as file:
        file.truncate(17 * 2**20)  # sparse: a disk image, a log
    line = error_line(invoke("check"))
    assert "profile is larger than 16 MiB" in line
    assert line.endswith("[PROFILE_INVALID_TOML]")


def test_an_integer_too_long_to_read_is_profile_invalid_toml(project):
    (project / "tether.toml").write_text("x = " + "9" * 5000 + "\n")
    line = error_line(invoke("check"))
    assert "Exceeds the limit (4300 digits) for integer string conversion" in line
    assert line.endswith("[PROFILE_INVALID_TOML]")


def test_extends_naming_a_folder_says_it_is_a_folder(project):
    (project / "team").mkdir()
    (project / "tether.toml").write_text('extends = "team"\n')
    line = error_line(invoke("check"))
    assert f"extended profile 'team' is a folder, not a file (looked for {project / 'team'})" in (
        line
    )
    assert f"pass the profile file itself, e.g. {project / 'team' / 'tether.toml'}" in line


def test_a_profile_path_that_is_a_folder_says_it_is_a_folder(project):
    with pytest.raises(tether.ProfileError) as info:
        tether.load_kernel(project)
    assert info.value.code is tether.ErrorCode.PROFILE_NOT_FOUND
    assert "profile is a folder, not a file" in str(info.value)


def test_a_tether_toml_that_is_a_fifo_is_refused_without_reading_it(project):
    (project / "tether.toml").unlink()
    os.mkfifo(project / "tether.toml")
    line = error_line(invoke("check"))
    assert "tether.toml in" in line
    assert "is a FIFO (named pipe), not a regular file" in line


def test_a_store_path_with_a_nul_character_is_store_spec_invalid(project):
    (project / "tether.toml").write_text(
        '[tether]\nstore = "sqlite:a\\u0000b"\n[agent.main]\nmodel = "scripted:s.toml"\n'
    )
    for command in (["check"], ["run", "hi"]):
        line = error_line(invoke(*command))
        assert "contains a NUL character" in line
        assert line.endswith("[STORE_SPEC_INVALID]")


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ("", "the agent name is empty ('')"),
        ("a/b", "'a/b' is not an agent name"),
        ("helper", 'unknown agent "helper"'),
    ],
)
def test_an_agent_name_that_is_not_declared_says_why(project, agent, says):
    line = error_line(invoke("run", "--agent", agent, "hi"))
    assert says in line
    assert "main" in line  # the agents there are
    assert line.endswith("[UNKNOWN_AGENT]")
    assert stored_sessions(project) == []


# -- a delegation chain deeper than Python's recursion limit ------------------------------------


async def store_chain(folder) -> None:
    store = SQLiteStore(folder / ".tether" / "sessions.db")
    try:
        for n in range(CHAIN):
            await store.create(
                SessionHeader(
                    id=f"s{n}",
                    created_at=float(n),
                    parent_session=f"s{n - 1}" if n else None,
                    origin="subagent" if n else "user",
                    delegation_depth=n,
                )
            )
    finally:
        await store.aclose()


def test_sessions_tree_json_prints_a_chain_deeper_than_the_recursion_limit(project):
    anyio.run(store_chain, project)
    result = invoke("sessions", "tree", "s0", "--json")
    assert result.exit_code == 0, result.output
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(CHAIN * 4)  # only to read the answer back here
    try:
        document = json.loads(result.stdout)
    finally:
        sys.setrecursionlimit(limit)
    assert document["total"] == CHAIN
    node, depth = document, 0
    while node["children"]:
        (node,) = node["children"]
        depth += 1
        assert node["id"] == f"s{depth}"
    assert depth == CHAIN - 1
    lines = invoke("sessions", "tree", "s0", "--limit", str(CHAIN)).stdout.splitlines()
    assert len(lines) == CHAIN


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=30,
)


@given(value=json_values, ensure_ascii=st.booleans())
def test_dumps_deep_writes_what_json_dumps_writes(value, ensure_ascii):
    assert dumps_deep(value, ensure_ascii=ensure_ascii) == json.dumps(
        value, indent=2, ensure_ascii=ensure_ascii
    )


def test_a_list_limit_sqlite_cannot_hold_is_a_usage_error(project):
    result = invoke("sessions", "list", "--limit", "99999999999999999999")
    assert result.exit_code == 2
    assert "Error: Invalid value for '--limit': 99999999999999999999 is not in the range" in (
        result.stderr
    )
