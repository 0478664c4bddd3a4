"""``tether skills list|show|validate``: the catalog an agent sees, one skill, a strict check.

``validate`` is added to the ``skills`` group by tether-skills-fs (``tether_cli_commands``),
which the workspace installs: these tests run it through the command line as a user does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.skills import SkillDefinition, render_skill_content
from tether.testing import scaled, write_profile

from ..processes import plugin_env

# A local plugin (plugins/skillset.py): each entry of its `providers` setting becomes one skill
# provider in the plugin instance's scope layer.
SKILLSET = '''
"""Skill providers described entirely by settings, for the CLI tests."""

from __future__ import annotations

from pathlib import Path

import tether
from tether.skills import (
    SkillCandidate,
    SkillDefinition,
    SkillObservation,
    SkillProviderFactory,
)


class ProviderSpec(tether.PluginSettings):
    name: str
    source: str
    rank: float
    skills: dict[str, str]
    complete: bool = True


class Settings(tether.PluginSettings):
    providers: list[ProviderSpec]


class Provider:
    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec
        self.name = spec.name

    async def list(self, *, cwd: Path) -> SkillObservation:
        candidates = tuple(
            SkillCandidate(
                name=name,
                description=description,
                provider=self.name,
                source=self.spec.source,
                rank=self.spec.rank,
                locator=name,
            )
            for name, description in self.spec.skills.items()
        )
        return SkillObservation(candidates=candidates, complete=self.spec.complete)

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition:
        return SkillDefinition(
            name=candidate.locator,
            description=candidate.description,
            provider=self.name,
            source=self.spec.source,
            content=f"# {candidate.name}\\n\\nThe body from provider {self.name}.",
        )


@tether.hookimpl
def tether_settings_model():
    return Settings


@tether.hookimpl
def tether_skill_providers(settings: Settings):
    return [
        SkillProviderFactory(spec.name, lambda control, spec=spec: Provider(spec))
        for spec in settings.providers
    ]
'''

# Global layer: "project" (rank 10) and "user" (rank 20) both offer alpha; the agent main
# mounts its own instance whose provider offers alpha at rank 99 and still wins it (nearest
# layer). The agent helper mounts nothing and sees the global layer.
PROFILE = """
[tether]
plugins = ["skillset"]
plugin_dirs = ["plugins"]

[[plugin.skillset.providers]]
name = "project"
source = "project"
rank = 10
skills = { alpha = "Alpha, as the project wrote it.", beta = "Beta." }

[[plugin.skillset.providers]]
name = "user"
source = "user"
rank = 20
skills = { alpha = "Alpha, as the user wrote it.", gamma = "Gamma." }

[agent.main]
plugins = ["skillset"]

[[agent.main.plugin.skillset.providers]]
name = "main-only"
source = "agent"
rank = 99
skills = { alpha = "Alpha, for main." }

[agent.helper]
"""


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return CliRunner()


@pytest.fixture
def project(tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "skillset.py").write_text(SKILLSET, encoding="utf-8")
    write_profile(tmp_path, PROFILE)
    return tmp_path


def definition(name: str, provider: str, source: str, description: str) -> SkillDefinition:
    return SkillDefinition(
        name=name,
        description=description,
        provider=provider,
        source=source,
        content=f"# {name}\n\nThe body from provider {provider}.",
    )


# ----------------------------------------------------------------------------- list


def test_list_shows_the_winner_per_name_and_what_it_shadows(runner, project):
    result = runner.invoke(cli, ["skills", "list", "--project-code", "--agent", "helper"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "skills of agent helper (global > agent:helper): 3 skills",
        "NAME   PROVIDER  SOURCE   RANK  LAYER   DESCRIPTION",
        "alpha  project   project  10    global  Alpha, as the project wrote it.",
        "  shadows alpha from provider user (source user, rank 20)",
        "beta   project   project  10    global  Beta.",
        "gamma  user      user     20    global  Gamma.",
    ]
    assert result.stderr == ""


def test_list_for_an_agent_resolves_through_its_scope_chain(runner, project):
    result = runner.invoke(cli, ["skills", "list", "--project-code", "--agent", "main"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "skills of agent main (global > agent:main): 3 skills"
    # The agent's layer wins alpha although its rank (99) is the worst: nearest layer first.
    assert lines[2].split()[:5] == ["alpha", "main-only", "agent", "99", "agent:main"]
    assert sorted(lines[3:5]) == [  # in the order the registry reports them
        "  shadows alpha from provider project (source project, rank 10)",
        "  shadows alpha from provider user (source user, rank 20)",
    ]


def test_list_without_agent_uses_the_agent_run_would_use(runner, project):
    default = runner.invoke(cli, ["skills", "list", "--project-code"])
    named = runner.invoke(cli, ["skills", "list", "--project-code", "--agent", "main"])
    assert default.exit_code == 0, default.output
    assert default.stdout == named.stdout


def test_list_json(runner, project):
    result = runner.invoke(cli, ["skills", "list", "--project-code", "--agent", "main", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["agent"], document["scope"], document["complete"]) == (
        "main",
        "global > agent:main",
        True,
    )
    alpha = document["skills"][0]
    alpha["shadows"].sort(key=lambda loser: loser["rank"])  # the registry's order aside
    assert alpha == {
        "name": "alpha",
        "provider": "main-only",
        "source": "agent",
        "rank": 99.0,
        "path": None,
        "description": "Alpha, for main.",
        "when_to_use": None,
        "invocation": {"model_invocable": True, "user_invocable": True},
        "layer": "agent:main",
        "shadows": [
            {
                "name": "alpha",
                "provider": "project",
                "source": "project",
                "rank": 10.0,
                "path": None,
            },
            {"name": "alpha", "provider": "user", "source": "user", "rank": 20.0, "path": None},
        ],
    }
    assert [s["name"] for s in document["skills"]] == ["alpha", "beta", "gamma"]


def test_list_notes_an_incomplete_catalog(runner, project):
    profile = PROFILE.replace('source = "user"\n', 'source = "user"\ncomplete = false\n')
    write_profile(project, profile)
    result = runner.invoke(cli, ["skills", "list", "--project-code", "--agent", "helper", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["complete"] is False
    # The registry collects an incomplete catalog again on every read; each warning shows once.
    warnings = result.stderr.splitlines()[:-1]
    assert len(warnings) == len(set(warnings)) >= 1
    assert all(line.startswith("warning: ") for line in warnings)
    assert result.stderr.splitlines()[-1] == (
        "note: the catalog is incomplete: a skill provider failed or returned a partial list; "
        "skills may be missing"
    )


def test_list_an_unknown_agent_is_one_error_line(runner, project):
    result = runner.invoke(cli, ["skills", "list", "--project-code", "--agent", "mian"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith('ERROR: unknown agent "mian"')
    assert result.stderr.endswith("[UNKNOWN_AGENT]\n")


# ----------------------------------------------------------------------------- show


def test_show_prints_the_rendered_skill_content(runner, project):
    result = runner.invoke(cli, ["skills", "show", "--project-code", "alpha", "--agent", "helper"])
    assert result.exit_code == 0, result.output
    expected = definition("alpha", "project", "project", "Alpha, as the project wrote it.")
    assert result.stdout == render_skill_content(expected) + "\n"


def test_show_for_an_agent_loads_its_nearest_skill(runner, project):
    result = runner.invoke(cli, ["skills", "show", "--project-code", "alpha", "--agent", "main"])
    assert result.exit_code == 0, result.output
    expected = definition("alpha", "main-only", "agent", "Alpha, for main.")
    assert result.stdout == render_skill_content(expected) + "\n"


def test_show_an_unknown_name_is_one_error_line_with_close_names(runner, project):
    result = runner.invoke(cli, ["skills", "show", "--project-code", "alpah", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        'ERROR: unknown skill "alpah" (scope global > agent:helper); did you mean "alpha"? '
        "[UNKNOWN_SKILL]\n"
    )


def test_show_an_unknown_name_with_nothing_close_lists_the_skills(runner, project):
    result = runner.invoke(cli, ["skills", "show", "--project-code", "search", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stderr == (
        'ERROR: unknown skill "search" (scope global > agent:helper); known skills: alpha, beta, '
        "gamma [UNKNOWN_SKILL]\n"
    )


def test_show_a_name_that_is_not_a_skill_name(runner, project):
    result = runner.invoke(cli, ["skills", "show", "--project-code", "Alpha", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stderr == (
        'ERROR: "Alpha" is not a skill name (kebab-case a-z and 0-9, at most 64 characters) '
        '(scope global > agent:helper); did you mean "alpha"? [UNKNOWN_SKILL]\n'
    )


def test_show_an_unknown_name_stays_one_line_when_the_catalog_is_incomplete(runner, project):
    profile = PROFILE.replace('source = "user"\n', 'source = "user"\ncomplete = false\n')
    write_profile(project, profile)
    result = runner.invoke(cli, ["skills", "show", "--project-code", "alpah", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stderr == (
        'ERROR: unknown skill "alpah" (scope global > agent:helper; the catalog is incomplete); '
        'did you mean "alpha"? [UNKNOWN_SKILL]\n'
    )


# ----------------------------------------------------------------------------- validate


def write_skill(folder: Path, name: str, frontmatter: str) -> Path:
    directory = folder / name
    directory.mkdir(parents=True)
    text = f"---\n{textwrap.dedent(frontmatter).lstrip()}---\n\nBody.\n"
    (directory / "SKILL.md").write_text(text, encoding="utf-8")
    return directory


def test_validate_a_valid_skill_exits_0(runner, tmp_path):
    write_skill(tmp_path, "pdf", "name: pdf\ndescription: Read PDFs.\n")
    result = runner.invoke(cli, ["skills", "validate", "pdf"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "1 skill checked: 1 valid\n"


def test_validate_needs_no_profile(runner, tmp_path):
    write_skill(tmp_path, "pdf", "name: pdf\ndescription: Read PDFs.\n")
    assert not (tmp_path / "tether.toml").exists()
    result = runner.invoke(cli, ["skills", "validate", "pdf/SKILL.md"])
    assert result.exit_code == 0, result.output


def test_validate_prints_path_problem_lines_and_exits_1(runner, tmp_path):
    write_skill(tmp_path / "skills", "good", "name: good\ndescription: Fine.\n")
    write_skill(tmp_path / "skills", "Bad", "name: Bad\ndescription: Shouty.\nauthor: me\n")
    write_skill(
        tmp_path / "skills", "tools", "name: tools\ndescription: T.\nallowed-tools: [Read, Grep]\n"
    )
    result = runner.invoke(cli, ["skills", "validate", "skills"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        'skills/Bad: unexpected field "author" (SKILL.md line 4); the standard allows only name, '
        "description, license, allowed-tools, metadata, compatibility: move it under metadata: "
        "or remove it",
        'skills/Bad: name "Bad" must be lowercase (SKILL.md line 2); use "bad" and rename the '
        "directory to match",
        "skills/tools: the frontmatter uses a flow sequence [...] (SKILL.md line 4, column 16); "
        "write the tools space-separated, as the standard does: allowed-tools: Read Grep",
        "3 skills checked: 1 valid, 2 with problems (3 problems)",
    ]


def test_validate_prints_warnings_without_failing(runner, tmp_path):
    write_skill(tmp_path, "pdf", "name: pdf\ndescription: Read PDFs.\nmetadata: v1\n")
    result = runner.invoke(cli, ["skills", "validate", "pdf"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "pdf: warning: metadata should be a mapping of string keys to string values, not a "
        "string (SKILL.md line 4); write it as indented key: value lines",
        "1 skill checked: 1 valid, 1 warning",
    ]


def test_validate_several_paths_checks_each_skill_once(runner, tmp_path):
    write_skill(tmp_path / "skills", "a", "name: a\ndescription: A.\n")
    write_skill(tmp_path / "skills", "b", "name: b\ndescription: B.\n")
    result = runner.invoke(cli, ["skills", "validate", "skills", "skills/a/SKILL.md"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "2 skills checked: 2 valid\n"


def test_validate_a_folder_without_skills_is_a_problem(runner, tmp_path):
    (tmp_path / "empty").mkdir()
    result = runner.invoke(cli, ["skills", "validate", "empty"])
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "empty: no skill here: neither empty/SKILL.md nor a subdirectory with a SKILL.md "
        "exists; pass a skill directory, its SKILL.md or a folder of skills",
        "0 skills checked: 0 valid; 1 path without skills",
    ]


def test_validate_a_missing_path_is_one_error_line_and_exit_2(runner, tmp_path):
    result = runner.invoke(cli, ["skills", "validate", "nope"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f'ERROR: path "nope" ({tmp_path / "nope"}) does not exist; pass skill directories, '
        "SKILL.md files or folders of skills [SKILL_PATH_NOT_FOUND]\n"
    )


def test_validate_without_paths_is_a_usage_error(runner):
    result = runner.invoke(cli, ["skills", "validate"])
    assert result.exit_code == 2


def test_validate_is_listed_as_a_command_of_tether_skills_fs(runner):
    result = runner.invoke(cli, ["skills", "--help"])
    assert result.exit_code == 0, result.output
    assert "  validate  From tether-skills-fs 0.1.0: see its --help." in result.stdout.splitlines()


def test_the_cli_imports_no_yaml_until_a_skill_is_validated():
    code = "import sys, tether.cli; print('yaml' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout == "False\n", result.stderr


# ----------------------------------------------------------------------------- skill folders
# The real providers (tether-skills-fs, tether-skill-tool), loaded by entry point as a user's
# profile loads them.

FS_PROFILE = """
[tether]
plugins = ["skills-fs", "skill-tool"]

[plugin.skills-fs]
roots = ["skills", "pkg:no_such_package_here/skills"]
project = false
user = false

[plugin.skill-tool]
body_max_chars = 120

[agent.main]
"""


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A profile over ``skills/``: one good skill, one with bad YAML, one FIFO."""
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write_profile(tmp_path, FS_PROFILE)
    skills = tmp_path / "skills"
    write_skill(skills, "good", "name: good\ndescription: Good.\n")
    write_skill(skills, "broken", "name: broken\ndescription: [unclosed\n")
    return skills


def test_list_ends_with_the_skipped_entries_and_why(runner, folders):
    result = runner.invoke(cli, ["skills", "list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "skills of agent main (global > agent:main): 1 skill",
        "NAME  PROVIDER   SOURCE  RANK  LAYER   DESCRIPTION",
        "good  skills-fs  custom  300   global  Good.",
    ]
    assert lines[3:6] == [
        "provider skills-fs looked in:",
        f"  {folders} (custom): 1 skill",
        "  pkg:no_such_package_here/skills (package): not read (see skipped below)",
    ]
    assert lines[6] == "skipped 2 entries (not offered to the agent):"
    assert lines[7].startswith(
        f"  {folders / 'broken' / 'SKILL.md'}: its frontmatter is not valid YAML: "
    )
    assert lines[8] == (
        "  pkg:no_such_package_here/skills: package no_such_package_here is not installed; "
        "install it (uv add ...) or remove the root from [plugin.skills-fs] roots"
    )
    assert len(lines) == 9
    assert result.stderr == ""


def test_list_json_has_the_skipped_entries(runner, folders):
    result = runner.invoke(cli, ["skills", "list", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [s["name"] for s in document["skills"]] == ["good"]
    broken, package = document["skipped"]
    assert broken["path"] == str(folders / "broken" / "SKILL.md")
    assert (broken["name"], broken["provider"]) == ("broken", "skills-fs")
    assert broken["reason"].startswith("its frontmatter is not valid YAML: ")
    assert package == {
        "path": "pkg:no_such_package_here/skills",
        "name": None,
        "provider": "skills-fs",
        "reason": "package no_such_package_here is not installed; install it (uv add ...) or "
        "remove the root from [plugin.skills-fs] roots",
    }


def test_show_a_skipped_skill_says_why(runner, folders):
    result = runner.invoke(cli, ["skills", "show", "broken"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        f'ERROR: skill "broken" was skipped (scope global > agent:main): '
        f"{folders / 'broken' / 'SKILL.md'}: its frontmatter is not valid YAML: "
    )
    assert result.stderr.endswith("[UNKNOWN_SKILL]\n")
    assert result.stderr.count("\n") == 1


def test_show_cuts_the_body_where_load_skill_does(runner, folders):
    path = folders / "good" / "SKILL.md"
    body = "\n".join(f"Step {n}." for n in range(1, 100))
    path.write_text(f"---\nname: good\ndescription: Good.\n---\n\n{body}\n", encoding="utf-8")
    result = runner.invoke(cli, ["skills", "show", "good"])
    assert result.exit_code == 0, result.output
    assert "Step 14.\n</skill_instructions>\n<skill_cut>\n" in result.stdout
    assert f"The rest is in {path}, from line 20 of 104:" in result.stdout


def test_check_warns_about_roots_and_skipped_skills_without_failing(runner, folders, tmp_path):
    profile = FS_PROFILE.replace('roots = ["skills", ', 'roots = ["skills", "missing", "nested", ')
    write_profile(tmp_path, profile)
    write_skill(tmp_path / "nested" / "team", "deep", "name: deep\ndescription: Deep.\n")
    result = runner.invoke(cli, ["check"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("ok: ")
    assert result.stderr.splitlines() == [
        f'warning: skill provider "skills-fs": skills root {tmp_path / "missing"} does not '
        "exist; create it, or fix or remove it in roots in [plugin.skills-fs]",
        f'warning: skill provider "skills-fs": skills root {tmp_path / "nested"} holds no skill '
        "where tether reads them (ROOT/NAME/SKILL.md or ROOT/NAME.md), but 1 SKILL.md file "
        f"deeper (the nearest: {tmp_path / 'nested' / 'team' / 'deep' / 'SKILL.md'}): point the "
        f"root at {tmp_path / 'nested' / 'team'}, or move each skill folder directly into the "
        "root",
        'warning: skill provider "skills-fs": skills root pkg:no_such_package_here/skills is '
        "skipped: package no_such_package_here is not installed; install it (uv add ...) or "
        "remove the root from [plugin.skills-fs] roots",
        f"warning: skill {folders / 'broken' / 'SKILL.md'} skipped: "
        + result.stderr.splitlines()[3].split(" skipped: ", 1)[1],
    ]
    assert "its frontmatter is not valid YAML" in result.stderr.splitlines()[3]


def test_check_with_a_provider_read_only_in_an_event_loop_warns_the_same(runner, folders, tmp_path):
    # skills-fs can be read without an event loop (SkillProviderBlocking); the skillset
    # provider cannot, so this check reads every provider in one, and says the same.
    alone = runner.invoke(cli, ["check"])
    assert alone.exit_code == 0, alone.output
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "skillset.py").write_text(SKILLSET, encoding="utf-8")
    profile = FS_PROFILE.replace(
        'plugins = ["skills-fs", "skill-tool"]',
        'plugins = ["skills-fs", "skill-tool", "skillset"]\nplugin_dirs = ["plugins"]',
    ).replace(
        "[agent.main]",
        '[[plugin.skillset.providers]]\nname = "memory"\nsource = "custom"\nrank = 300\n'
        'skills = { other = "Other." }\ncomplete = false\n\n[agent.main]',
    )
    write_profile(tmp_path, profile)
    mixed = runner.invoke(cli, ["check"])
    assert mixed.exit_code == 0, mixed.output
    assert mixed.stdout.splitlines()[-1].startswith("ok: ")
    assert mixed.stderr == alone.stderr
    assert "pkg:no_such_package_here/skills is skipped" in mixed.stderr


def test_list_survives_an_alias_bomb_and_a_fifo(folders, tmp_path):
    # The real command in its own process: a regression hangs with memory climbing, and the
    # timeout ends it rather than the test machine.
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 10)]
    bomb = folders / "bomb"
    bomb.mkdir()
    (bomb / "SKILL.md").write_text(
        "---\nname: bomb\n" + "\n".join(lines) + "\ndescription: *a9\n---\nbody\n",
        encoding="utf-8",
    )
    if hasattr(os, "mkfifo"):
        (folders / "piped").mkdir()
        os.mkfifo(folders / "piped" / "SKILL.md")
    env = plugin_env()
    tether = Path(sys.executable).parent / "tether"
    result = subprocess.run(
        [str(tether), "skills", "list", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=scaled(90),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [s["name"] for s in document["skills"]] == ["good"]
    reasons = {entry["name"]: entry["reason"] for entry in document["skipped"]}
    assert reasons["bomb"].startswith("its frontmatter expands to more than 10,000 values")
    if hasattr(os, "mkfifo"):
        assert reasons["piped"].startswith("it is a FIFO (named pipe), not a regular file")
    assert document["complete"] is True


def test_validate_several_missing_paths_name_each(runner, tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    result = runner.invoke(cli, ["skills", "validate", "a", "loop"])
    assert result.exit_code == 2
    assert result.stderr == (
        f'ERROR: paths "a" ({tmp_path / "a"}), "loop" ({tmp_path / "loop"}) (a symlink that '
        "leads nowhere: broken, or a loop) do not exist; pass skill directories, SKILL.md files "
        "or folders of skills [SKILL_PATH_NOT_FOUND]\n"
    )


def test_list_never_sends_control_characters_to_the_terminal(runner, folders):
    escape = "\x1b[2J"
    write_skill(folders, "shouty", 'name: shouty\ndescription: "Clear \\e[2J the screen"\n')
    (folders / f"bad{escape}").mkdir()
    (folders / f"bad{escape}" / "SKILL.md").write_text("---\nname: x\n---\n", encoding="utf-8")
    result = runner.invoke(cli, ["skills", "list"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout
    assert "Clear \\x1b[2J the screen" in result.stdout
    assert f"{folders}/bad\\x1b[2J/SKILL.md: " in result.stdout


# ----------------------------------------------------------------------------- where it looked
# The folders people already have (~/.claude/skills...), with a fake home folder.

DEFAULT_FS_PROFILE = """
[tether]
plugins = ["skills-fs", "skill-tool"]

[agent.main]
"""


@pytest.fixture
def home_project(tmp_path, monkeypatch):
    """A project (``project/``, a git checkout) run from, and an empty home folder."""
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    write_profile(project, DEFAULT_FS_PROFILE)
    monkeypatch.chdir(project)
    return project, home


def test_list_with_no_skill_says_every_folder_it_looked_in(home_project):
    project, home = home_project
    (home / ".claude" / "skills").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["skills", "list"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "skills of agent main (global > agent:main): 0 skills",
        "no skill found; provider skills-fs looked in:",
        f"  {project}/.agents/skills (project-agents): does not exist",
        f"  {project}/.claude/skills (project-claude): does not exist",
        f"  {home}/.agents/skills (user-agents): does not exist",
        f"  {home}/.claude/skills (user-claude): holds no skill",
        "a skill is a folder NAME/SKILL.md in one of these (docs/skills.md)",
    ]
    assert result.stderr == ""


def test_list_shows_the_folder_each_skill_came_from(home_project):
    project, home = home_project
    write_skill(home / ".claude" / "skills", "mine", "name: mine\ndescription: Mine.\n")
    write_skill(project / ".claude" / "skills", "ours", "name: ours\ndescription: Ours.\n")
    result = CliRunner().invoke(cli, ["skills", "list"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "skills of agent main (global > agent:main): 2 skills",
        "NAME  PROVIDER   SOURCE          RANK  LAYER   DESCRIPTION",
        "mine  skills-fs  user-claude     501   global  Mine.",
        "ours  skills-fs  project-claude  201   global  Ours.",
        "provider skills-fs looked in:",
        f"  {project}/.agents/skills (project-agents): does not exist",
        f"  {project}/.claude/skills (project-claude): 1 skill",
        f"  {home}/.agents/skills (user-agents): does not exist",
        f"  {home}/.claude/skills (user-claude): 1 skill",
    ]
    document = json.loads(CliRunner().invoke(cli, ["skills", "list", "--json"]).stdout)
    assert document["searched"][1] == {
        "path": f"{project}/.claude/skills",
        "source": "project-claude",
        "state": "read",
        "skills": 1,
        "provider": "skills-fs",
    }
    assert [s["path"] for s in document["skills"]] == [
        f"{home}/.claude/skills/mine/SKILL.md",
        f"{project}/.claude/skills/ours/SKILL.md",
    ]


def test_list_without_any_skill_provider_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    write_profile(tmp_path, "[tether]\nplugins = []\n\n[agent.main]\n")
    result = CliRunner().invoke(cli, ["skills", "list"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "skills of agent main (global > agent:main): 0 skills",
        'no skill provider is loaded: add "skills-fs" to [tether] plugins to read skill folders',
    ]
