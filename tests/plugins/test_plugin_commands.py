"""Commands that installed distributions add to the command line (``tether_cli_commands``).

Everything runs against real distributions installed into a throwaway venv that also sees the
workspace (so tether-acp and tether-skills-fs add ``tether acp`` and ``tether skills
validate`` there too): tether-fixture-commands adds two commands properly,
tether-fixture-bad-commands adds commands in every wrong way the command line must survive.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from tether.testing import scaled

RunTether = Callable[..., subprocess.CompletedProcess[str]]

BAD = "tether-fixture-bad-commands 0.3.0"


def _error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith("ERROR: ")
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr.removeprefix("ERROR: ").rstrip("\n")


# ------------------------------------------------------------------------- commands that work


def test_hook_tether_cli_commands_adds_a_top_level_command(run_commands: RunTether):
    result = run_commands("greet", "World")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello World\n"
    assert result.stderr == ""


def test_hook_tether_cli_commands_adds_a_subcommand_to_a_built_in_group(
    run_commands: RunTether, tmp_path: Path
):
    for name in ("pdf", "docx"):
        (tmp_path / "skills" / name).mkdir(parents=True)
        (tmp_path / "skills" / name / "SKILL.md").write_text("---\nname: x\n---\n")
    result = run_commands("skills", "count", "skills")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2 skill folders: docx, pdf\n"


def test_first_party_commands_come_from_their_distributions(run_commands: RunTether):
    validate = run_commands("skills", "validate", "--help")
    assert validate.returncode == 0, validate.stderr
    assert "Check skills strictly against the Agent Skills standard" in validate.stdout


def test_a_plugin_commands_help_is_its_own(run_commands: RunTether):
    result = run_commands("greet", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: tether greet [OPTIONS] NAME\n")
    assert "Greet NAME (a command added by tether-fixture-commands)." in result.stdout


def test_help_lists_plugin_commands_from_metadata_without_importing_them(
    command_venv: Path, tmp_path: Path
):
    code = (
        "import sys\n"
        "from tether.cli import cli\n"
        "cli(['--help'], prog_name='tether', standalone_mode=False)\n"
        "cli(['skills', '--help'], prog_name='tether', standalone_mode=False)\n"
        "imported = [m for m in sys.modules if m.startswith(('tether_', 'pluggy'))]\n"
        "print('imported:', sorted(imported))\n"
    )
    result = subprocess.run(
        [str(command_venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=scaled(60),
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "imported: []"
    assert "  greet           From tether-fixture-commands 2.0.0: see its --help." in lines
    assert "  count     From tether-fixture-commands 2.0.0: see its --help." in lines
    assert "  validate  From tether-skills-fs 0.1.0: see its --help." in lines
    # The import that fails is never attempted: the command is listed all the same.
    assert "  missing-import  From tether-fixture-bad-commands 0.3.0: see its --help." in lines


def test_autoload_off_does_not_hide_plugin_commands(run_commands: RunTether):
    result = run_commands("greet", "off", extra_env={"TETHER_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello off\n"


# ------------------------------------------------------------------------- names that clash


def test_two_distributions_adding_one_command_is_a_conflict_naming_both(run_commands: RunTether):
    assert _error(run_commands("acp", "--help")) == (
        'conflicting plugin commands found for "tether acp": tether-acp 0.1.0, '
        f"{BAD}; uninstall all but one of these distributions (uv remove DIST) "
        "[PLUGIN_NAME_CONFLICT]"
    )


def test_help_marks_a_conflicting_command(run_commands: RunTether):
    result = run_commands("--help")
    assert result.returncode == 0, result.stderr
    assert "  acp             Conflict: 2 distributions add it; run it to see which." in (
        result.stdout.splitlines()
    )


def test_a_built_in_command_keeps_its_name(run_commands: RunTether):
    result = run_commands("run", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: tether run [OPTIONS] [PROMPTS]...\n")
    assert "fixture" not in result.stdout
    skills = run_commands("skills", "list", "--help")
    assert skills.returncode == 0, skills.stderr
    assert skills.stdout.startswith("Usage: tether skills list [OPTIONS]\n")


def test_help_warns_about_commands_that_are_never_run(run_commands: RunTether):
    result = run_commands("--help")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f'warning: {BAD} declares a command named "bad..name" in entry-point group '
        "tether.commands, which is not a command path: it is never run; use words of letters, "
        'digits, "-" and "_", joined by "."',
        f'warning: {BAD} declares command "tether nowhere sub", but "tether nowhere" is not a '
        "built-in group that takes plugin commands (those are: tether, tether skills): it is "
        "never run",
        f'warning: {BAD} declares command "tether run", the name of a built-in command: the '
        "plugin's command is never run; rename it in the plugin",
    ]
    skills = run_commands("skills", "--help")
    assert skills.stderr.splitlines() == [
        f'warning: {BAD} declares command "tether skills list", the name of a built-in '
        "command: the plugin's command is never run; rename it in the plugin",
    ]


def test_a_command_under_a_group_that_takes_none_is_an_error(run_commands: RunTether):
    assert _error(run_commands("nowhere", "sub")) == (
        f'{BAD} declares command "tether nowhere sub", but "tether nowhere" is not a built-in '
        "group that takes plugin commands (those are: tether, tether skills); report this to "
        "the maintainers of tether-fixture-bad-commands [PLUGIN_CONTRACT_VIOLATION]"
    )


# ------------------------------------------------------------------------- broken plugins


def test_hook_tether_cli_commands_that_raises_fails_only_its_command(run_commands: RunTether):
    assert _error(run_commands("explode")) == (
        'plugin "tether-fixture-bad-commands" (tether-fixture-bad-commands 0.3.0) raised in '
        "tether_cli_commands: OSError: no commands today; fix the plugin or its settings "
        "(--debug shows the traceback) [PLUGIN_HOOK_FAILED]"
    )
    assert run_commands("greet", "still").stdout == "hello still\n"


def test_hook_tether_cli_commands_returning_the_wrong_type_is_a_contract_violation(
    run_commands: RunTether,
):
    assert _error(run_commands("wrong")) == (
        'plugin "tether-fixture-bad-commands" (tether-fixture-bad-commands 0.3.0) broke the '
        "contract of tether_cli_commands: expected an iterable of Command, got str 'wrong'; "
        "report this to the maintainers of tether-fixture-bad-commands "
        "[PLUGIN_CONTRACT_VIOLATION]"
    )


def test_a_declared_command_the_hook_does_not_return_is_a_contract_violation(
    run_commands: RunTether,
):
    assert _error(run_commands("absent")) == (
        'plugin "tether-fixture-bad-commands" (tether-fixture-bad-commands 0.3.0) declares '
        'command "tether absent" (entry point "absent" in group tether.commands) but its '
        'tether_cli_commands returned no command named "absent" (it returned "acp", "run", '
        '"list", "crash"); report this to the maintainers of tether-fixture-bad-commands '
        "[PLUGIN_CONTRACT_VIOLATION]"
    )


def test_a_plugin_command_whose_import_fails_is_reported_with_its_distribution(
    run_commands: RunTether,
):
    assert _error(run_commands("missing-import")) == (
        'plugin "tether-fixture-bad-commands" (tether-fixture-bad-commands 0.3.0) failed to '
        "import: ModuleNotFoundError: No module named 'tether_fixture_no_such_dependency'; "
        "fix or reinstall tether-fixture-bad-commands (--debug shows the traceback), or "
        "uninstall it to drop tether missing-import [PLUGIN_IMPORT_FAILED]"
    )


def test_debug_shows_the_traceback_of_a_hook_that_raises(run_commands: RunTether):
    result = run_commands("--debug", "explode")
    assert result.returncode != 0
    assert "Traceback (most recent call last)" in result.stderr
    assert "OSError: no commands today" in result.stderr


def test_an_exception_in_a_plugin_command_names_its_plugin(run_commands: RunTether):
    greeter = _error(run_commands("greet", "x", "--fail"))
    assert greeter.startswith(
        'plugin "greeter" (tether-fixture-commands 2.0.0) failed: RuntimeError: cannot greet x '
        "(raised in tether_fixture_commands, line "
    )
    assert greeter.endswith("[PLUGIN_UNEXPECTED_ERROR]")
    # A distribution that adds only commands (no tether.plugins entry) is named by its name.
    crash = _error(run_commands("crash"))
    assert crash.startswith(
        'plugin "tether-fixture-bad-commands" (tether-fixture-bad-commands 0.3.0) failed: '
        "ValueError: the fixture crashed"
    )
    assert crash.endswith("[PLUGIN_UNEXPECTED_ERROR]")
