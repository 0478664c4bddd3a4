"""The tether command: version, exit status, the one-line ERROR contract."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import tether
from tether.cli import cli
from tether.testing import write_profile

ROOT = Path(__file__).parents[2]


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return CliRunner()


def test_version_matches_the_distribution():
    pyproject = tomllib.loads((ROOT / "kernel" / "pyproject.toml").read_text())
    assert tether.__version__ == pyproject["project"]["version"]
    result = CliRunner().invoke(cli, ["--version"])
    assert result.output == f"tether {tether.__version__}\n"


def test_the_console_script_runs():
    bindir = Path(sys.executable).parent
    result = subprocess.run(
        [str(bindir / "tether"), "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout == f"tether {tether.__version__}\n"


def test_check_without_a_profile_is_one_error_line_and_exit_2(runner, tmp_path):
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"ERROR: no tether.toml in {tmp_path}; create tether.toml there or pass --profile PATH "
        "[PROFILE_NOT_FOUND]\n"
    )


def test_invalid_toml_is_one_error_line_without_traceback(runner, tmp_path):
    path = write_profile(tmp_path, "[tether\nplugins = []\n")
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("ERROR: profile is not valid TOML: ")
    assert f"({path.resolve()}, line 1, column 8)" in result.stderr
    assert "Traceback" not in result.stderr


def test_debug_raises_the_error_instead(runner, tmp_path):
    write_profile(tmp_path, "[tether\n")
    result = runner.invoke(cli, ["--debug", "check"])
    assert isinstance(result.exception, tether.ProfileError)


def test_not_installed_first_party_plugin_exit_2(runner, tmp_path):
    write_profile(tmp_path, '[tether]\nplugins = ["spawn"]\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr.endswith(
        "uv add tether-spawn (entry-point autoload is off: TETHER_DISABLE_PLUGIN_AUTOLOAD is "
        "set) [PLUGIN_NOT_INSTALLED]\n"
    )


def test_check_an_empty_profile_prints_its_scopes(runner, tmp_path):
    path = write_profile(tmp_path, '[agent.main]\nmodel = "scripted:s.toml"\n')
    (tmp_path / "s.toml").write_text("steps = []\n")  # check reads the script
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"profile {path.resolve()}",
        "global",
        "  (no plugins)",
        "global > agent:main  model=scripted:s.toml",
        "  (no plugins)",
        "ok: 0 plugin instances in 2 scopes, 0 requirements met",
    ]


def test_check_shows_the_extends_chain(runner, tmp_path):
    base = write_profile(tmp_path, "[tether]\n", name="base.toml")
    path = write_profile(tmp_path, 'extends = "base.toml"\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        f"profile {path.resolve()}",
        f"  extends {base.resolve()}",
    ]


def test_plugins_with_nothing_installed(runner):
    result = runner.invoke(cli, ["plugins"])
    assert result.exit_code == 0
    # The suite turns entry-point autoload off, and the listing says so instead of "none".
    assert result.stdout == (
        "no plugins listed: entry-point autoload is off (TETHER_DISABLE_PLUGIN_AUTOLOAD)\n"
    )


def test_plugins_json_with_nothing_installed(runner):
    result = runner.invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0
    assert result.stdout == '{\n  "profile": null,\n  "plugins": []\n}\n'


def test_unknown_command_is_a_usage_error(runner):
    result = runner.invoke(cli, ["frobnicate"])
    assert result.exit_code == 2


def test_python_dash_m_tether_runs_the_command():
    result = subprocess.run(
        [sys.executable, "-m", "tether", "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout == f"tether {tether.__version__}\n"


def test_check_fails_on_an_agent_model_no_plugin_provides(runner, tmp_path):
    path = write_profile(tmp_path, '[agent.main]\nmodel = "deepseek:deepseek-chat"\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr == (
        "ERROR: no model provider for \"deepseek\" (spec 'deepseek:deepseek-chat') "
        f"({path.resolve()}, "
        '[agent.main] model); "deepseek:" comes with the plugin "openai"; tether-openai is '
        'installed: add "openai" to [tether] plugins (or the agent\'s plugins); the prefixes '
        "this profile offers: function, scripted [MODEL_SPEC_UNKNOWN]\n"
    )


def test_check_fails_on_missing_agent_instructions(runner, tmp_path):
    write_profile(tmp_path, '[agent.main]\ninstructions = "missing.md"\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert "[INSTRUCTIONS_INVALID]" in result.stderr


def test_check_fails_on_an_unknown_store_spec(runner, tmp_path):
    path = write_profile(tmp_path, '[tether]\nstore = "postgres://db"\n')
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"ERROR: unknown session store 'postgres://db' ({path.resolve()}, [tether] store); "
        'known stores: "sqlite:PATH" (one SQLite file, durable), "memory" (nothing survives the '
        "process); a plugin in [tether] plugins can offer others [STORE_SPEC_INVALID]\n"
    )
