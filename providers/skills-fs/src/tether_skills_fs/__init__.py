"""tether-skills-fs: skills from Agent Skills folders.

Roots, best rank first (lower wins inside one scope layer):

* ``<project>/.agents/skills`` (200), ``<project>/.claude/skills`` (201): the project is the
  nearest ancestor of the working directory holding ``.git``, else the working directory; its
  skills must stay inside it;
* each folder in ``roots`` (300), in order;
* ``~/.agents/skills`` (500), ``~/.claude/skills`` (501);
* each ``pkg:PACKAGE/FOLDER`` in ``roots`` (550): skills a library ships inside its package.

``folders`` picks and orders the well-known folders (:data:`FOLDERS`: also GitHub Copilot's,
Gemini CLI's, OpenCode's, Cursor's and Codex's earlier ones).

A root holds packaged skills (``NAME/SKILL.md`` with ``references/``, ``scripts/``,
``assets/``) and flat ones (``NAME.md``). Loading is lenient, as the Agent Skills client
guidance asks: problems are logged on ``tether.skills.fs`` with the file and the fix, and every
entry left out is reported in the listing's ``skipped``. A cloned repository's skills are
untrusted input: only regular files are read, each at most ``max_skill_file_bytes``.

It also adds ``tether skills validate`` to the command line (:mod:`tether_skills_fs._command`):
the strict Agent Skills check (:mod:`tether_skills_fs._validate`), which needs no profile.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import tether
from tether.skills import SkillProviderFactory

from ._parse import DESCRIPTION_MAX, LEGACY_KEYS, SKILL_FILE
from ._provider import PROVIDER_NAME, FileSystemSkillProvider
from ._roots import CUSTOM_RANK, PACKAGE_RANK, PROJECT_RANK, USER_RANK, project_root
from ._settings import (
    DEFAULT_FOLDERS,
    DEFAULT_MAX_BUNDLED_FILES,
    DEFAULT_MAX_SKILLS_PER_ROOT,
    FOLDERS,
    PACKAGE_PREFIX,
    Settings,
    SkillRoot,
)

if TYPE_CHECKING:
    import click

__all__ = (
    "CUSTOM_RANK",
    "DEFAULT_FOLDERS",
    "DEFAULT_MAX_BUNDLED_FILES",
    "DEFAULT_MAX_SKILLS_PER_ROOT",
    "DESCRIPTION_MAX",
    "FOLDERS",
    "LEGACY_KEYS",
    "PACKAGE_PREFIX",
    "PACKAGE_RANK",
    "PROJECT_RANK",
    "PROVIDER_NAME",
    "SKILL_FILE",
    "USER_RANK",
    "FileSystemSkillProvider",
    "Settings",
    "SkillRoot",
    "project_root",
)


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_skill_providers(settings: Settings) -> Iterable[SkillProviderFactory]:
    return [
        SkillProviderFactory(
            name=PROVIDER_NAME, create=lambda control: FileSystemSkillProvider(settings)
        )
    ]


@tether.hookimpl
def tether_cli_commands() -> list[click.Command]:
    """``tether skills validate`` (declared in the entry points as ``skills.validate``)."""
    from ._command import validate_command

    return [validate_command]
