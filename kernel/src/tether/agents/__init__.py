"""Agents: the turn loop, its inbox, tools, prompt composition.

Agents are composed by a runtime (:func:`tether.runtime.compose_agent`,
:meth:`tether.runtime.Runtime.compose`), which they live in. An :class:`Agent` is built whole
from its parts (:class:`AgentSpec`) and its jobs are owned by collaborators: its
:class:`SessionLease` (lease, log, mail), :class:`Inbox`, :class:`TurnLoop` (each
:class:`Turn`) and :class:`ContextBudget` (history, window, compaction).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import (
        CompactionInput,
        CompactionStrategy,
        DynamicInstruction,
        InstructionContext,
        PreStep,
        Specialist,
        StepContext,
        Tool,
        ToolContext,
        ToolError,
        ToolFilter,
        ToolOutput,
        ToolSource,
        Tracer,
        TurnStart,
    )
    from ..store.replay import event_to_message, render_instruction
    from ._agent import Agent, new_header
    from ._approvals import (
        ELICITATION_OPTIONS,
        ApprovalPolicy,
        Elicitation,
        PermissionDesk,
        PermissionHost,
        PermissionQuestion,
        ask_permission,
        asking_root,
        question_path,
        stricter,
    )
    from ._budget import ContextBudget
    from ._callers import admit_caller
    from ._compaction import SUMMARY_INSTRUCTION
    from ._compose import (
        AgentPreset,
        build_preset,
        check_servable,
        resolve_agent_name,
        resolve_preset_model,
    )
    from ._evict import RESULTS_FOLDER, evict
    from ._inbox import Inbox
    from ._instructions import (
        PARALLEL_TOOLS_SECTION,
        load_instructions,
    )
    from ._keeper import LEASE_RENEWAL, MAIL_POLL, keep_sessions
    from ._lease import SessionLease
    from ._limits import AgentLimits, CompactionPolicy
    from ._loop import TurnLoop
    from ._spec import AgentSpec
    from ._stream import AnswerStream
    from ._tools import ToolRegistry
    from ._tracing import (
        TRACE_KEYS,
        carry_trace,
        current_trace,
        trace_from,
        tracer_of,
        tracing,
    )
    from ._turn import Turn

__all__ = (
    "ELICITATION_OPTIONS",
    "LEASE_RENEWAL",
    "MAIL_POLL",
    "PARALLEL_TOOLS_SECTION",
    "RESULTS_FOLDER",
    "SUMMARY_INSTRUCTION",
    "TRACE_KEYS",
    "Agent",
    "AgentLimits",
    "AgentPreset",
    "AgentSpec",
    "AnswerStream",
    "ApprovalPolicy",
    "CompactionInput",
    "CompactionPolicy",
    "CompactionStrategy",
    "ContextBudget",
    "DynamicInstruction",
    "Elicitation",
    "Inbox",
    "InstructionContext",
    "PermissionDesk",
    "PermissionHost",
    "PermissionQuestion",
    "PreStep",
    "SessionLease",
    "Specialist",
    "StepContext",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFilter",
    "ToolOutput",
    "ToolRegistry",
    "ToolSource",
    "Tracer",
    "Turn",
    "TurnLoop",
    "TurnStart",
    "admit_caller",
    "ask_permission",
    "asking_root",
    "build_preset",
    "carry_trace",
    "check_servable",
    "current_trace",
    "event_to_message",
    "evict",
    "keep_sessions",
    "load_instructions",
    "new_header",
    "question_path",
    "render_instruction",
    "resolve_agent_name",
    "resolve_preset_model",
    "stricter",
    "trace_from",
    "tracer_of",
    "tracing",
)

# The names are imported when first used: a plugin that offers a tool or a pre-step hook
# imports the module that defines it, not the Agent and the session events (docs/startup.md).
# A value starting with a dot is a module beside this package (tether.contracts, store.replay).
_LAZY = {
    "event_to_message": ".store.replay",
    "render_instruction": ".store.replay",
    "Agent": "_agent",
    "new_header": "_agent",
    "ApprovalPolicy": "_approvals",
    "ELICITATION_OPTIONS": "_approvals",
    "Elicitation": "_approvals",
    "PermissionDesk": "_approvals",
    "PermissionHost": "_approvals",
    "PermissionQuestion": "_approvals",
    "admit_caller": "_callers",
    "ask_permission": "_approvals",
    "asking_root": "_approvals",
    "question_path": "_approvals",
    "stricter": "_approvals",
    "ContextBudget": "_budget",
    "SUMMARY_INSTRUCTION": "_compaction",
    "CompactionInput": ".contracts",
    "CompactionPolicy": "_limits",
    "CompactionStrategy": ".contracts",
    "AgentPreset": "_compose",
    "Specialist": ".contracts",
    "build_preset": "_compose",
    "check_servable": "_compose",
    "resolve_agent_name": "_compose",
    "resolve_preset_model": "_compose",
    "Inbox": "_inbox",
    "PARALLEL_TOOLS_SECTION": "_instructions",
    "DynamicInstruction": ".contracts",
    "InstructionContext": ".contracts",
    "load_instructions": "_instructions",
    "LEASE_RENEWAL": "_keeper",
    "MAIL_POLL": "_keeper",
    "keep_sessions": "_keeper",
    "SessionLease": "_lease",
    "TurnLoop": "_loop",
    "AgentSpec": "_spec",
    "AgentLimits": "_limits",
    "PreStep": ".contracts",
    "StepContext": ".contracts",
    "AnswerStream": "_stream",
    "Tool": ".contracts",
    "ToolContext": ".contracts",
    "ToolError": ".contracts",
    "ToolFilter": ".contracts",
    "ToolOutput": ".contracts",
    "ToolRegistry": "_tools",
    "ToolSource": ".contracts",
    "TRACE_KEYS": "_tracing",
    "Tracer": ".contracts",
    "TurnStart": ".contracts",
    "carry_trace": "_tracing",
    "current_trace": "_tracing",
    "trace_from": "_tracing",
    "tracer_of": "_tracing",
    "tracing": "_tracing",
    "Turn": "_turn",
    "RESULTS_FOLDER": "_evict",
    "evict": "_evict",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
