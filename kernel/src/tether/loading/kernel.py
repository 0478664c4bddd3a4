"""The kernel: a profile composed into scopes of registered, configured, checked plugins.

:func:`load_kernel` is the whole startup: read the profile, import exactly the plugins it names
(and the built-in plugins), register each strictly, validate its settings, collect offers, check
every requirement and the session store the profile names. Anything impossible raises a
:class:`tether.TetherError` before the first model call.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from ..errors import ErrorCode, PluginError, ProfileError, StoreError
from ..store import profile_store_provider
from .capabilities import Offer, Requirement, check_requirement, derived_offers
from .catalog import PluginCatalog, PluginEntry, local_entries
from .names import is_agent_name
from .profile import Profile, find_profile, load_profile
from .registration import LoadedPlugin, register_plugin
from .scopes import Scope
from .settings import validate_settings
from .text import format_loc

__all__ = ("Kernel", "load_kernel")


class Kernel:
    """A composed profile: the global scope, each agent's scope, every plugin instance.

    Frozen: what :func:`load_kernel` returns never changes, and holds nothing live. What a
    process does with it (open agents, the permission host, skills, subagents) lives in a
    :class:`tether.runtime.Runtime`.
    """

    __slots__ = ("_agent_scopes", "catalog", "global_scope", "profile")

    profile: Profile
    catalog: PluginCatalog
    global_scope: Scope
    _agent_scopes: dict[str, Scope]

    def __init__(
        self,
        profile: Profile,
        catalog: PluginCatalog,
        global_scope: Scope,
        agent_scopes: Mapping[str, Scope],
    ) -> None:
        object.__setattr__(self, "profile", profile)
        object.__setattr__(self, "catalog", catalog)
        object.__setattr__(self, "global_scope", global_scope)
        object.__setattr__(self, "_agent_scopes", dict(agent_scopes))

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


def load_kernel(
    profile: Profile | Path | str | None = None,
    *,
    plugins: Mapping[str, object] | None = None,
    entry_points: bool | None = None,
    catalog: PluginCatalog | None = None,
) -> Kernel:
    """Compose a kernel from a profile; raise the first problem as a :class:`TetherError`.

    ``profile`` is a loaded :class:`Profile`, a path, or ``None`` for ``tether.toml`` in the
    current directory. ``plugins`` are inline plugins by name (they win over installed ones);
    ``entry_points=False`` ignores installed plugins (``None`` follows
    ``TETHER_DISABLE_PLUGIN_AUTOLOAD``).
    """
    if not isinstance(profile, Profile):
        profile = load_profile(find_profile(profile))
    _check_plugin_dirs(profile, None)
    for name in profile.agent:
        _check_plugin_dirs(profile, name)
    if catalog is None:
        catalog = PluginCatalog.discover(
            inline=plugins, entry_points=entry_points, local_dirs=profile.tether.plugin_dirs
        )
    objects: dict[int, object] = {}
    own: dict[Path, list[PluginEntry]] = {}

    global_plugins = _load_layer(profile, catalog, None, objects, own)
    global_scope = Scope("global", "global", None, global_plugins)
    agent_scopes = {
        name: Scope(name, "agent", global_scope, _load_layer(profile, catalog, name, objects, own))
        for name in sorted(profile.agent)
    }
    kernel = Kernel(profile, catalog, global_scope, agent_scopes)
    for scope in kernel.scopes():
        for plugin in scope.plugins:
            plugin.requirements = plugin.collect("tether_requires", Requirement)
            for requirement in plugin.requirements:
                check_requirement(profile, scope, plugin, requirement)
    try:
        profile_store_provider(kernel)
    except StoreError as exc:
        if exc.code is not ErrorCode.STORE_SPEC_INVALID:
            raise
        raise StoreError(
            exc.code,
            exc.message,
            file=profile.file_of("tether", "store"),
            key="[tether] store",
            remedy=exc.remedy,
        ) from None
    return kernel


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
    objects: dict[int, object],
    own: dict[Path, list[PluginEntry]],
) -> list[LoadedPlugin]:
    """The plugin instances of one layer, in profile order; the global layer ends with the
    built-in plugins, loaded the same way. A name in an agent's layer is looked up in that
    agent's own ``plugin_dirs`` before the catalog."""
    names = profile.tether.plugins if agent is None else profile.agent[agent].plugins
    list_key = ("tether", "plugins") if agent is None else ("agent", agent, "plugins")
    key = format_loc(list_key[:-1], list_key[-1:])
    file = profile.file_of(*list_key)
    scope_id = "global" if agent is None else f"agent:{agent}"
    own_plugins = _own_plugins(profile, agent, own)
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
        loaded.append(_load(profile, agent, entry, objects, scope_id, file, key))
    if agent is None:
        for entry in catalog.builtins():
            seen.add(entry.name)
            loaded.append(_load(profile, agent, entry, objects, scope_id, None, None))
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


def _load(
    profile: Profile,
    agent: str | None,
    entry: PluginEntry,
    objects: dict[int, object],
    scope_id: str,
    file: Path | None,
    key: str | None,
) -> LoadedPlugin:
    """Import, register, configure one instance and collect its offers."""
    obj = _import(entry, objects, file, key)
    plugin = register_plugin(entry, obj, scope_id, file=file, key=key)
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
