"""Loading: from a profile file to a frozen :class:`Kernel`, checked before anything runs.

One job per module, in the order startup walks them:

* :mod:`~tether.loading.text`: small text files and the TOML in them (shared with model
  scripts and instructions files);
* :mod:`~tether.loading.boundary`: the trust boundary: a path a file names stays inside that
  file's folder unless the profile the user runs allows it (docs/trust.md);
* :mod:`~tether.loading.names`: the name grammar of plugins, agents and tool names;
* :mod:`~tether.loading.folders`: agent folders (``[tether] agents``) read into agent tables,
  and which files of a folder are local plugins;
* :mod:`~tether.loading.profile`: the profile model, ``extends`` merging, ``ProfilePath``, the
  agent folders merged under the profile's own tables;
* :mod:`~tether.loading.catalog`: every plugin that could be loaded (built-in, installed,
  local, inline), by name, importing nothing;
* :mod:`~tether.loading.registration`: one plugin instance in a pluggy manager of its own,
  its hooks checked against the specs;
* :mod:`~tether.loading.settings`: each instance's settings table, validated;
* :mod:`~tether.loading.scopes`: the layers instances live in and the chain through them;
* :mod:`~tether.loading.capabilities`: offers, requirements and the check between them;
* :mod:`~tether.loading.kernel`: :func:`load_kernel`, the whole walk, and the :class:`Kernel`.

The names below are imported on first use (a module ``__getattr__``), so importing one module
of the package (a model script reads :mod:`~tether.loading.text`) imports no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from .boundary import Boundary
    from .capabilities import SUBAGENT_PROVIDER, Offer, OfferContract, Requirement, offer_contract
    from .catalog import (
        AUTOLOAD_ENV,
        BUILTIN_PLUGINS,
        ENTRY_POINT_GROUP,
        FIRST_PARTY_PLUGINS,
        PluginCatalog,
        PluginEntry,
    )
    from .kernel import Kernel, load_kernel
    from .profile import (
        DEFAULT_PROFILE_NAME,
        NAME_PATTERN,
        AgentTable,
        ContainedPath,
        Profile,
        ProfilePath,
        TetherTable,
        find_profile,
        load_profile,
        profile_from_dict,
    )
    from .registration import TRACE_ENV, LoadedPlugin, register_plugin
    from .scopes import Scope, ScopeKind
    from .settings import Plugin, PluginSettings
    from .text import TextFileError

__all__ = (
    "AUTOLOAD_ENV",
    "BUILTIN_PLUGINS",
    "DEFAULT_PROFILE_NAME",
    "ENTRY_POINT_GROUP",
    "FIRST_PARTY_PLUGINS",
    "NAME_PATTERN",
    "SUBAGENT_PROVIDER",
    "TRACE_ENV",
    "AgentTable",
    "Boundary",
    "ContainedPath",
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
    "TetherTable",
    "TextFileError",
    "find_profile",
    "load_kernel",
    "load_profile",
    "offer_contract",
    "profile_from_dict",
    "register_plugin",
)

_LAZY = {
    "Boundary": "boundary",
    "ContainedPath": "profile",
    "SUBAGENT_PROVIDER": "capabilities",
    "Offer": "capabilities",
    "OfferContract": "capabilities",
    "Requirement": "capabilities",
    "offer_contract": "capabilities",
    "AUTOLOAD_ENV": "catalog",
    "BUILTIN_PLUGINS": "catalog",
    "ENTRY_POINT_GROUP": "catalog",
    "FIRST_PARTY_PLUGINS": "catalog",
    "PluginCatalog": "catalog",
    "PluginEntry": "catalog",
    "Kernel": "kernel",
    "load_kernel": "kernel",
    "DEFAULT_PROFILE_NAME": "profile",
    "NAME_PATTERN": "profile",
    "AgentTable": "profile",
    "Profile": "profile",
    "ProfilePath": "profile",
    "TetherTable": "profile",
    "find_profile": "profile",
    "load_profile": "profile",
    "profile_from_dict": "profile",
    "TRACE_ENV": "registration",
    "LoadedPlugin": "registration",
    "register_plugin": "registration",
    "Scope": "scopes",
    "ScopeKind": "scopes",
    "Plugin": "settings",
    "PluginSettings": "settings",
    "TextFileError": "text",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
