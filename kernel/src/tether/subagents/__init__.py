"""Subagents: delegating a self-contained task to a child agent with its own session.

A child's failure resolves with a stop reason (``completed | aborted | error | max-tokens |
refusal``); only an infrastructure fault raises. Lineage (``parent_session``, ``origin``,
``delegation_depth``, ``seed_length``) lives in the child's durable session header.

Three audiences, three places:

* this package: the **service** a runtime offers (:class:`SubagentRuntime`, its continuable
  children :class:`ContinuationManager` and background :class:`Tasks`, the depth a child
  gets), and the **delegation contract** providers keep (:class:`SubagentProvider`, its
  capabilities and the offer check);
* :mod:`tether.subagents.local`: the **local-child kit** for the author of a provider whose
  children are agents of the profile (:class:`~tether.subagents.local.LocalChildProvider`,
  ``start_child``, ``compose_local_child``, ...);
* :mod:`tether.subagents.notices`: the texts a model reads about its children.

The declared subagents (specialists) and the task tools are the built-in plugin
:mod:`tether.specialists`. The delegation contract lives in :mod:`tether.contracts` (its
names re-exported here), where the load-time capability check reads it without importing the
subagent service, the agents or the kernel. The package imports its modules on first use of a
name (as ``tether`` does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import (
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
    from ._activation import ActivationState
    from ._continuation import ContinuableStart, ContinuationManager, InterruptOutcome
    from ._depth import DEFAULT_MAX_DEPTH, child_depth
    from ._listing import AgentEntry
    from ._runtime import SubagentRuntime, check_output_schema
    from ._tasks import TaskInfo, Tasks, receipt

#: At most 30 names (tests/meta/test_public_names.py): the contract's 15 (re-exported from
#: :mod:`tether.contracts`) and the service's; the kit is in ``tether.subagents.local``.
__all__ = (
    "CAPABILITIES",
    "DEFAULT_MAX_DEPTH",
    "ActivationState",
    "AgentEntry",
    "AgentOptions",
    "CancelSignal",
    "Capability",
    "ContinuablePlan",
    "ContinuableProvider",
    "ContinuableStart",
    "ContinuationManager",
    "InterruptOutcome",
    "SettlingRun",
    "SubagentCapabilities",
    "SubagentEvent",
    "SubagentProvider",
    "SubagentResult",
    "SubagentRun",
    "SubagentRuntime",
    "SubagentStartRequest",
    "TaskInfo",
    "Tasks",
    "check_output_schema",
    "check_provider_offer",
    "child_depth",
    "declared_capabilities",
    "receipt",
)

# A value starting with a dot is a module beside this package (the contracts room).
_LAZY = {
    "CAPABILITIES": ".contracts",
    "AgentOptions": ".contracts",
    "CancelSignal": ".contracts",
    "Capability": ".contracts",
    "ContinuablePlan": ".contracts",
    "ContinuableProvider": ".contracts",
    "SettlingRun": ".contracts",
    "SubagentCapabilities": ".contracts",
    "SubagentEvent": ".contracts",
    "SubagentProvider": ".contracts",
    "SubagentResult": ".contracts",
    "SubagentRun": ".contracts",
    "SubagentStartRequest": ".contracts",
    "check_provider_offer": ".contracts",
    "declared_capabilities": ".contracts",
    "DEFAULT_MAX_DEPTH": "_depth",
    "ActivationState": "_activation",
    "AgentEntry": "_listing",
    "ContinuableStart": "_continuation",
    "ContinuationManager": "_continuation",
    "InterruptOutcome": "_continuation",
    "SubagentRuntime": "_runtime",
    "TaskInfo": "_tasks",
    "Tasks": "_tasks",
    "check_output_schema": "_runtime",
    "child_depth": "_depth",
    "receipt": "_tasks",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
