"""The contracts: protocols and value types that cross a plugin boundary, and no behaviour.

The room directly above the ground, importing nothing else of tether when it runs: what a plugin
implements or is handed, so that the load-time checks and the rooms that use a contract import
it without importing each other. Today: the delegation contract (:class:`SubagentProvider`, its
start requests, runs and results, its capabilities and the offer check), re-exported by
:mod:`tether.subagents` under the same names, and a turn's :data:`StopReason`, re-exported by
:mod:`tether.store`.

The names below are imported on first use (a module ``__getattr__``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._subagents import (
        CAPABILITIES,
        AgentOptions,
        CancelSignal,
        Capability,
        ContinuablePlan,
        ContinuableProvider,
        SettlingRun,
        SubagentCapabilities,
        SubagentEvent,
        SubagentProvider,
        SubagentResult,
        SubagentRun,
        SubagentStartRequest,
        check_provider_offer,
        declared_capabilities,
    )
    from ._turns import StopReason

__all__ = (
    "CAPABILITIES",
    "AgentOptions",
    "CancelSignal",
    "Capability",
    "ContinuablePlan",
    "ContinuableProvider",
    "SettlingRun",
    "StopReason",
    "SubagentCapabilities",
    "SubagentEvent",
    "SubagentProvider",
    "SubagentResult",
    "SubagentRun",
    "SubagentStartRequest",
    "check_provider_offer",
    "declared_capabilities",
)

_LAZY: dict[str, str] = {**dict.fromkeys(__all__, "_subagents"), "StopReason": "_turns"}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
