"""``tether skills validate``: check skills strictly against the Agent Skills standard.

tether-skills-fs adds the command under the built-in ``skills`` group through the
``tether_cli_commands`` hook (declared in its entry points, group ``tether.commands``, as
``skills.validate``). The validator itself is :mod:`tether_skills_fs._validate`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tether import ErrorCode, TetherError

if TYPE_CHECKING:
    from ._validate import SkillCheck

__all__ = ("validate_command",)


@click.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.pass_context
def validate_command(ctx: click.Context, paths: tuple[Path, ...]) -> None:
    """Check skills strictly against the Agent Skills standard (the verdict of skills-ref).

    Each PATH is a skill directory, its SKILL.md, or a folder whose subdirectories are
    skills. Prints one `PATH: problem` line per problem (and `PATH: warning: ...` for what
    is accepted but risky), then a summary. Exit status 1 when any skill has a problem.
    No profile is needed.
    """
    from ._validate import check_skill, find_skills

    missing = [path for path in paths if not path.exists()]
    if missing:
        raise TetherError(
            ErrorCode.SKILL_PATH_NOT_FOUND,
            _missing_paths(missing),
            remedy="pass skill directories, SKILL.md files or folders of skills",
        )
    checks: list[tuple[Path, SkillCheck]] = []
    empty: list[Path] = []
    seen: set[str] = set()
    for path in paths:
        found = find_skills(path)
        if not found:
            empty.append(path)
        for skill in found:
            key = os.path.abspath(skill.parent if _is_skill_file(skill) else skill)
            if key not in seen:
                seen.add(key)
                checks.append((skill, check_skill(skill)))
    for path in empty:
        click.echo(
            f"{path}: no skill here: neither {path / 'SKILL.md'} nor a subdirectory with a "
            "SKILL.md exists; pass a skill directory, its SKILL.md or a folder of skills"
        )
    for path, check in checks:
        for problem in check.problems:
            click.echo(f"{path}: {problem}")
        for warning in check.warnings:
            click.echo(f"{path}: warning: {warning}")
    click.echo(_summary(checks, empty))
    if empty or any(not check.valid for _, check in checks):
        ctx.exit(1)


def _missing_paths(missing: list[Path]) -> str:
    """``path "x" does not exist (/abs/x)``: every missing path, absolute too."""
    shown: list[str] = []
    for path in missing:
        absolute = os.path.abspath(path)
        text = f'"{path}"' + ("" if str(path) == absolute else f" ({absolute})")
        if os.path.lexists(path):
            text += " (a symlink that leads nowhere: broken, or a loop)"
        shown.append(text)
    one = len(missing) == 1
    return f"{'path' if one else 'paths'} {', '.join(shown)} {'does' if one else 'do'} not exist"


def _is_skill_file(path: Path) -> bool:
    return path.name.lower() == "skill.md" and path.is_file()


def _summary(checks: list[tuple[Path, SkillCheck]], empty: list[Path]) -> str:
    invalid = sum(1 for _, check in checks if not check.valid)
    problems = sum(len(check.problems) for _, check in checks)
    warnings = sum(len(check.warnings) for _, check in checks)
    count = len(checks)
    text = f"{count} skill{'' if count == 1 else 's'} checked: {count - invalid} valid"
    if invalid:
        text += f", {invalid} with problems ({problems} problem{'' if problems == 1 else 's'})"
    if warnings:
        text += f", {warnings} warning{'' if warnings == 1 else 's'}"
    if empty:
        text += f"; {len(empty)} path{'' if len(empty) == 1 else 's'} without skills"
    return text
