"""Agents: the turn loop, its inbox, tools, prompt composition."""

from __future__ import annotations

from ._agent import Agent, AgentLimits, PreStep, StepContext, event_to_message, new_header
from ._approvals import ApprovalPolicy, PermissionHost, PermissionQuestion, ask_permission
from ._compose import (
    AgentPreset,
    build_preset,
    compose_agent,
    resolve_agent_name,
    resolve_preset_model,
)
from ._instructions import (
    PARALLEL_TOOLS_SECTION,
    DynamicInstruction,
    InstructionContext,
    load_instructions,
    render_instruction,
)
from ._tools import Tool, ToolContext, ToolError, ToolFilter, ToolRegistry

__all__ = (
    "PARALLEL_TOOLS_SECTION",
    "Agent",
    "AgentLimits",
    "AgentPreset",
    "ApprovalPolicy",
    "DynamicInstruction",
    "InstructionContext",
    "PermissionHost",
    "PermissionQuestion",
    "PreStep",
    "StepContext",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFilter",
    "ToolRegistry",
    "ask_permission",
    "build_preset",
    "compose_agent",
    "event_to_message",
    "load_instructions",
    "new_header",
    "render_instruction",
    "resolve_agent_name",
    "resolve_preset_model",
)
