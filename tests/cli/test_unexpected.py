"""The command line's catch-all: an exception that is not a TetherError (a bug) is one ERROR
line too, exception groups are reported by their most useful member, and Ctrl-C and click's
own exits keep their behaviour.

Each test adds a real command to the real ``tether`` group for its duration, and removes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.cli._group import describe_failure, plugin_modules
from tether.errors import ErrorCode
from tether.store import SQLiteStore, open_store


@pytest.fixture
def command() -> Iterator[Callable[[Callable[[], Any]], str]]:
    """Register ``body`` as the command ``tether probe`` (removed after the test)."""
    added: list[str] = []

    def add(body: Callable[[], Any]) -> str:
        cli.add_command(click.Command("probe", callback=body))
        added.append("probe")
        return "probe"

    try:
        yield add
    finally:
        for name in added:
            cli.commands.pop(name, None)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def a_tether_bug() -> None:
    open_store("sqlite:sessions.db", base=42)  # type: ignore[arg-type]  # a bad call into tether


def test_a_bug_in_tether_is_one_unexpected_error_line(command):
    result = invoke(command(a_tether_bug))
    assert result.exit_code == 2
    assert re.fullmatch(
        r"ERROR: unexpected error: TypeError: unsupported operand type\(s\) for /: 'int' and "
        r"'PosixPath' \(raised in tether\.store\._plugin, line \d+\); this is a bug in tether: "
        r"run the command again with --debug to see the traceback and report it to tether's "
        r"maintainers \[UNEXPECTED_ERROR\]\n",
        result.stderr,
    ), result.stderr


def test_debug_raises_the_bug_itself(command):
    result = invoke("--debug", command(a_tether_bug))
    assert isinstance(result.exception, TypeError)


async def _store_in_a_folder_and_a_bug(folder: str) -> None:
    async def store() -> None:
        SQLiteStore(folder)

    async def bug() -> None:
        raise ValueError("and a bug at the same time")

    async with anyio.create_task_group() as group:
        group.start_soon(bug)
        group.start_soon(store)


def test_a_task_groups_tether_error_is_reported_as_itself(command, tmp_path):
    result = invoke(command(lambda: anyio.run(_store_in_a_folder_and_a_bug, str(tmp_path))))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("ERROR: the session store is a folder, not a file")
    assert line.endswith("[STORE_UNAVAILABLE]")


async def _two_bugs() -> None:
    async def bug(text: str) -> None:
        raise KeyError(text)

    async with anyio.create_task_group() as group:
        group.start_soon(bug, "first")
        group.start_soon(bug, "second")


def test_a_task_groups_bugs_are_one_line_that_counts_them(command):
    result = invoke(command(lambda: anyio.run(_two_bugs)))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("ERROR: unexpected error: KeyError: '")
    assert "(and 1 more exception(s) at the same time)" in line
    assert line.endswith("[UNEXPECTED_ERROR]")


def test_ctrl_c_outside_tether_run_stays_clicks_abort(command):
    def interrupted() -> None:
        raise KeyboardInterrupt

    result = invoke(command(interrupted))
    assert result.exit_code == 1
    assert "Aborted!" in result.stderr
    assert "ERROR" not in result.stderr


def test_a_usage_error_raised_by_a_command_stays_a_usage_error(command):
    def bad_usage() -> None:
        raise click.BadParameter("not like that")

    result = invoke(command(bad_usage))
    assert result.exit_code == 2
    assert "Error: Invalid value: not like that" in result.stderr
    assert "ERROR" not in result.stderr


def test_a_bug_in_an_installed_plugins_module_names_that_plugin():
    from tether_skills_fs._parse import first_meaningful_line

    with pytest.raises(AttributeError) as info:
        first_meaningful_line(None)  # type: ignore[arg-type]  # the plugin's code fails
    error = describe_failure(info.value, plugin_modules(None))
    assert error.code is ErrorCode.PLUGIN_UNEXPECTED_ERROR
    assert str(error).startswith(
        f'plugin "skills-fs" (tether-skills-fs {metadata.version("tether-skills-fs")}) failed: '
        "AttributeError: 'NoneType' object has no attribute "
    )
    assert "(raised in tether_skills_fs._parse, line " in str(error)
