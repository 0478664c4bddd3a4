"""Subagents: delegating a self-contained task to a child agent with its own session.

A child's failure resolves with a stop reason (``completed | aborted | error | max-tokens |
refusal``); only an infrastructure fault raises. Lineage (``parent_session``, ``origin``,
``delegation_depth``, ``seed_length``) lives in the child's durable session header.

The package imports its modules on first use of a name (as ``tether`` does): importing the
delegation contract (``tether.subagents._types``), which the load-time capability check holds
offers to, does not import the subagent service, the agents or the kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._activation import ActivationState
    from ._child import LocalChildRun, final_output, parse_structured, start_local_child
    from ._continuation import ContinuableStart, ContinuationManager, InterruptOutcome
    from ._depth import DEFAULT_MAX_DEPTH, child_depth, delegation_depth_of, validate_depth
    from ._hosted import HostedChildRun, start_child
    from ._kit import (
        CONTINUABLE_DESCRIPTOR,
        compose_local_child,
        find_continuable_descriptor,
        restore_local_child,
    )
    from ._listing import AgentEntry
    from ._runtime import SubagentRuntime, check_output_schema
    from ._specialists import SPECIALIST_PROVIDER, TASKS_NOTE, SpecialistProvider, task_tools
    from ._tasks import (
        MAX_WORKING_TASKS,
        RESULT_BUDGET_BYTES,
        RESULT_BUDGET_LINES,
        TaskInfo,
        Tasks,
        receipt,
        render_task_result,
        sent_receipt,
    )
    from ._types import (
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
    from .notices import DELEGATION_NOTE, remote_text, settlement_notice

__all__ = (
    "CAPABILITIES",
    "CONTINUABLE_DESCRIPTOR",
    "DEFAULT_MAX_DEPTH",
    "DELEGATION_NOTE",
    "MAX_WORKING_TASKS",
    "RESULT_BUDGET_BYTES",
    "RESULT_BUDGET_LINES",
    "SPECIALIST_PROVIDER",
    "TASKS_NOTE",
    "ActivationState",
    "AgentEntry",
    "AgentOptions",
    "CancelSignal",
    "Capability",
    "ContinuablePlan",
    "ContinuableProvider",
    "ContinuableStart",
    "ContinuationManager",
    "HostedChildRun",
    "InterruptOutcome",
    "LocalChildRun",
    "SettlingRun",
    "SpecialistProvider",
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
    "compose_local_child",
    "declared_capabilities",
    "delegation_depth_of",
    "final_output",
    "find_continuable_descriptor",
    "parse_structured",
    "receipt",
    "remote_text",
    "render_task_result",
    "restore_local_child",
    "sent_receipt",
    "settlement_notice",
    "start_child",
    "start_local_child",
    "task_tools",
    "validate_depth",
)

_LAZY = {
    "SPECIALIST_PROVIDER": "_specialists",
    "SpecialistProvider": "_specialists",
    "TASKS_NOTE": "_specialists",
    "task_tools": "_specialists",
    "MAX_WORKING_TASKS": "_tasks",
    "RESULT_BUDGET_BYTES": "_tasks",
    "RESULT_BUDGET_LINES": "_tasks",
    "TaskInfo": "_tasks",
    "Tasks": "_tasks",
    "receipt": "_tasks",
    "render_task_result": "_tasks",
    "sent_receipt": "_tasks",
    "ActivationState": "_activation",
    "LocalChildRun": "_child",
    "final_output": "_child",
    "parse_structured": "_child",
    "start_child": "_hosted",
    "start_local_child": "_child",
    "HostedChildRun": "_hosted",
    "ContinuableStart": "_continuation",
    "ContinuationManager": "_continuation",
    "InterruptOutcome": "_continuation",
    "DEFAULT_MAX_DEPTH": "_depth",
    "child_depth": "_depth",
    "delegation_depth_of": "_depth",
    "validate_depth": "_depth",
    "CONTINUABLE_DESCRIPTOR": "_kit",
    "compose_local_child": "_kit",
    "find_continuable_descriptor": "_kit",
    "restore_local_child": "_kit",
    "AgentEntry": "_listing",
    "SubagentRuntime": "_runtime",
    "check_output_schema": "_runtime",
    "CAPABILITIES": "_types",
    "AgentOptions": "_types",
    "CancelSignal": "_types",
    "Capability": "_types",
    "ContinuablePlan": "_types",
    "ContinuableProvider": "_types",
    "SettlingRun": "_types",
    "SubagentCapabilities": "_types",
    "SubagentEvent": "_types",
    "SubagentProvider": "_types",
    "SubagentResult": "_types",
    "SubagentRun": "_types",
    "SubagentStartRequest": "_types",
    "check_provider_offer": "_types",
    "declared_capabilities": "_types",
    "DELEGATION_NOTE": "notices",
    "remote_text": "notices",
    "settlement_notice": "notices",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
