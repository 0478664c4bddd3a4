"""tether: an agent-harness microkernel for context control.

The public names are imported lazily, so ``import tether`` stays cheap for a command that only
needs part of the kernel (``tether --version`` imports nothing heavy).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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
    from .loading.settings import PluginSettings

__all__ = (
    "AgentError",
    "CapabilityError",
    "ErrorCode",
    "HostError",
    "Kernel",
    "LoadedPlugin",
    "ModelError",
    "Offer",
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
