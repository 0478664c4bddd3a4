"""The kernel: a profile composed into scopes of registered, configured, checked plugins.

:func:`load_kernel` is the whole startup: read the profile, import exactly the plugins it names,
register each strictly, validate its settings, collect offers, then check every requirement.
Anything impossible raises a :class:`tether.TetherError` before the first model call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .capabilities import SUBAGENT_PROVIDER, Offer, Requirement
from .errors import CapabilityError, ErrorCode, PluginError, ProfileError
from .plugins import LoadedPlugin, PluginCatalog, PluginEntry, register_plugin
from .profile import NAME_PATTERN, Profile, find_profile, format_loc, input_loc, load_profile
from .scopes import Scope
from .subagents._types import SubagentCapabilities, SubagentProvider, declared_capabilities

__all__ = ("Kernel", "PluginSettings", "load_kernel")


class PluginSettings(BaseModel):
    """A convenient base for plugin settings: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
            if not isinstance(name, str) or not name.strip():
                message, remedy = (
                    f"the agent name is empty ({name!r})",
                    f"name one of the profile's agents ({known}), or leave the agent out to "
                    "use the default one",
                )
            elif not re.match(NAME_PATTERN, name):
                message, remedy = (
                    f"{name!r} is not an agent name",
                    "agent names use letters, digits, '.', '_' and '-'; the profile's agents: "
                    + known,
                )
            else:
                message, remedy = (
                    f'unknown agent "{name}"',
                    f"declare [agent.{name}] in the profile or use one of: {known}",
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
        """Every plugin instance, scope by scope, in profile order."""
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
    for folder in profile.tether.plugin_dirs:
        if not folder.is_dir():
            raise ProfileError(
                ErrorCode.PROFILE_INVALID,
                f"plugin_dirs entry {str(folder)!r} is not a folder",
                file=profile.file_of("tether", "plugin_dirs"),
                key="[tether] plugin_dirs",
                remedy="create the folder or fix the path (relative to the profile's folder)",
            )
    if catalog is None:
        catalog = PluginCatalog.discover(
            inline=plugins, entry_points=entry_points, local_dirs=profile.tether.plugin_dirs
        )
    objects: dict[int, object] = {}

    global_plugins = _load_layer(profile, catalog, None, objects)
    global_scope = Scope("global", "global", None, global_plugins)
    agent_scopes = {
        name: Scope(name, "agent", global_scope, _load_layer(profile, catalog, name, objects))
        for name in sorted(profile.agent)
    }
    kernel = Kernel(profile, catalog, global_scope, agent_scopes)
    for scope in kernel.scopes():
        for plugin in scope.plugins:
            plugin.requirements = plugin.collect("tether_requires", Requirement)
            for requirement in plugin.requirements:
                _check_requirement(kernel, scope, plugin, requirement)
    return kernel


def _layer_key(agent: str | None) -> tuple[str, str]:
    """(table, key) where a layer's plugin list lives, for messages."""
    return ("[tether] plugins", "tether") if agent is None else (f"[agent.{agent}] plugins", agent)


def _load_layer(
    profile: Profile,
    catalog: PluginCatalog,
    agent: str | None,
    objects: dict[int, object],
) -> list[LoadedPlugin]:
    names = profile.tether.plugins if agent is None else profile.agent[agent].plugins
    key, _ = _layer_key(agent)
    list_key = ("tether", "plugins") if agent is None else ("agent", agent, "plugins")
    file = profile.file_of(*list_key)
    scope_id = "global" if agent is None else f"agent:{agent}"
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
        entry = catalog.resolve(name, file=file, key=key)
        obj = _import(entry, objects, file, key)
        plugin = register_plugin(entry, obj, scope_id, file=file, key=key)
        plugin.settings = _validate_settings(profile, agent, plugin)
        plugin.offers = plugin.collect("tether_offers", Offer)
        plugin.offers = (*plugin.offers, *_derived_offers(plugin))
        loaded.append(plugin)
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


def _import(entry: PluginEntry, objects: dict[int, object], file: Any, key: str) -> object:
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


def _derived_offers(plugin: LoadedPlugin) -> tuple[Offer, ...]:
    """The offers derived from what a plugin's subagent providers declare (their
    ``capabilities``), for the providers no offer of its own names: a provider declares once.
    Each derived offer is checked against its provider like any offer."""
    if not plugin.implements("tether_subagent_providers"):
        return ()
    named = {
        offer.name or plugin.name for offer in plugin.offers if offer.kind == SUBAGENT_PROVIDER
    }
    providers = plugin.collect("tether_subagent_providers", SubagentProvider)
    derived: list[Offer] = []
    for provider in providers:
        if provider.name in named:
            continue
        if not isinstance(getattr(provider, "capabilities", None), SubagentCapabilities):
            capabilities = frozenset[str]()  # the check below says what is wrong
        else:
            capabilities = declared_capabilities(provider)
        derived.append(
            Offer(
                kind=SUBAGENT_PROVIDER,
                name=None if provider.name == plugin.name else provider.name,
                capabilities=capabilities,
            )
        )
    plugin.check_offers(derived)
    return tuple(derived)


def _validate_settings(profile: Profile, agent: str | None, plugin: LoadedPlugin) -> Any:
    where = profile.settings_key(agent, plugin.name)
    table = profile.settings_table(agent, plugin.name)
    file = profile.file_of(*where)
    model = _settings_model(plugin, profile)
    if model is None:
        if table is not None:
            raise PluginError(
                ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'plugin "{plugin.name}" ({plugin.entry.source}) takes no settings',
                file=file,
                key=format_loc(where, ()),
                plugin=plugin.name,
                remedy="remove the table",
            )
        return None
    try:
        return model.model_validate(
            table or {}, context=profile.settings_context(agent, plugin.name)
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = input_loc(table or {}, tuple(error["loc"]))
        # One key that fails every branch of a union yields one error per branch: count keys.
        places = {input_loc(table or {}, tuple(e["loc"])) for e in exc.errors()}
        more = len(places) - 1
        reason = error["msg"] + (f" (and {more} more)" if more else "")
        key_file = profile.file_of(*where, *(str(p) for p in loc)) or file
        raise PluginError(
            ErrorCode.PLUGIN_SETTINGS_INVALID,
            f'invalid settings for plugin "{plugin.name}" ({plugin.entry.source}): {reason}',
            file=key_file,
            key=format_loc(where, loc),
            plugin=plugin.name,
            remedy=_settings_remedy(error, model),
        ) from exc


def _settings_remedy(error: Any, model: type[BaseModel]) -> str:
    if error.get("type") == "extra_forbidden":
        known = ", ".join(model.model_fields) or "none"
        return f"remove the key; known settings: {known}"
    if error.get("type") == "missing":
        return "add the key"
    return "fix the value"


def _settings_model(plugin: LoadedPlugin, profile: Profile) -> type[BaseModel] | None:
    model = plugin.call("tether_settings_model")
    if model is None:
        return None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise plugin.contract_violation(
            "tether_settings_model", "a pydantic BaseModel subclass", model
        )
    return model


def _check_requirement(
    kernel: Kernel, scope: Scope, plugin: LoadedPlugin, requirement: Requirement
) -> None:
    profile = kernel.profile
    agent = scope.name if scope.kind == "agent" else None
    where = profile.settings_key(agent, plugin.name)
    because = f'plugin "{plugin.name}"'
    file = profile.file_of(*where)
    key = format_loc(where, ())
    if requirement.setting:
        table = profile.settings_table(agent, plugin.name) or {}
        setting_file = profile.file_of(*where, requirement.setting) or file
        if requirement.setting in table:
            value = _toml_value(table[requirement.setting])
            because += f", setting {requirement.setting} = {value} in {setting_file}"
        else:
            because += f", default {requirement.setting} in {file}"
        file = setting_file
        key = format_loc(where, (requirement.setting,))
    target = scope.find_plugin(requirement.plugin)
    named: str | None = None
    if target is None:  # an offer known by its own name (one of several a plugin makes)
        for candidate in scope.visible_plugins():
            if any(
                o.kind == requirement.kind and o.name == requirement.plugin
                for o in candidate.offers
            ):
                target, named = candidate, requirement.plugin
                break
    offering = list(
        dict.fromkeys(  # profile order, each name once
            offer.name or p.name
            for p in scope.visible_plugins()
            if p is not plugin
            for offer in p.offers
            if (offer.name or p.name) != requirement.plugin
            and _offer_gap(_offers_named(p, offer.name), requirement) is None
        )
    )
    alternatives = f"plugins here that offer it: {', '.join(offering)}" if offering else ""
    if target is None:
        layer_key, _ = _layer_key(agent)
        fix = f'add "{requirement.plugin}" to {layer_key}'
        raise CapabilityError(
            ErrorCode.MISSING_REQUIRED_PLUGIN,
            f'{requirement.kind} "{requirement.plugin}" is not loaded in scope {scope.path}',
            where=because,
            file=file,
            key=key,
            plugin=plugin.name,
            remedy="; ".join(x for x in (fix, alternatives) if x),
        )
    gap = _offer_gap(_offers_named(target, named), requirement)
    if gap is None:
        return
    if gap == "":
        what = f'plugin "{target.name}" ({target.entry.source}) is not a {requirement.kind}'
    else:
        shown = named or target.name
        what = f'{requirement.kind} "{shown}" does not support the "{gap}" capability'
    raise CapabilityError(
        ErrorCode.UNSUPPORTED_CAPABILITY,
        what,
        where=because,
        file=file,
        key=key,
        plugin=plugin.name,
        remedy="; ".join(x for x in (requirement.remedy, alternatives) if x)
        or f"use another {requirement.kind}",
    )


def _offers_named(plugin: LoadedPlugin, name: str | None) -> list[Any]:
    """The offers of ``plugin`` known as ``name`` (``None``: as the plugin itself)."""
    if name is None or name == plugin.name:
        return [o for o in plugin.offers if o.name in (None, plugin.name)]
    return [o for o in plugin.offers if o.name == name]


def _offer_gap(offers: Iterable[Any], requirement: Requirement) -> str | None:
    """``None`` if satisfied, ``""`` if nothing of the kind is offered, else the first gap."""
    matching = [offer for offer in offers if offer.kind == requirement.kind]
    if not matching:
        return ""
    have: set[str] = set().union(*(offer.capabilities for offer in matching))
    for capability in requirement.capabilities:
        if capability not in have:
            return capability
    return None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
