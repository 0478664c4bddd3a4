"""``tether skills list|show|validate``: the catalog an agent sees, one skill, a strict check."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.skills import SkillDefinition, render_skill_content
from tether.testing import write_profile

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
    result = runner.invoke(cli, ["skills", "list", "--agent", "helper"])
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
    result = runner.invoke(cli, ["skills", "list", "--agent", "main"])
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
    default = runner.invoke(cli, ["skills", "list"])
    named = runner.invoke(cli, ["skills", "list", "--agent", "main"])
    assert default.exit_code == 0, default.output
    assert default.stdout == named.stdout


def test_list_json(runner, project):
    result = runner.invoke(cli, ["skills", "list", "--agent", "main", "--json"])
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
    result = runner.invoke(cli, ["skills", "list", "--agent", "helper", "--json"])
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
    result = runner.invoke(cli, ["skills", "list", "--agent", "mian"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith('ERROR: unknown agent "mian"')
    assert result.stderr.endswith("[UNKNOWN_AGENT]\n")


# ----------------------------------------------------------------------------- show


def test_show_prints_the_rendered_skill_content(runner, project):
    result = runner.invoke(cli, ["skills", "show", "alpha", "--agent", "helper"])
    assert result.exit_code == 0, result.output
    expected = definition("alpha", "project", "project", "Alpha, as the project wrote it.")
    assert result.stdout == render_skill_content(expected) + "\n"


def test_show_for_an_agent_loads_its_nearest_skill(runner, project):
    result = runner.invoke(cli, ["skills", "show", "alpha", "--agent", "main"])
    assert result.exit_code == 0, result.output
    expected = definition("alpha", "main-only", "agent", "Alpha, for main.")
    assert result.stdout == render_skill_content(expected) + "\n"


def test_show_an_unknown_name_is_one_error_line_with_close_names(runner, project):
    result = runner.invoke(cli, ["skills", "show", "alpah", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        'ERROR: unknown skill "alpah" (scope global > agent:helper); did you mean "alpha"? '
        "[UNKNOWN_SKILL]\n"
    )


def test_show_an_unknown_name_with_nothing_close_lists_the_skills(runner, project):
    result = runner.invoke(cli, ["skills", "show", "search", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stderr == (
        'ERROR: unknown skill "search" (scope global > agent:helper); known skills: alpha, beta, '
        "gamma [UNKNOWN_SKILL]\n"
    )


def test_show_a_name_that_is_not_a_skill_name(runner, project):
    result = runner.invoke(cli, ["skills", "show", "Alpha", "--agent", "helper"])
    assert result.exit_code == 2
    assert result.stderr == (
        'ERROR: "Alpha" is not a skill name (kebab-case a-z and 0-9, at most 64 characters) '
        '(scope global > agent:helper); did you mean "alpha"? [UNKNOWN_SKILL]\n'
    )


def test_show_an_unknown_name_stays_one_line_when_the_catalog_is_incomplete(runner, project):
    profile = PROFILE.replace('source = "user"\n', 'source = "user"\ncomplete = false\n')
    write_profile(project, profile)
    result = runner.invoke(cli, ["skills", "show", "alpah", "--agent", "helper"])
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
        'ERROR: path "nope" does not exist; pass skill directories, SKILL.md files or folders '
        "of skills\n"
    )


def test_validate_without_paths_is_a_usage_error(runner):
    result = runner.invoke(cli, ["skills", "validate"])
    assert result.exit_code == 2


def test_the_cli_imports_no_yaml_until_a_skill_is_validated():
    code = "import sys, tether.cli; print('yaml' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout == "False\n", result.stderr
