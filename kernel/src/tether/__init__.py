"""tether: an agent-harness microkernel for context control.

The public names are imported lazily, so ``import tether`` stays cheap for a command that only
needs part of the kernel (``tether --version`` imports nothing heavy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__
from .ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from .contracts import Offer, Requirement
    from .errors import (
        AgentError,
        BudgetError,
        CallerError,
        CapabilityError,
        ErrorCode,
        GuardrailError,
        HostError,
        ModelError,
        PluginError,
        ProfileError,
        SkillError,
        StoreError,
        SubagentError,
        TetherError,
        WorkspaceError,
    )
    from .hookspecs import hookimpl
    from .loading import (
        Kernel,
        LoadedPlugin,
        Plugin,
        PluginCatalog,
        PluginEntry,
        PluginSettings,
        Profile,
        ProfilePath,
        Scope,
        load_kernel,
        load_profile,
    )

__all__ = (
    "AgentError",
    "BudgetError",
    "CallerError",
    "CapabilityError",
    "ErrorCode",
    "GuardrailError",
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
    "WorkspaceError",
    "__version__",
    "hookimpl",
    "load_kernel",
    "load_profile",
)

_LAZY = {
    "Offer": "contracts",
    "Requirement": "contracts",
    "AgentError": "errors",
    "BudgetError": "errors",
    "CallerError": "errors",
    "CapabilityError": "errors",
    "GuardrailError": "errors",
    "HostError": "errors",
    "ModelError": "errors",
    "SkillError": "errors",
    "StoreError": "errors",
    "SubagentError": "errors",
    "ErrorCode": "errors",
    "PluginError": "errors",
    "ProfileError": "errors",
    "TetherError": "errors",
    "WorkspaceError": "errors",
    "hookimpl": "hookspecs",
    "Kernel": "loading._kernel",
    "Plugin": "loading._settings",
    "PluginSettings": "loading._settings",
    "load_kernel": "loading._kernel",
    "LoadedPlugin": "loading._registration",
    "PluginCatalog": "loading._catalog",
    "PluginEntry": "loading._catalog",
    "Profile": "loading._profile",
    "ProfilePath": "loading._profile",
    "load_profile": "loading._profile",
    "Scope": "loading._scopes",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
