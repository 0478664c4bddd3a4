"""The local-child kit: what the author of a provider whose children are agents of this
profile uses (spawn, fork and the declared subagents' provider are built on it; the ACP and
A2A providers use it for a child behind a remote agent's model).

* :class:`LocalChildProvider`: the skeleton of such a provider (name it, say what a child
  starts from);
* :func:`start_child`: start a one-shot child where the runtime runs children (here, or on its
  child host), as a :class:`LocalChildRun` or a :class:`HostedChildRun`;
  :func:`start_local_child` always here (a child with a model of the provider's own);
* :func:`compose_local_child`: a child's setup window (its session, its log, its agent), and
  :func:`restore_local_child`: a stored continuable child rebuilt cold from its own log, found
  by its :data:`CONTINUABLE_DESCRIPTOR` (:func:`find_continuable_descriptor`);
* :func:`final_output` and :func:`parse_structured`: a child's answer, and its JSON checked
  against an output schema.

The contract these providers keep (``SubagentProvider``, ``SubagentStartRequest``,
``ContinuablePlan``, ...) and the subagent service are in :mod:`tether.subagents`. Like it, this
module imports what a name needs on its first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._child import LocalChildRun, final_output, parse_structured, start_local_child
    from ._hosted import HostedChildRun, start_child
    from ._kit import (
        CONTINUABLE_DESCRIPTOR,
        compose_local_child,
        find_continuable_descriptor,
        restore_local_child,
    )
    from ._provider import LocalChildProvider

__all__ = (
    "CONTINUABLE_DESCRIPTOR",
    "HostedChildRun",
    "LocalChildProvider",
    "LocalChildRun",
    "compose_local_child",
    "final_output",
    "find_continuable_descriptor",
    "parse_structured",
    "restore_local_child",
    "start_child",
    "start_local_child",
)

#: name -> its module, relative to this one (a sibling: ``._kit`` is ``tether.subagents._kit``).
_LAZY = {
    "CONTINUABLE_DESCRIPTOR": "._kit",
    "HostedChildRun": "._hosted",
    "LocalChildProvider": "._provider",
    "LocalChildRun": "._child",
    "compose_local_child": "._kit",
    "final_output": "._child",
    "find_continuable_descriptor": "._kit",
    "parse_structured": "._child",
    "restore_local_child": "._kit",
    "start_child": "._hosted",
    "start_local_child": "._child",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
