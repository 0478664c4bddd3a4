"""Loading: from a profile file to a frozen :class:`Kernel`, checked before anything runs.

One job per private module, in the order startup walks them (the text files, names and folder
boundary they read with are :mod:`tether.ground`'s):

* ``_folders``: agent folders (``[tether] agents``) read into agent tables, and which files of
  a folder are local plugins;
* ``_profile``: the profile model, ``extends`` merging, ``ProfilePath``, the agent folders
  merged under the profile's own tables;
* ``_entrypoints``: tether's own reader of installed entry points;
* ``_catalog``: every plugin that could be loaded (built-in, installed, local, inline), by name,
  importing nothing;
* ``_registration``: one plugin instance in a pluggy manager of its own, its hooks checked
  against the specs;
* ``_settings``: each instance's settings table, validated;
* ``_scopes``: the layers instances live in and the chain through them;
* ``_capabilities``: the check between offers and requirements (:mod:`tether.contracts`'s);
* ``_stores``: which store provider the profile names (opened by
  :func:`tether.runtime.profile_store`);
* ``_kernel``: :func:`load_kernel`, the whole walk, and the :class:`Kernel`.

The names below are the package's public surface; each is imported on first use (a module
``__getattr__``), so reading one imports only the module that defines it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import Offer, Requirement
    from ._capabilities import SUBAGENT_PROVIDER, OfferContract, offer_contract
    from ._catalog import (
        AUTOLOAD_ENV,
        BUILTIN_PLUGINS,
        ENTRY_POINT_GROUP,
        FIRST_PARTY_PLUGINS,
        PluginCatalog,
        PluginEntry,
        local_entries,
    )
    from ._entrypoints import InstalledEntryPoint, installed_entry_points
    from ._folders import plugin_files
    from ._kernel import Kernel, load_kernel
    from ._profile import (
        DEFAULT_PROFILE_NAME,
        NAME_PATTERN,
        SCRIPTED_PREFIX,
        AgentTable,
        ContainedPath,
        Profile,
        ProfilePath,
        SessionsTable,
        TetherTable,
        find_profile,
        load_profile,
        profile_from_dict,
    )
    from ._registration import TRACE_ENV, LoadedPlugin, register_plugin
    from ._scopes import Scope, ScopeKind
    from ._settings import Plugin, PluginSettings, class_hook, is_plugin_class
    from ._stores import STORE_HOOK, profile_store_provider

__all__ = (
    "AUTOLOAD_ENV",
    "BUILTIN_PLUGINS",
    "DEFAULT_PROFILE_NAME",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "NAME_PATTERN",
    "SCRIPTED_PREFIX",
    "STORE_HOOK",
    "SUBAGENT_PROVIDER",
    "TRACE_ENV",
    "AgentTable",
    "ContainedPath",
    "InstalledEntryPoint",
    "Kernel",
    "LoadedPlugin",
    "Offer",
    "OfferContract",
    "Plugin",
    "PluginCatalog",
    "PluginEntry",
    "PluginSettings",
    "Profile",
    "ProfilePath",
    "Requirement",
    "Scope",
    "ScopeKind",
    "SessionsTable",
    "TetherTable",
    "class_hook",
    "find_profile",
    "installed_entry_points",
    "is_plugin_class",
    "load_kernel",
    "load_profile",
    "local_entries",
    "offer_contract",
    "plugin_files",
    "profile_from_dict",
    "profile_store_provider",
    "register_plugin",
)

# A value starting with a dot is a module beside this package (the contracts room).
_LAZY = {
    "SUBAGENT_PROVIDER": "_capabilities",
    "Offer": ".contracts",
    "OfferContract": "_capabilities",
    "Requirement": ".contracts",
    "offer_contract": "_capabilities",
    "AUTOLOAD_ENV": "_catalog",
    "BUILTIN_PLUGINS": "_catalog",
    "ENTRY_POINT_GROUP": "_catalog",
    "FIRST_PARTY_PLUGINS": "_catalog",
    "PluginCatalog": "_catalog",
    "PluginEntry": "_catalog",
    "local_entries": "_catalog",
    "InstalledEntryPoint": "_entrypoints",
    "installed_entry_points": "_entrypoints",
    "plugin_files": "_folders",
    "Kernel": "_kernel",
    "load_kernel": "_kernel",
    "DEFAULT_PROFILE_NAME": "_profile",
    "NAME_PATTERN": "_profile",
    "SCRIPTED_PREFIX": "_profile",
    "AgentTable": "_profile",
    "ContainedPath": "_profile",
    "Profile": "_profile",
    "ProfilePath": "_profile",
    "SessionsTable": "_profile",
    "TetherTable": "_profile",
    "find_profile": "_profile",
    "load_profile": "_profile",
    "profile_from_dict": "_profile",
    "TRACE_ENV": "_registration",
    "LoadedPlugin": "_registration",
    "register_plugin": "_registration",
    "Scope": "_scopes",
    "ScopeKind": "_scopes",
    "Plugin": "_settings",
    "PluginSettings": "_settings",
    "class_hook": "_settings",
    "is_plugin_class": "_settings",
    "STORE_HOOK": "_stores",
    "profile_store_provider": "_stores",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
