"""``tether mcp list``, ``tether check`` and ``tether context`` with real MCP servers, and the
settings a profile can get wrong."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli

from .servers import time_server

ROOT = Path(__file__).parents[2]


def write(folder: Path, text: str) -> Path:
    path = folder / "tether.toml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def toml_list(argv: list[str]) -> str:
    return "[" + ", ".join(f'"{arg}"' for arg in argv) + "]"


@pytest.fixture(autouse=True)
def installed_plugins(monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)


@pytest.fixture
def profile(tmp_path):
    command, *args = time_server()
    return write(
        tmp_path,
        f"""
        [tether]
        plugins = ["mcp"]
        store = "memory"

        [[plugin.mcp.servers]]
        name = "time"
        command = "{command}"
        args = {toml_list(args)}
        needs_approval = ["convert_time"]

        [agent.main]
        plugins = ["mcp"]
        model = "function:x"

        [[agent.main.plugin.mcp.servers]]
        name = "broken"
        command = "{sys.executable}"
        args = ["-c", "import sys; sys.stderr.write('no token for the server'); sys.exit(4)"]
        """,
    )


def test_mcp_list_shows_every_server_its_layer_status_and_tools(profile):
    result = CliRunner().invoke(cli, ["mcp", "list", "--profile", str(profile)])
    assert result.exit_code == 1, result.output  # one server could not start
    lines = result.output.splitlines()
    assert lines[0].startswith("global: time (stdio, lazy): ")
    assert lines[1].startswith("  status: ready in ")
    assert lines[1].endswith(": 2 tools, 0 resources, 0 prompts")
    assert "  tool time__get_current_time (read-only)" in lines
    assert "  tool time__convert_time (read-only, needs approval)" in lines
    broken = lines.index(next(line for line in lines if line.startswith("agent main: broken")))
    assert "no token for the server" in lines[broken + 1]
    assert lines[broken + 1].startswith('  status: failed: the MCP server "broken"')


def test_mcp_list_offline_starts_nothing(profile):
    result = CliRunner().invoke(cli, ["mcp", "list", "--offline", "--profile", str(profile)])
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0] for line in result.output.splitlines()] == [
        "global",
        "agent main",
    ]


def test_check_starts_eager_servers_and_reports_each_failure(tmp_path):
    command, *args = time_server()
    profile = write(
        tmp_path,
        f"""
        [tether]
        plugins = ["mcp"]
        store = "memory"

        [[plugin.mcp.servers]]
        name = "time"
        command = "{command}"
        args = {toml_list(args)}
        start = "eager"

        [[plugin.mcp.servers]]
        name = "lazy"
        command = "no-such-mcp-server-lazy"

        [[plugin.mcp.servers]]
        name = "missing"
        command = "no-such-mcp-server"
        start = "eager"
        """,
    )
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile)])
    assert result.exit_code == 2, result.output
    assert "tool source mcp:time: 2 tools" in result.stdout.splitlines()
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1  # the lazy server is not started by check
    assert 'the MCP server "missing" (`no-such-mcp-server`) could not start' in errors[0]
    assert "(command not found?)" in errors[0]
    assert errors[0].endswith("[TOOL_SOURCE_FAILED]")


def test_context_lists_mcp_tools_like_any_other(tmp_path):
    command, *args = time_server()
    profile = write(
        tmp_path,
        f"""
        [tether]
        plugins = ["mcp"]
        store = "memory"

        [[plugin.mcp.servers]]
        name = "time"
        command = "{command}"
        args = {toml_list(args)}
        exclude = ["convert_time"]

        [agent.main]
        model = "function:x"
        """,
    )
    result = CliRunner().invoke(cli, ["context", "--project-code", "--profile", str(profile)])
    assert result.exit_code == 0, result.output
    assert "== tools (1)" in result.output
    assert "time__get_current_time: Get current time in a specific timezone" in result.output


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ('name = "a"\ncommand = "x"\nurl = "http://127.0.0.1:1/mcp"', "exactly one of command"),
        ('name = "a"', "exactly one of command"),
        ('name = "a__b"\ncommand = "x"', "no '__'"),
        ('name = "a"\nurl = "ftp://host/mcp"', "must start with http:// or https://"),
        ('name = "a"\nurl = "http://h/mcp"\nargs = ["x"]', "args, env and cwd are for command"),
        ('name = "a"\ncommand = "x"\nheaders = { A = "b" }', "headers are for url servers"),
        ('name = "a"\ncommand = "x"\ntimeout = 0', "greater than 0"),
        ('name = "a"\ncommand = "x"\nstart = "sometimes"', "'lazy' or 'eager'"),
        ('name = "a"\ncommand = "x"\nsecret = 1', "Extra inputs are not permitted"),
    ],
)
def test_bad_server_settings_fail_at_load(tmp_path, entry, expected):
    profile = write(
        tmp_path,
        '[tether]\nplugins = ["mcp"]\nstore = "memory"\n\n[[plugin.mcp.servers]]\n' + entry + "\n",
    )
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile)])
    assert result.exit_code == 2
    assert expected in result.stderr
    assert result.stderr.rstrip().endswith("[PLUGIN_SETTINGS_INVALID]")


def test_two_servers_of_one_name_in_one_layer_fail_at_load(tmp_path):
    profile = write(
        tmp_path,
        """
        [tether]
        plugins = ["mcp"]
        [[plugin.mcp.servers]]
        name = "same"
        command = "x"
        [[plugin.mcp.servers]]
        name = "same"
        command = "y"
        """,
    )
    result = CliRunner().invoke(cli, ["check", "--profile", str(profile)])
    assert result.exit_code == 2
    assert "server name(s) given twice in one layer: same" in result.stderr


def test_a_variable_that_is_not_set_fails_the_start_by_name(tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_TEST_UNSET_TOKEN", raising=False)
    command, *args = time_server()
    profile = write(
        tmp_path,
        f"""
        [tether]
        plugins = ["mcp"]
        store = "memory"
        [[plugin.mcp.servers]]
        name = "time"
        command = "{command}"
        args = {toml_list(args)}
        env = {{ TOKEN = "${{TETHER_TEST_UNSET_TOKEN}}" }}
        [agent.main]
        model = "function:x"
        """,
    )
    result = CliRunner().invoke(cli, ["context", "--project-code", "--profile", str(profile)])
    assert result.exit_code == 2
    assert "env TOKEN uses ${TETHER_TEST_UNSET_TOKEN}, which is not set" in result.stderr


def test_the_example_runs_two_real_servers(tmp_path, monkeypatch):
    """examples/mcp, copied: its git server reads the repository two folders up."""
    shutil.copytree(
        ROOT / "examples" / "mcp",
        tmp_path / "examples" / "mcp",
        ignore=shutil.ignore_patterns(".tether"),
    )
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    for argv in (
        ["init", "-q", "-b", "main"],
        [
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first light",
        ],
    ):
        subprocess.run([git, *argv], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    prompt = "What time is it in Tokyo when it is noon in London?"
    result = CliRunner().invoke(
        cli, ["run", "--profile", str(tmp_path / "examples" / "mcp" / "tether.toml"), prompt]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "<- time__convert_time: { (+14 more lines)" in lines
    assert any(line.startswith("<- git__git_log: Commit history:") for line in lines)
    assert lines[-2].startswith("When it is 12:00 in London it is 21:00 in Tokyo")
