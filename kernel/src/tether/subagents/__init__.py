"""Subagents: delegating a self-contained task to a child agent with its own session.

A child's failure resolves with a stop reason (``completed | aborted | error | max-tokens |
refusal``); only an infrastructure fault raises. Lineage (``parent_session``, ``origin``,
``delegation_depth``, ``seed_length``) lives in the child's durable session header.
"""

from __future__ import annotations

from ._child import (
    CONTINUABLE_DESCRIPTOR,
    DELEGATION_NOTE,
    LocalChildRun,
    compose_local_child,
    final_output,
    parse_structured,
    restore_local_child,
    start_local_child,
)
from ._continuation import (
    ActivationState,
    AgentEntry,
    ContinuableStart,
    ContinuationManager,
    InterruptOutcome,
    settlement_notice,
)
from ._depth import DEFAULT_MAX_DEPTH, child_depth, delegation_depth_of, validate_depth
from ._runtime import SubagentRuntime, check_output_schema
from ._types import (
    CAPABILITIES,
    AgentOptions,
    CancelSignal,
    Capability,
    ContinuablePlan,
    SubagentCapabilities,
    SubagentEvent,
    SubagentProvider,
    SubagentResult,
    SubagentRun,
    SubagentStartRequest,
)

__all__ = (
    "CAPABILITIES",
    "CONTINUABLE_DESCRIPTOR",
    "DEFAULT_MAX_DEPTH",
    "DELEGATION_NOTE",
    "ActivationState",
    "AgentEntry",
    "AgentOptions",
    "CancelSignal",
    "Capability",
    "ContinuablePlan",
    "ContinuableStart",
    "ContinuationManager",
    "InterruptOutcome",
    "LocalChildRun",
    "SubagentCapabilities",
    "SubagentEvent",
    "SubagentProvider",
    "SubagentResult",
    "SubagentRun",
    "SubagentRuntime",
    "SubagentStartRequest",
    "check_output_schema",
    "child_depth",
    "compose_local_child",
    "delegation_depth_of",
    "final_output",
    "parse_structured",
    "restore_local_child",
    "settlement_notice",
    "start_local_child",
    "validate_depth",
)
