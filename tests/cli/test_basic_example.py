"""examples/basic, and what its missing script taught: ``tether check`` reads every ``scripted:``
script a profile names, so a missing or broken one fails the check as it fails ``tether run``
(its README's commands run in tests/examples/test_readmes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli

ROOT = Path(__file__).parents[2]


def check(profile: Path):
    return CliRunner().invoke(cli, ["check", "--profile", str(profile)])


@pytest.fixture(autouse=True)
def _builtins_only(monkeypatch):
    monkeypatch.setenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", "1")


def test_check_fails_on_a_missing_script_as_run_does(tmp_path):
    (tmp_path / "tether.toml").write_text('[agent.main]\nmodel = "scripted:gone.toml"\n')
    result = check(tmp_path / "tether.toml")
    assert result.exit_code == 2
    gone = tmp_path / "gone.toml"
    assert result.stderr == (
        f"ERROR: model script '{gone}' does not exist ({gone}); check the scripted:PATH spec "
        "(relative to the profile's folder) [SCRIPT_INVALID]\n"
    )
    ran = CliRunner().invoke(cli, ["run", "--profile", str(tmp_path / "tether.toml"), "hi"])
    assert (ran.exit_code, ran.stderr) == (2, result.stderr)


def test_check_fails_on_a_broken_script_of_an_agent_in_a_file_it_extends(tmp_path):
    # The path is relative to the file that names it (base/), as a session resolves it.
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "base.toml").write_text(
        '[agent.helper]\ndescription = "helps"\nmodel = "scripted:helper.toml"\n'
    )
    (tmp_path / "base" / "helper.toml").write_text("[[steps]]\ntext = \n")
    (tmp_path / "tether.toml").write_text(
        'extends = "base/base.toml"\n[agent.main]\nmodel = "scripted:main.toml"\n'
    )
    (tmp_path / "main.toml").write_text('[[steps]]\ntext = "hi"\n')
    result = check(tmp_path / "tether.toml")
    assert result.exit_code == 2
    assert result.stderr.startswith("ERROR: model script is not valid TOML: ")
    assert result.stderr.endswith(
        f"({tmp_path / 'base' / 'helper.toml'}); fix the TOML syntax there [SCRIPT_INVALID]\n"
    )
    (tmp_path / "base" / "helper.toml").write_text('[[steps]]\ntext = "fine"\n')
    assert check(tmp_path / "tether.toml").exit_code == 0


def test_the_basic_example_checks():
    result = check(ROOT / "examples" / "basic" / "tether.toml")
    assert result.exit_code == 0, result.stderr
    assert "global > agent:reviewer  model=scripted:reviewer.toml" in result.stdout
