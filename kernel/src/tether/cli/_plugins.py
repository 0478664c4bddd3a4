"""``tether plugins`` and ``tether check``: what is installed, what a profile composes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import TetherError
from ..ground import format_loc
from ._group import TEXT, cli, load, profile_option, run_async

if TYPE_CHECKING:
    from ..loading import Kernel, LoadedPlugin, PluginCatalog, PluginEntry, Scope
    from ..runtime import Runtime
    from ..skills import SkillCatalog

__all__ = ("composition_tree",)


#: The hooks whose providers ``tether check`` asks through an agent runtime (with agents).
_RUNTIME_HOOKS = ("tether_skill_providers", "tether_subagent_providers", "tether_tool_sources")

#: Skipped skill entries ``tether check`` names one by one; the rest are counted.
MAX_SKIPPED_SHOWN = 5


@cli.command()
@profile_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--all",
    "with_builtin",
    is_flag=True,
    help="Also list the built-in plugins (the kernel's own model providers and stores).",
)
def plugins(profile: Path | None, as_json: bool, with_builtin: bool) -> None:
    """List every installed plugin, whether the profile loads it, and its hooks.

    Without --profile the profile is tether.toml in the current directory if there is one;
    without any profile nothing is loaded and nothing is imported. With a profile, the local
    plugins of each agent's own plugin_dirs (an agent folder's tools/) are listed too, marked
    with their agent. The built-in plugins, which every profile loads, are listed with --all.

    No project code is imported (docs/trust.md): a local plugin the profile names is listed
    as "not imported" and its hooks are not known; tether check imports it and shows them.
    """
    from ..loading import PluginCatalog

    kernel = None
    if profile is not None or Path("tether.toml").is_file():
        kernel = load(profile, project_code=False)
        catalog = kernel.catalog
    else:
        catalog = PluginCatalog.discover()
    rows = [_plugin_row(entry, kernel, catalog) for entry in catalog.entries()]
    if kernel is not None:
        rows += _agent_plugin_rows(kernel)
    if with_builtin:
        rows += [_plugin_row(entry, kernel, catalog) for entry in catalog.builtins()]
    if as_json:
        document = {
            "profile": str(kernel.profile.path) if kernel and kernel.profile.path else None,
            "plugins": rows,
        }
        click.echo(json.dumps(document, indent=2))
        return
    if not rows:
        if catalog.autoload_off_by_env:
            click.echo(
                "no plugins listed: entry-point autoload is off (TETHER_DISABLE_PLUGIN_AUTOLOAD)"
            )
        else:
            click.echo("no plugins installed (entry-point group tether.plugins)")
        return
    header = ("NAME", "DISTRIBUTION", "VERSION", "LOADED", "HOOKS")
    table = [
        (
            row["name"],
            _distribution(row),
            row["version"] or "-",
            _loaded(row),
            ", ".join(row["hooks"]) if row["hooks"] is not None else "-",
        )
        for row in rows
    ]
    widths = [max(len(str(r[i])) for r in (header, *table)) for i in range(len(header) - 1)]
    for line in (header, *table):
        cells = [str(cell).ljust(width) for cell, width in zip(line, widths, strict=False)]
        click.echo("  ".join([*cells, str(line[-1])]).rstrip())


def _loaded(row: dict[str, Any]) -> str:
    """The LOADED cell: its scopes, ``no``, or ``not imported (SCOPES)`` for a local plugin the
    profile names that this command did not import."""
    if not row["loaded"]:
        return "no"
    scopes = ", ".join(row["scopes"])
    return scopes if row["imported"] else f"not imported ({scopes})"


def _distribution(row: dict[str, Any]) -> str:
    """The DISTRIBUTION cell: the distribution, ``built-in``, ``inline`` or ``local``; an
    agent's own local plugin names its agents (``local (agent main)``)."""
    if row["builtin"]:
        return "built-in"
    if row["distribution"]:
        return row["distribution"]
    if row["value"] == "<inline>":
        return "inline"
    agents: list[str] = row["agents"]
    if agents:
        return f"local ({'agent' if len(agents) == 1 else 'agents'} {', '.join(agents)})"
    return "local"


def _agent_plugin_rows(kernel: Kernel) -> list[dict[str, Any]]:
    """A row for each local plugin of an agent's own ``plugin_dirs`` (an agent folder's
    ``tools/``): not in the catalog, since only that agent's layer finds them. One file two
    agents share is one row naming both; reading the folders imports nothing."""
    from ..loading import plugin_files

    catalog = {id(entry) for entry in kernel.catalog.entries(builtin=True)}
    own = [p for p in kernel.plugins if id(p.entry) not in catalog]
    files: dict[str, tuple[str, list[str]]] = {}
    for agent in kernel.agents:
        for folder in kernel.profile.agent[agent].plugin_dirs:
            for path in plugin_files(folder):
                _, agents = files.setdefault(str(path), (path.stem, []))
                if agent not in agents:
                    agents.append(agent)
    rows: list[dict[str, Any]] = []
    for value, (name, agents) in sorted(files.items(), key=lambda item: (item[1][0], item[0])):
        instances = [p for p in own if p.entry.value == value]
        rows.append(
            {
                "name": name,
                "distribution": None,
                "version": None,
                "value": value,
                "builtin": False,
                "agents": agents,
                "loaded": bool(instances),
                "imported": all(p.imported for p in instances),
                "conflict": False,
                "scopes": [p.scope_id for p in instances],
                "hooks": _hooks(instances),
                "offers": _offers(instances),
            }
        )
    return rows


def _hooks(instances: list[LoadedPlugin]) -> list[str] | None:
    """The hooks of a loaded plugin; ``None`` when it is not loaded or was not imported (its
    hooks are not known)."""
    if not instances or not instances[0].imported:
        return None
    return list(instances[0].hooks)


def _offers(instances: list[LoadedPlugin]) -> list[dict[str, Any]]:
    return [
        {"scope": p.scope_id, "kind": offer.kind, "capabilities": sorted(offer.capabilities)}
        for p in instances
        for offer in p.offers
    ]


def _plugin_row(
    entry: PluginEntry, kernel: Kernel | None, catalog: PluginCatalog
) -> dict[str, Any]:
    instances = [p for p in kernel.plugins if p.entry is entry] if kernel else []
    return {
        "name": entry.name,
        "distribution": entry.distribution,
        "version": entry.version,
        "value": entry.value,
        "builtin": entry.builtin,
        "agents": [],
        "loaded": bool(instances),
        "imported": all(p.imported for p in instances),
        "conflict": len(catalog.get(entry.name)) > 1,
        "scopes": [p.scope_id for p in instances],
        "hooks": _hooks(instances),
        "offers": _offers(instances),
    }


@cli.command()
@profile_option
@click.option(
    "--model",
    "model_spec",
    type=TEXT,
    default=None,
    help="Also make this model (provider:name) and check its endpoint answers (online).",
)
@click.option(
    "--agent",
    "agent_name",
    type=TEXT,
    default=None,
    help="The agent whose model providers make --model (default: main, or the only agent).",
)
def check(profile: Path | None, model_spec: str | None, agent_name: str | None) -> None:
    """Load the profile and every plugin it names, run every check, print the composition.

    Beyond loading, every agent is composed as a session gets it: its instructions are read,
    its tools collected (with its declared subagents' tools: a subagent whose tool name another
    tool of the agent has is an error) and its model spec matched to a model provider (no model
    is made, so no key is needed).
    Skill providers are asked for advice (a root that is missing, empty, or holds its skills
    deeper than they are read) and their catalogs are read: what they skipped is a warning on
    standard error. Warnings do not change the exit status.

    Without --model nothing goes online. With --model SPEC the model is made (a missing key is
    an error) and, when it can (an HTTP model), asked whether its endpoint answers.
    """
    kernel = load(profile)  # the store spec is checked here, with everything else
    skills = any(p.implements("tether_skill_providers") for p in kernel.plugins)
    runtime = None
    # A profile of plugins alone (no agent, no skill, subagent or tool source provider) has
    # nothing more to check: it does not pay for the agent runtime's imports.
    if kernel.agents or any(p.implements(hook) for p in kernel.plugins for hook in _RUNTIME_HOOKS):
        from ..runtime import Runtime

        runtime = Runtime(kernel)
        # Build the registries only when some plugin feeds them: a broken provider fails here,
        # and a profile without skills or subagents does not pay for their imports.
        if skills:
            runtime.skills  # noqa: B018
        if runtime.delegates:
            # A provider that can say whether it runs here (its program is installed) is asked;
            # loading does not ask, so commands that start no child work without the program.
            for provider in runtime.subagents.providers():
                check_provider = getattr(provider, "check", None)
                if callable(check_provider):
                    check_provider()
        if kernel.agents:
            _check_agents(runtime)
    for line in composition_tree(kernel):
        click.echo(line)
    failed = False
    if runtime is not None and runtime.tool_catalog.eager_sources():
        for line, ok in run_async(_list_eager_sources, kernel):
            click.echo(line, err=not ok)
            failed = failed or not ok
    if model_spec is not None:
        click.echo(run_async(_probe_model, kernel, model_spec, agent_name))
    if runtime is not None and skills:
        from ._skills import printable

        for warning in _skill_warnings(runtime):
            click.echo(f"warning: {printable(warning)}", err=True)
    instances = [p for p in kernel.plugins if not p.entry.builtin]
    count = len(instances)
    requirements = sum(len(p.requirements) for p in instances)
    if failed:
        raise SystemExit(2)
    click.echo(
        f"ok: {count} plugin instance{'s' if count != 1 else ''} in "
        f"{len(kernel.scopes())} scope{'s' if len(kernel.scopes()) != 1 else ''}, "
        f"{requirements} requirement{'s' if requirements != 1 else ''} met"
    )


async def _list_eager_sources(kernel: Kernel) -> list[tuple[str, bool]]:
    """Each eager tool source listed (an MCP server started with ``start = "eager"``): a line
    with its tool count, or the ``ERROR:`` line of its failure."""
    from ..errors import TetherError
    from ..runtime import Runtime

    lines: list[tuple[str, bool]] = []
    async with Runtime.open(kernel, tune_collector=False) as runtime:
        for owner, source in runtime.tool_catalog.eager_sources():
            try:
                tools = await runtime.tool_catalog.list_source(owner, source)
            except TetherError as exc:
                lines.append((f"ERROR: {exc}", False))
            else:
                count = len(tools)
                lines.append(
                    (f"tool source {source.name}: {count} tool{'s' if count != 1 else ''}", True)
                )
    return lines


async def _probe_model(kernel: Kernel, spec: str, agent: str | None) -> str:
    """Make the model for ``spec`` with ``agent``'s model providers and probe it if it can."""
    from ..agents import build_preset, resolve_agent_name, resolve_preset_model
    from ._run import close_model

    preset = build_preset(kernel, resolve_agent_name(kernel, agent))
    model = resolve_preset_model(preset, spec, base=Path.cwd())
    try:
        from ..contracts import ProbingModel

        if isinstance(model, ProbingModel):
            return await model.probe()
        return f"model {model.name}: made (it has no endpoint to probe)"
    finally:
        await close_model(model)


def _skill_warnings(runtime: Runtime) -> list[str]:
    """The skill providers' advice and what their catalogs skipped, once each, for every
    scope an agent sees (the global layer when there are no agents). Read without an event
    loop when every provider can be (:class:`~tether.skills.SkillProviderBlocking`)."""
    from ._skills import SkillWarnings

    kernel = runtime.kernel
    skills = runtime.skills
    scopes: list[Scope | None] = [kernel.agent_scope(name) for name in kernel.agents] or [None]
    with SkillWarnings():  # what the providers log is summed up below, not printed raw
        if all(skills.reads_blocking(scope=scope) for scope in scopes):
            read = [
                (skills.diagnose_blocking(scope=scope), skills.list_blocking(scope=scope))
                for scope in scopes
            ]
        else:
            read = run_async(_read_skills, runtime, scopes)
    advice: dict[str, None] = {}
    skipped: dict[str, str] = {}
    for lines, catalog in read:
        for provider, line in lines:
            advice.setdefault(f'skill provider "{provider}": {line}', None)
        for entry in catalog.skipped:
            skipped.setdefault(entry.path, entry.reason)
    lines = list(advice)
    # A root the advice already names (a package that is not installed) is not named twice.
    skipped = {path: why for path, why in skipped.items() if not any(path in a for a in lines)}
    shown = list(skipped.items())[:MAX_SKIPPED_SHOWN]
    lines += [f"skill {path} skipped: {reason}" for path, reason in shown]
    if len(skipped) > MAX_SKIPPED_SHOWN:
        lines.append(
            f"{len(skipped) - MAX_SKIPPED_SHOWN} more skill entries skipped; tether skills list "
            "shows them all, with the reason"
        )
    return lines


async def _read_skills(
    runtime: Runtime, scopes: list[Scope | None]
) -> list[tuple[list[tuple[str, str]], SkillCatalog]]:
    """Each scope's skill advice and catalog, read in an event loop."""
    return [
        (await runtime.skills.diagnose(scope=scope), await runtime.skills.list(scope=scope))
        for scope in scopes
    ]


def _check_agents(runtime: Runtime) -> None:
    """Compose every agent as a session would get it (:meth:`Runtime.preset`): instructions
    read, tools collected, declared subagents' tools added (a name another tool of the agent
    has is an error), model spec matched, a ``scripted:`` model's script read."""
    from ..agents import resolve_preset_model
    from ..loading import SCRIPTED_PREFIX
    from ..models import find_model_provider

    kernel = runtime.kernel
    for name in kernel.agents:
        try:
            preset = runtime.preset(name)
        except TetherError as exc:
            if exc.file is not None or exc.key != format_loc(("agent", name), ("subagents",)):
                raise
            raise type(exc)(
                exc.code,
                exc.message,
                file=_subagents_file(kernel, name),
                key=exc.key,
                remedy=exc.remedy,
            ) from exc
        if preset.model_spec is not None:
            try:
                find_model_provider(preset.model_spec, preset.model_providers)
            except TetherError as exc:
                raise type(exc)(
                    exc.code,
                    exc.message,
                    file=kernel.profile.file_of("agent", name, "model"),
                    key=format_loc(("agent", name), ("model",)),
                    remedy=exc.remedy,
                ) from exc
            if preset.model_spec.startswith(SCRIPTED_PREFIX):
                # A script is a file the profile names: made here (offline, no key), so a
                # missing or broken one fails the check as it would fail `tether run`. Its
                # path is relative to the profile file that names it, as a session takes it.
                model_file = kernel.profile.file_of("agent", name, "model")
                base = model_file.parent if model_file is not None else kernel.profile.folder
                resolve_preset_model(preset, None, base=base)


def _subagents_file(kernel: Kernel, name: str) -> Path | None:
    """Where ``name``'s subagents were declared: the profile file that wrote its
    ``subagents``, or for an agent folder its ``subagents/`` folder (agent.toml cannot set
    them)."""
    profile = kernel.profile
    folder = profile.agent_folders.get(name)
    written = profile.origins.get(("agent", name, "subagents"))
    if folder is not None and (written is None or written.parent == folder):
        return folder / "subagents"
    return profile.file_of("agent", name, "subagents")


def composition_tree(kernel: Kernel) -> list[str]:
    """The lines ``tether check`` prints: the profile, then each scope and the plugins the
    profile names in it (the built-in plugins every profile loads are ``tether plugins
    --all``'s); an agent from an agent folder names its folder, and an agent with declared
    subagents lists them after its plugins."""
    profile = kernel.profile
    lines = [f"profile {profile.path}"]
    lines += [f"  extends {path}" for path in profile.files[1:]]
    for scope in kernel.scopes():
        title = scope.path
        subagents: list[str] = []
        if scope.kind == "agent":
            table = profile.agent[scope.name]
            if table.model:
                title += f"  model={table.model}"
            folder = profile.agent_folders.get(scope.name)
            if folder is not None:
                title += f"  folder={folder}"
            subagents = [_describe_subagent(kernel, name) for name in table.subagents]
        lines.append(title)
        named = [plugin for plugin in scope.plugins if not plugin.entry.builtin]
        if not named:
            lines.append("  (no plugins)")
        for index, plugin in enumerate(named):
            last = index == len(named) - 1
            lines.append(f"  {'└─' if last else '├─'} {_describe(plugin)}")
            pad = "     " if last else "  │  "
            for offer in plugin.offers:
                caps = ", ".join(sorted(offer.capabilities)) or "no optional capabilities"
                lines.append(f"{pad}offers {offer.kind}: {caps}")
            for req in plugin.requirements:
                caps = f" with {', '.join(req.capabilities)}" if req.capabilities else ""
                lines.append(f'{pad}requires {req.kind} "{req.plugin}"{caps}')
        lines += [f"  subagent {line}" for line in subagents]
    return lines


#: How a declared subagent that is not a listed tool shows in ``tether check``.
_VISIBILITY = {"deferred": " (deferred)", False: " (hidden: tool = false)"}


def _describe_subagent(kernel: Kernel, name: str) -> str:
    """``main.researcher  tool=researcher``, with its visibility when it is not listed."""
    table = kernel.profile.agent[name]
    return f"{name}  tool={table.tool_name or name}{_VISIBILITY.get(table.tool, '')}"


def _describe(plugin: LoadedPlugin) -> str:
    text = f"{plugin.name} ({plugin.entry.source})"
    if plugin.settings is not None:
        fields = plugin.settings.model_dump(mode="json", exclude_defaults=True)
        if fields:
            text += " " + ", ".join(f"{k}={json.dumps(v)}" for k, v in fields.items())
    hooks = plugin.hooks
    text += f"  hooks: {', '.join(hooks) if hooks else 'none'}"
    return text
