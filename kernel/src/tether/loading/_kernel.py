"""The kernel: a profile composed into scopes of registered, configured, checked plugins.

:func:`load_kernel` is the whole startup: read the profile, import exactly the plugins it names
(and the built-in plugins), register each strictly, validate its settings, collect offers, check
every requirement and the session store the profile names. Anything impossible raises a
:class:`tether.TetherError` before the first model call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import cast

from ..errors import ErrorCode, PluginError, ProfileError, StoreError
from ..ground import format_loc, is_agent_name
from ._capabilities import Offer, Requirement, check_requirement, derived_offers
from ._catalog import (
    GUARDRAILS_PLUGIN,
    SPECIALISTS_PLUGIN,
    PluginCatalog,
    PluginEntry,
    local_entries,
)
from ._profile import Profile, find_profile, load_profile
from ._registration import LoadedPlugin, register_plugin
from ._scopes import Scope
from ._settings import (
    is_plugin_class,
    make_instance,
    plugin_settings_model,
    validate_settings,
    validate_table,
)
from ._stores import profile_store_provider
from ._workspaces import check_profile_workspace

__all__ = ("Kernel", "load_kernel")


class Kernel:
    """A composed profile: the global scope, each agent's scope, every plugin instance.

    Frozen: what :func:`load_kernel` returns never changes, and holds nothing live. What a
    process does with it (open agents, the permission host, skills, subagents) lives in a
    :class:`tether.runtime.Runtime`.
    """

    __slots__ = (
        "_agent_scopes",
        "catalog",
        "global_scope",
        "instructions_not_run",
        "profile",
        "project_code",
    )

    profile: Profile
    catalog: PluginCatalog
    global_scope: Scope
    project_code: bool
    """Whether the project's code was imported (``load_kernel(project_code=...)``)."""
    instructions_not_run: dict[str, Path]
    """Agent -> its ``instructions.py``, left out of its base prompt because the kernel was
    loaded without project code (empty otherwise)."""
    _agent_scopes: dict[str, Scope]

    def __init__(
        self,
        profile: Profile,
        catalog: PluginCatalog,
        global_scope: Scope,
        agent_scopes: Mapping[str, Scope],
        *,
        project_code: bool = True,
        instructions_not_run: Mapping[str, Path] | None = None,
    ) -> None:
        object.__setattr__(self, "profile", profile)
        object.__setattr__(self, "catalog", catalog)
        object.__setattr__(self, "global_scope", global_scope)
        object.__setattr__(self, "_agent_scopes", dict(agent_scopes))
        object.__setattr__(self, "project_code", project_code)
        object.__setattr__(self, "instructions_not_run", dict(instructions_not_run or {}))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"a Kernel is frozen (setting {name!r}): live state belongs to a tether.runtime.Runtime"
        )

    @property
    def agents(self) -> list[str]:
        """The agent presets the profile declares, sorted."""
        return sorted(self._agent_scopes)

    def agent_scope(self, name: str) -> Scope:
        """The scope of agent ``name``; an unknown name says which agents exist."""
        try:
            return self._agent_scopes[name]
        except (KeyError, TypeError):
            known = ", ".join(self.agents) or "none"
            given = cast(object, name)  # callers hand over what a user typed, or anything
            if not isinstance(given, str) or not given.strip():
                message, remedy = (
                    f"the agent name is empty ({name!r})",
                    f"name one of the profile's agents ({known}), or leave the agent out to "
                    "use the default one",
                )
            elif not is_agent_name(name):
                message, remedy = (
                    f"{name!r} is not an agent name",
                    "agent names use letters, digits, '.', '_' and '-'; the profile's agents: "
                    + known,
                )
            else:
                message, remedy = (
                    f'unknown agent "{name}"',
                    f"declare {format_loc(('agent', name), ())} in the profile or use one of: "
                    + known,
                )
            raise ProfileError(
                ErrorCode.UNKNOWN_AGENT,
                message,
                file=self.profile.path,
                key="[agent]",
                remedy=remedy,
            ) from None

    def scopes(self) -> list[Scope]:
        """The global scope, then each agent's scope by name."""
        return [self.global_scope, *(self._agent_scopes[name] for name in self.agents)]

    @property
    def plugins(self) -> list[LoadedPlugin]:
        """Every plugin instance, scope by scope, in profile order; the built-in plugins end
        the global layer."""
        return [plugin for scope in self.scopes() for plugin in scope.plugins]

    @property
    def not_imported(self) -> list[LoadedPlugin]:
        """The local plugin instances whose code was not imported (no project code)."""
        return [plugin for plugin in self.plugins if not plugin.imported]


def load_kernel(
    profile: Profile | Path | str | None = None,
    *,
    plugins: Mapping[str, object] | None = None,
    entry_points: bool | None = None,
    catalog: PluginCatalog | None = None,
    project_code: bool = True,
    withhold: Iterable[str] = (),
) -> Kernel:
    """Compose a kernel from a profile; raise the first problem as a :class:`TetherError`.

    ``profile`` is a loaded :class:`Profile`, a path, or ``None`` for ``tether.toml`` in the
    current directory. ``plugins`` are inline plugins by name (they win over installed ones);
    ``entry_points=False`` ignores installed plugins (``None`` follows
    ``TETHER_DISABLE_PLUGIN_AUTOLOAD``).

    ``project_code=False`` imports no code of the project (docs/trust.md): a local plugin (a
    ``plugin_dirs`` file, an agent folder's ``tools/``) is registered empty and marked
    ``imported=False``, an agent's ``instructions.py`` is left out of its base prompt
    (:attr:`Kernel.instructions_not_run`), and requirements a plugin not imported might meet
    are not checked. Installed and built-in plugins load as always. ``withhold`` names hooks no
    instance is asked (``tether_tool_sources``: no MCP server is started).
    """
    if not isinstance(profile, Profile):
        profile = load_profile(find_profile(profile))
    not_run: dict[str, Path] = {}
    if not project_code:
        profile, not_run = _without_instructions_code(profile)
    withheld = frozenset(withhold)
    _check_plugin_dirs(profile, None)
    for name in profile.agent:
        _check_plugin_dirs(profile, name)
    if catalog is None:
        catalog = PluginCatalog.discover(
            inline=plugins, entry_points=entry_points, local_dirs=profile.tether.plugin_dirs
        )
    objects: dict[int, object] = {}
    own: dict[Path, list[PluginEntry]] = {}

    load = _Loading(objects, own, project_code, withheld)
    global_plugins = _load_layer(profile, catalog, None, load)
    global_scope = Scope("global", "global", None, global_plugins)
    agent_scopes = {
        name: Scope(name, "agent", global_scope, _load_layer(profile, catalog, name, load))
        for name in sorted(profile.agent)
    }
    kernel = Kernel(
        profile,
        catalog,
        global_scope,
        agent_scopes,
        project_code=project_code,
        instructions_not_run=not_run,
    )
    for scope in kernel.scopes():
        for plugin in scope.plugins:
            plugin.requirements = plugin.collect("tether_requires", Requirement)
            for requirement in plugin.requirements:
                if not _might_meet_unseen(scope, requirement):
                    check_requirement(profile, scope, plugin, requirement)
    try:
        profile_store_provider(kernel)
    except StoreError as exc:
        if exc.code is not ErrorCode.STORE_SPEC_INVALID:
            raise
        remedy = exc.remedy
        unseen = ", ".join(sorted({p.name for p in kernel.not_imported}))
        if unseen:
            remedy = (
                f"{remedy + '; ' if remedy else ''}the local plugins {unseen} were not imported "
                "(this command imports no project code, docs/trust.md): a store a local plugin "
                "provides is opened only by the commands that run the agent"
            )
        raise StoreError(
            exc.code,
            exc.message,
            file=profile.file_of("tether", "store"),
            key="[tether] store",
            remedy=remedy,
        ) from None
    check_profile_workspace(kernel)
    return kernel


class _Loading:
    """What one :func:`load_kernel` shares across its layers."""

    def __init__(
        self,
        objects: dict[int, object],
        own: dict[Path, list[PluginEntry]],
        project_code: bool,
        withheld: frozenset[str],
    ) -> None:
        self.objects = objects
        self.own = own
        self.project_code = project_code
        self.withheld = withheld


class _NotImported:
    """What stands for a local plugin whose code a command does not import: no hooks."""


def _without_instructions_code(profile: Profile) -> tuple[Profile, dict[str, Path]]:
    """``profile`` with every agent's ``instructions.py`` left out, and those files by agent
    (a markdown file is only read, and stays)."""
    not_run: dict[str, Path] = {}
    agents = dict(profile.agent)
    for name, table in profile.agent.items():
        if table.instructions is not None and table.instructions.suffix == ".py":
            not_run[name] = table.instructions
            agents[name] = table.model_copy(update={"instructions": None})
    if not not_run:
        return profile, not_run
    return profile.model_copy(update={"agent": agents}), not_run


def _might_meet_unseen(scope: Scope, requirement: Requirement) -> bool:
    """Whether a plugin not imported, visible from ``scope``, might meet ``requirement``: its
    offers are unknown, so the requirement is not checked (only without project code)."""
    unseen = [p for p in scope.visible_plugins() if not p.imported]
    if not unseen:
        return False
    target = scope.find_plugin(requirement.plugin)
    return target is None or not target.imported


def _check_plugin_dirs(profile: Profile, agent: str | None) -> None:
    """Every ``plugin_dirs`` entry of the global layer or of ``agent``'s is a folder."""
    key_path = ("tether", "plugin_dirs") if agent is None else ("agent", agent, "plugin_dirs")
    dirs = profile.tether.plugin_dirs if agent is None else profile.agent[agent].plugin_dirs
    for folder in dirs:
        if not folder.is_dir():
            raise ProfileError(
                ErrorCode.PROFILE_INVALID,
                f"plugin_dirs entry {str(folder)!r} is not a folder",
                file=profile.file_of(*key_path),
                key=format_loc(key_path[:-1], key_path[-1:]),
                remedy="create the folder or fix the path (relative to the profile's folder)",
            )


def _own_plugins(
    profile: Profile, agent: str | None, own: dict[Path, list[PluginEntry]]
) -> dict[str, list[PluginEntry]]:
    """The local plugins of ``agent``'s own ``plugin_dirs`` by name (``own`` keeps each
    folder's entries, so a folder two agents share imports each file once)."""
    found: dict[str, list[PluginEntry]] = {}
    if agent is None:
        return found
    for folder in profile.agent[agent].plugin_dirs:
        if folder not in own:
            own[folder] = local_entries(folder, qualified=True)
        for entry in own[folder]:
            found.setdefault(entry.name, []).append(entry)
    return found


def _resolve(
    catalog: PluginCatalog,
    own: Mapping[str, list[PluginEntry]],
    name: str,
    file: Path | None,
    key: str,
) -> PluginEntry:
    """The entry ``name`` loads in a layer: the layer's own local plugin, else the catalog's."""
    found = own.get(name, [])
    if len(found) > 1:
        sources = ", ".join(entry.source for entry in found)
        raise PluginError(
            ErrorCode.PLUGIN_NAME_CONFLICT,
            f'conflicting plugins found for "{name}": {sources}',
            file=file,
            key=key,
            plugin=name,
            remedy="rename or remove all but one of these files",
        )
    if found:
        return found[0]
    return catalog.resolve(name, file=file, key=key)


def _load_layer(
    profile: Profile,
    catalog: PluginCatalog,
    agent: str | None,
    load: _Loading,
) -> list[LoadedPlugin]:
    """The plugin instances of one layer, in profile order; the global layer ends with the
    built-in plugins, loaded the same way. A name in an agent's layer is looked up in that
    agent's own ``plugin_dirs`` before the catalog."""
    names = profile.tether.plugins if agent is None else profile.agent[agent].plugins
    list_key = ("tether", "plugins") if agent is None else ("agent", agent, "plugins")
    key = format_loc(list_key[:-1], list_key[-1:])
    file = profile.file_of(*list_key)
    scope_id = "global" if agent is None else f"agent:{agent}"
    own_plugins = _own_plugins(profile, agent, load.own)
    loaded: list[LoadedPlugin] = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise PluginError(
                ErrorCode.DUPLICATE_PLUGIN,
                f'plugin "{name}" is listed twice in one layer',
                file=file,
                key=key,
                plugin=name,
                remedy="list it once; mount it under [agent.NAME] for a second instance",
            )
        seen.add(name)
        entry = _resolve(catalog, own_plugins, name, file, key)
        loaded.append(_load(profile, agent, entry, load, scope_id, file, key))
    if agent is None:
        for entry in catalog.builtins():
            seen.add(entry.name)
            if _uses(profile, entry):
                loaded.append(_load(profile, agent, entry, load, scope_id, None, None))
    tables = profile.plugin if agent is None else profile.agent[agent].plugin
    for name in tables:
        if name not in seen:
            where = profile.settings_key(agent, name)
            raise PluginError(
                ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'settings table for plugin "{name}", which is not loaded in this layer',
                file=profile.file_of(*where),
                key=format_loc(where, ()),
                plugin=name,
                remedy=f'add "{name}" to {key} or remove the table',
            )
    return loaded


def _uses(profile: Profile, builtin: PluginEntry) -> bool:
    """Whether ``profile`` loads the built-in plugin ``builtin``: the declared subagents' only
    when some agent declares subagents, the guardrails' only when the profile turns one on."""
    if builtin.name == SPECIALISTS_PLUGIN:
        return any(table.subagents for table in profile.agent.values())
    if builtin.name == GUARDRAILS_PLUGIN:
        return bool(profile.tether.guardrails) or any(
            table.guardrails for table in profile.agent.values()
        )
    return True


def _load(
    profile: Profile,
    agent: str | None,
    entry: PluginEntry,
    load: _Loading,
    scope_id: str,
    file: Path | None,
    key: str | None,
) -> LoadedPlugin:
    """Import, register, configure one instance and collect its offers (a local plugin, when
    no project code is imported: registered empty, not imported).

    A class-based plugin (:class:`tether.Plugin`) has its table validated against the class's
    ``settings_model`` first, and the object registered is ``cls(settings)``, made here: one
    per instance."""
    if entry.local and not load.project_code:
        plugin = register_plugin(entry, _NotImported(), scope_id, file=file, key=key)
        plugin.imported = False
        return plugin
    obj = _import(entry, load.objects, file, key)
    if is_plugin_class(obj):
        model = plugin_settings_model(obj, entry, file, key)
        settings = validate_table(profile, agent, entry.name, entry.source, model)
        instance = make_instance(obj, entry, settings, file, key)
        plugin = register_plugin(entry, instance, scope_id, file=file, key=key)
        plugin.withheld = load.withheld
        plugin.settings = settings
    else:
        plugin = register_plugin(entry, obj, scope_id, file=file, key=key)
        plugin.withheld = load.withheld
        plugin.settings = validate_settings(profile, agent, plugin)
    plugin.offers = plugin.collect("tether_offers", Offer)
    plugin.offers = (*plugin.offers, *derived_offers(plugin))
    return plugin


def _import(
    entry: PluginEntry, objects: dict[int, object], file: Path | None, key: str | None
) -> object:
    cache_key = id(entry)
    if cache_key in objects:
        return objects[cache_key]
    try:
        obj = entry.load()
    except Exception as exc:
        raise PluginError(
            ErrorCode.PLUGIN_IMPORT_FAILED,
            f'plugin "{entry.name}" ({entry.source}) failed to import: {type(exc).__name__}: {exc}',
            file=file,
            key=key,
            plugin=entry.name,
            remedy=f"fix or reinstall {entry.distribution or 'the plugin'} (--debug shows the "
            f'traceback), or remove "{entry.name}" from the profile',
        ) from exc
    objects[cache_key] = obj
    return obj
