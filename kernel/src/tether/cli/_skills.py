"""``tether skills list|show``: the catalog an agent sees, and one skill.

``tether skills validate``, the strict Agent Skills check, is added to this group by
tether-skills-fs (the group takes plugin commands: :class:`PluginCommandGroup`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ._group import (
    cli,
    load,
    not_imported_note,
    profile_option,
    project_code_option,
    run_async,
)
from ._plugin_commands import PluginCommandGroup

if TYPE_CHECKING:
    from ..loading import Kernel, Scope
    from ..skills import SkillCandidate, SkillCatalog, SkillDefinition, SkippedSkill

#: How many near names an unknown ``skills show NAME`` suggests.
MAX_SUGGESTIONS = 3
#: Below this many skills, an unknown name with no near match lists them all.
MAX_LISTED_NAMES = 12
#: Descriptions longer than this are cut in the ``skills list`` table.
DESCRIPTION_WIDTH = 72
#: The plugin whose ``body_max_chars`` setting ``skills show`` honours, as ``load_skill`` does.
SKILL_TOOL_PLUGIN = "skill-tool"

_agent_option = click.option(
    "--agent",
    "agent_name",
    default=None,
    help="Resolve through this agent's scope chain (default: main, else the only agent).",
)


@cli.group(cls=PluginCommandGroup, plugin_path=("skills",))
def skills() -> None:
    """Skills: the catalog an agent sees, one skill's content, a strict Agent Skills check."""


# ----------------------------------------------------------------------------- list


@skills.command("list")
@profile_option
@_agent_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@project_code_option
def list_skills(
    profile: Path | None, agent_name: str | None, as_json: bool, project_code: bool
) -> None:
    """List the skills an agent sees: the winner per name, what each one shadows, and the
    entries the providers skipped, with the reason.

    Without --agent the agent is the one `tether run` would use (main, else the only agent);
    a profile without agents shows the global layer. When the catalog is incomplete (a
    provider failed or returned a partial list) the registry's warnings and a note go to
    standard error. No project code is imported unless --project-code (docs/trust.md): skills
    a local plugin would provide are missing, and a note on standard error names the plugins
    not imported.
    """
    kernel = load(profile, project_code=project_code)
    _note_not_imported(kernel)
    agent, scope = _resolve(kernel, agent_name)
    with SkillWarnings() as warnings:
        catalog, providers = run_async(_list, kernel, scope)
    where = _scope_path(scope)
    rows = [_row(catalog, name) for name in catalog.candidates]
    skipped = [_skipped(entry) for entry in catalog.skipped]
    searched = [place.model_dump() for place in catalog.searched]
    if as_json:
        document = {
            "agent": agent,
            "scope": where,
            "complete": catalog.complete,
            "skills": rows,
            "skipped": skipped,
            "searched": searched,
        }
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        _print_table(rows, agent, where)
        _print_searched(searched, found=bool(rows), providers=providers)
        _print_skipped(skipped)
    if not catalog.complete:
        warnings.echo()
        click.echo(_INCOMPLETE, err=True)


async def _list(kernel: Kernel, scope: Scope | None) -> tuple[SkillCatalog, int]:
    """The catalog, and how many skill providers the scope sees."""
    from ..runtime import Runtime

    registry = Runtime(kernel).skills
    return await registry.list(scope=scope), len(registry.providers(scope))


#: What ``skills list`` says of a place a provider looked in, by its state.
_STATES = {
    "missing": "does not exist",
    "skipped": "not read (see skipped below)",
}
#: The plugin that reads skill folders, named when no provider is loaded at all.
SKILLS_FS_PLUGIN = "skills-fs"


def _place(place: dict[str, Any]) -> str:
    count = place["skills"]
    if place["state"] != "read":
        state = _STATES.get(place["state"], place["state"])
    elif count:
        state = f"{count} skill{'' if count == 1 else 's'}"
    else:
        state = "holds no skill"
    return printable(f"  {place['path']} ({place['source']}): {state}")


def _print_searched(searched: list[dict[str, Any]], *, found: bool, providers: int) -> None:
    """Where each provider looked; with no skill at all, said first and with what to do."""
    if not found and providers == 0:
        click.echo(
            f'no skill provider is loaded: add "{SKILLS_FS_PLUGIN}" to [tether] plugins to '
            "read skill folders"
        )
        return
    by_provider: dict[str, list[dict[str, Any]]] = {}
    for place in searched:
        by_provider.setdefault(place["provider"] or "?", []).append(place)
    for provider, places in by_provider.items():
        lead = "no skill found; provider" if not found else "provider"
        click.echo(printable(f"{lead} {provider} looked in:"))
        for place in places:
            click.echo(_place(place))
    if not found and by_provider:
        click.echo("a skill is a folder NAME/SKILL.md in one of these (docs/skills.md)")


def _row(catalog: SkillCatalog, name: str) -> dict[str, Any]:
    candidate = catalog.candidates[name]
    layer = catalog.layers.get(name, "global")
    return {
        **_candidate(candidate),
        "description": candidate.description,
        "when_to_use": candidate.when_to_use,
        "invocation": candidate.invocation.model_dump(),
        "layer": layer.rsplit(" > ", 1)[-1],
        "shadows": [_candidate(loser) for loser in catalog.shadowed.get(name, ())],
    }


def _skipped(entry: SkippedSkill) -> dict[str, Any]:
    return {
        "path": entry.path,
        "name": entry.name,
        "provider": entry.provider,
        "reason": entry.reason,
    }


def _print_skipped(skipped: list[dict[str, Any]]) -> None:
    if not skipped:
        return
    count = len(skipped)
    click.echo(f"skipped {count} entr{'y' if count == 1 else 'ies'} (not offered to the agent):")
    for entry in skipped:
        click.echo(f"  {printable(entry['path'])}: {printable(entry['reason'])}")


def _candidate(candidate: SkillCandidate) -> dict[str, Any]:
    return {
        "name": candidate.name,
        "provider": candidate.provider,
        "source": candidate.source,
        "rank": candidate.rank,
        "path": candidate.path,
    }


def _print_table(rows: list[dict[str, Any]], agent: str | None, where: str) -> None:
    title = f"agent {agent}" if agent else "the global layer"
    count = len(rows)
    click.echo(f"skills of {title} ({where}): {count} skill{'' if count == 1 else 's'}")
    if not rows:
        return
    header = ("NAME", "PROVIDER", "SOURCE", "RANK", "LAYER", "DESCRIPTION")
    table = [
        (
            row["name"],
            printable(row["provider"]),
            printable(row["source"]),
            _rank(row["rank"]),
            printable(row["layer"]),
            printable(_cut(row["description"])),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in (header, *table)) for i in range(len(header) - 1)]
    for row, line in zip([None, *rows], (header, *table), strict=True):
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        click.echo("  ".join([*cells, line[-1]]).rstrip())
        if row is None:
            continue
        for loser in row["shadows"]:
            where = f", {loser['path']}" if loser["path"] else ""
            click.echo(
                printable(
                    f"  shadows {loser['name']} from provider {loser['provider']} "
                    f"(source {loser['source']}, rank {_rank(loser['rank'])}{where})"
                )
            )
        invocation = row["invocation"]
        if not invocation["model_invocable"]:
            click.echo("  not in the model's catalog (model_invocable = false)")
        if not invocation["user_invocable"]:
            click.echo("  no /name gesture (user_invocable = false)")


def _rank(rank: float) -> str:
    return f"{rank:g}"


def printable(text: str) -> str:
    """``text`` safe for a terminal line: control characters (an escape sequence in a cloned
    repository's folder name or description) shown as escapes, never sent raw."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _cut(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= DESCRIPTION_WIDTH else line[: DESCRIPTION_WIDTH - 3] + "..."


# ----------------------------------------------------------------------------- show


@skills.command("show")
@profile_option
@_agent_option
@click.argument("name")
@project_code_option
@click.pass_context
def show_skill(
    ctx: click.Context,
    profile: Path | None,
    agent_name: str | None,
    name: str,
    project_code: bool,
) -> None:
    """Print skill NAME exactly as load_skill hands it to the model (<skill_content>).

    The body is cut where load_skill cuts it (the skill-tool plugin's body_max_chars, as the
    agent sees it). An unknown NAME is one ERROR line (exit status 2) with the names that come
    close, or why a skill of that name was skipped. Like skills list, it imports no project
    code unless --project-code.
    """
    from ..skills import render_skill_content

    kernel = load(profile, project_code=project_code)  # docs/trust.md
    _note_not_imported(kernel)
    agent, scope = _resolve(kernel, agent_name)
    with SkillWarnings() as warnings:
        definition, catalog = run_async(_show, kernel, scope, name)
    if definition is None:
        click.echo(f"ERROR: {_not_found(name, catalog, scope)} [UNKNOWN_SKILL]", err=True)
        ctx.exit(2)
    if not catalog.complete:
        warnings.echo()
        click.echo(_INCOMPLETE, err=True)
    click.echo(render_skill_content(definition, max_body_chars=_body_max(kernel, agent)))


def _body_max(kernel: Kernel, agent: str | None) -> int:
    """The body cap of the skill-tool plugin nearest to the agent (its layer, then global)."""
    from ..skills import DEFAULT_BODY_MAX_CHARS

    layers = ([f"agent:{agent}"] if agent is not None else []) + ["global"]
    for layer in layers:
        for plugin in kernel.plugins:
            if plugin.scope_id == layer and plugin.name == SKILL_TOOL_PLUGIN:
                value = getattr(plugin.settings, "body_max_chars", None)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
    return DEFAULT_BODY_MAX_CHARS


async def _show(
    kernel: Kernel, scope: Scope | None, name: str
) -> tuple[SkillDefinition | None, SkillCatalog]:
    from ..runtime import Runtime

    registry = Runtime(kernel).skills
    definition = await registry.get(name, scope=scope)
    catalog = await registry.list(scope=scope)
    return definition, catalog


def _not_found(name: str, catalog: SkillCatalog, scope: Scope | None) -> str:
    import difflib

    from ..skills import is_skill_name

    where = f"scope {_scope_path(scope)}"
    candidate = catalog.candidates.get(name)
    if candidate is not None:
        return (
            f'skill "{name}" is listed by provider "{candidate.provider}" but could not be '
            f"loaded ({where}); it may have been removed since it was listed: run tether "
            "skills list again"
        )
    skipped = [entry for entry in catalog.skipped if entry.name == name]
    if skipped:
        entry = skipped[0]
        return printable(f'skill "{name}" was skipped ({where}): {entry.path}: {entry.reason}')
    names = list(catalog.candidates)
    if is_skill_name(name):
        text = f'unknown skill "{name}"'
    else:
        text = f'"{name}" is not a skill name (kebab-case a-z and 0-9, at most 64 characters)'
    incomplete = "" if catalog.complete else "; the catalog is incomplete"
    text += f" ({where}{incomplete})"
    close = difflib.get_close_matches(name, names, n=MAX_SUGGESTIONS, cutoff=0.6)
    if close:
        return text + f"; did you mean {_or(close)}?"
    if not names:
        return text + "; no skill is visible here: check the profile's skill providers"
    if len(names) <= MAX_LISTED_NAMES:
        return text + f"; known skills: {', '.join(names)}"
    return text + f"; tether skills list shows all {len(names)}"


def _or(names: list[str]) -> str:
    quoted = [f'"{n}"' for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


# ----------------------------------------------------------------------------- shared


_INCOMPLETE = (
    "note: the catalog is incomplete: a skill provider failed or returned a partial list; "
    "skills may be missing"
)


class SkillWarnings(logging.Handler):
    """Holds what the skill registry logs while a command reads it.

    A complete catalog logs only the shadowing the listing shows anyway; an incomplete one
    logs why, and is collected again on every read: its warnings are printed once each. An
    ERROR line stays the only line.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: dict[str, None] = {}
        self._logger = logging.getLogger("tether.skills")
        self._propagate = self._logger.propagate

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.setdefault(record.getMessage(), None)

    def __enter__(self) -> SkillWarnings:
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate = self._propagate

    def echo(self) -> None:
        for message in self.messages:
            click.echo(f"warning: {printable(message)}", err=True)


def _note_not_imported(kernel: Kernel) -> None:
    """Skills a local plugin would provide are missing: say which plugins were not imported."""
    note = not_imported_note(kernel)
    if note is not None and kernel.not_imported:
        click.echo(note, err=True)


def _resolve(kernel: Kernel, agent_name: str | None) -> tuple[str | None, Scope | None]:
    """The agent (``tether run``'s default when not named) and its scope; ``None`` is the
    global layer (a profile without agents)."""
    from ..agents import resolve_agent_name

    agent = resolve_agent_name(kernel, agent_name)
    return agent, (kernel.agent_scope(agent) if agent is not None else None)


def _scope_path(scope: Scope | None) -> str:
    return scope.path if scope is not None else "global"
