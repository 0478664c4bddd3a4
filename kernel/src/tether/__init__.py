"""tether: an agent-harness microkernel for context control.

The public names are imported lazily, so ``import tether`` stays cheap for a command that only
needs part of the kernel (``tether --version`` imports nothing heavy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports as _lazy_exports
from ._version import __version__

if TYPE_CHECKING:
    from .errors import (
        AgentError,
        CapabilityError,
        ErrorCode,
        HostError,
        ModelError,
        PluginError,
        ProfileError,
        SkillError,
        StoreError,
        SubagentError,
        TetherError,
    )
    from .hookspecs import hookimpl
    from .loading.capabilities import Offer, Requirement
    from .loading.catalog import PluginCatalog, PluginEntry
    from .loading.kernel import Kernel, load_kernel
    from .loading.profile import Profile, ProfilePath, load_profile
    from .loading.registration import LoadedPlugin
    from .loading.scopes import Scope
    from .loading.settings import Plugin, PluginSettings

__all__ = (
    "AgentError",
    "CapabilityError",
    "ErrorCode",
    "HostError",
    "Kernel",
    "LoadedPlugin",
    "ModelError",
    "Offer",
    "Plugin",
    "PluginCatalog",
    "PluginEntry",
    "PluginError",
    "PluginSettings",
    "Profile",
    "ProfileError",
    "ProfilePath",
    "Requirement",
    "Scope",
    "SkillError",
    "StoreError",
    "SubagentError",
    "TetherError",
    "__version__",
    "hookimpl",
    "load_kernel",
    "load_profile",
)

_LAZY = {
    "Offer": "loading.capabilities",
    "Requirement": "loading.capabilities",
    "AgentError": "errors",
    "CapabilityError": "errors",
    "HostError": "errors",
    "ModelError": "errors",
    "SkillError": "errors",
    "StoreError": "errors",
    "SubagentError": "errors",
    "ErrorCode": "errors",
    "PluginError": "errors",
    "ProfileError": "errors",
    "TetherError": "errors",
    "hookimpl": "hookspecs",
    "Kernel": "loading.kernel",
    "Plugin": "loading.settings",
    "PluginSettings": "loading.settings",
    "load_kernel": "loading.kernel",
    "LoadedPlugin": "loading.registration",
    "PluginCatalog": "loading.catalog",
    "PluginEntry": "loading.catalog",
    "Profile": "loading.profile",
    "ProfilePath": "loading.profile",
    "load_profile": "loading.profile",
    "Scope": "loading.scopes",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
