"""Agents: the turn loop, its inbox, tools, prompt composition.

Agents are composed by a runtime (:func:`tether.runtime.compose_agent`,
:meth:`tether.runtime.Runtime.compose`), which they live in. An :class:`Agent` is built whole
from its parts (:class:`AgentSpec`) and its jobs are owned by collaborators: its
:class:`SessionLease` (lease, log, mail), :class:`Inbox`, :class:`TurnLoop` (each
:class:`Turn`) and :class:`ContextBudget` (history, window, compaction).
"""

from __future__ import annotations

from ..store.replay import event_to_message, render_instruction
from ._agent import Agent, new_header
from ._approvals import (
    ApprovalPolicy,
    PermissionDesk,
    PermissionHost,
    PermissionQuestion,
    ask_permission,
    asking_root,
    question_path,
    stricter,
)
from ._budget import ContextBudget
from ._compaction import (
    SUMMARY_INSTRUCTION,
    CompactionInput,
    CompactionPolicy,
    CompactionStrategy,
)
from ._compose import (
    AgentPreset,
    Specialist,
    build_preset,
    check_servable,
    resolve_agent_name,
    resolve_preset_model,
)
from ._inbox import Inbox
from ._instructions import (
    PARALLEL_TOOLS_SECTION,
    DynamicInstruction,
    InstructionContext,
    load_instructions,
)
from ._keeper import LEASE_RENEWAL, MAIL_POLL, keep_sessions
from ._lease import SessionLease
from ._loop import TurnLoop
from ._spec import AgentSpec
from ._step import AgentLimits, PreStep, StepContext
from ._stream import AnswerStream
from ._tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolFilter,
    ToolOutput,
    ToolRegistry,
    ToolSource,
)
from ._tracing import (
    TRACE_KEYS,
    Tracer,
    TurnStart,
    carry_trace,
    current_trace,
    trace_from,
    tracer_of,
    tracing,
)
from ._turn import Turn

__all__ = (
    "LEASE_RENEWAL",
    "MAIL_POLL",
    "PARALLEL_TOOLS_SECTION",
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
    "ask_permission",
    "asking_root",
    "build_preset",
    "carry_trace",
    "check_servable",
    "current_trace",
    "event_to_message",
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
