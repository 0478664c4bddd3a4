"""The contracts: protocols and value types that cross a plugin boundary, and no behaviour.

The room directly above the ground, importing nothing else of tether when it runs: what a plugin
implements, hands over or is handed, so that the load-time checks, the hook specifications
(:mod:`tether.hookspecs`) and the rooms that use a contract import it without importing each
other. Each name is re-exported under the same name by the room that works with it:

* models (:mod:`tether.models`): :class:`Model` and its optional parts (probing, closable,
  session-bound), :class:`ModelProvider`, and the messages, tool calls, requests and responses
  a model exchanges (``_models``, ``_messages``);
* stores (:mod:`tether.store`): :class:`SessionStore`, :class:`StoreProvider`, the session
  header and the events of a session log, and a turn's :data:`StopReason` (``_store``,
  ``_events``, ``_turns``);
* what a plugin adds to an agent (:mod:`tether.agents`): :class:`Tool` (what it runs with and
  returns, the filter that restricts tools), :class:`ToolSource`, :class:`PreStep`,
  :class:`DynamicInstruction`, :class:`CompactionStrategy` with what each is shown, and
  :class:`Tracer` (``_tools``, ``_steps``, ``_tracing``), and what a plugin's
  ``tether_preset_tools`` is shown of an agent preset (:class:`PresetView`, its declared
  subagents: :class:`Specialist`; ``_presets``);
* skills (:mod:`tether.skills`): :class:`SkillProvider`, its optional parts, its factory and
  what a skill is at each stage (``_skills``);
* delegation (:mod:`tether.subagents`): :class:`SubagentProvider`, its start requests, runs and
  results, its capabilities and the offer check (``_subagents``);
* hosting (:mod:`tether.runtime`): :class:`SessionHost` (``_hosts``);
* the load-time negotiation (:mod:`tether.loading`, and ``tether``): :class:`Offer` and
  :class:`Requirement` (``_capabilities``).

The agent a tool, a step or a tracer is handed (``Agent``), the runtime a tool source lists
for, a lease's owner and a skill provider's control are classes with behaviour, named here only
for the type checker (under ``TYPE_CHECKING``).

The names below are imported on first use (a module ``__getattr__``): importing one module of
the contracts does not build the others (the message and event models are pydantic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._budgets import (
        LIMIT_KINDS,
        Budget,
        BudgetLedger,
        LedgerClaim,
        LedgerReserve,
        LimitKind,
        Price,
        Spend,
        format_amount,
        within,
    )
    from ._callers import (
        Admission,
        AdmissionKind,
        Caller,
        CallerGate,
        CallerRule,
        CallerVia,
    )
    from ._capabilities import (
        Offer,
        Requirement,
    )
    from ._events import (
        AssistantMessage,
        CompactionEvent,
        ContextMessage,
        DescriptorEvent,
        Event,
        GuardEvent,
        InboxAccepted,
        InboxDiscarded,
        InstructionEvent,
        MessageSource,
        Origin,
        RewindEvent,
        SessionHeader,
        StoredEvent,
        ToolResult,
        TurnEnded,
        TurnStarted,
        UserMessage,
    )
    from ._guardrails import (
        GUARD_KINDS,
        GuardAction,
        GuardKind,
        Guardrail,
        GuardSubject,
        GuardVerdict,
    )
    from ._hosts import (
        SessionHost,
    )
    from ._messages import (
        FinishReason,
        ImagePart,
        Message,
        ModelRequest,
        ModelResponse,
        Role,
        ToolCall,
        ToolSchema,
        Usage,
    )
    from ._models import (
        ClosableModel,
        Model,
        ModelProvider,
        ProbingModel,
        RemoteAgent,
        RemoteAgentModel,
        SessionBoundModel,
    )
    from ._presets import (
        PresetView,
        SourceLayer,
        Specialist,
        ToolLayer,
    )
    from ._skills import (
        SKILL_NAME_MAX,
        SKILL_NAME_PATTERN,
        BundledFiles,
        DirectoryResources,
        InvocationPolicy,
        OpaqueResources,
        ResourceBase,
        SkillCandidate,
        SkillDefinition,
        SkillFile,
        SkillLocation,
        SkillObservation,
        SkillProvider,
        SkillProviderBlocking,
        SkillProviderChanges,
        SkillProviderDiagnostics,
        SkillProviderFactory,
        SkillProviderFiles,
        SkillSummary,
        SkippedSkill,
        UrlResources,
        is_skill_name,
    )
    from ._steps import (
        CompactionInput,
        CompactionStrategy,
        DynamicInstruction,
        InstructionContext,
        PreStep,
        PreStepFunction,
        StepContext,
    )
    from ._store import (
        SessionLifecycle,
        SessionRemoval,
        SessionStore,
        StoreProvider,
    )
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
    from ._tools import (
        Tool,
        ToolContext,
        ToolError,
        ToolFilter,
        ToolFunction,
        ToolOutput,
        ToolSource,
    )
    from ._tracing import (
        Tracer,
        TurnStart,
    )
    from ._turns import (
        StopReason,
    )
    from ._workspaces import (
        CommandResult,
        Workspace,
        WorkspaceBackend,
        WorkspaceKind,
    )

__all__ = (
    "CAPABILITIES",
    "GUARD_KINDS",
    "LIMIT_KINDS",
    "SKILL_NAME_MAX",
    "SKILL_NAME_PATTERN",
    "Admission",
    "AdmissionKind",
    "AgentOptions",
    "AssistantMessage",
    "Budget",
    "BudgetLedger",
    "BundledFiles",
    "Caller",
    "CallerGate",
    "CallerRule",
    "CallerVia",
    "CancelSignal",
    "Capability",
    "ClosableModel",
    "CommandResult",
    "CompactionEvent",
    "CompactionInput",
    "CompactionStrategy",
    "ContextMessage",
    "ContinuablePlan",
    "ContinuableProvider",
    "DescriptorEvent",
    "DirectoryResources",
    "DynamicInstruction",
    "Event",
    "FinishReason",
    "GuardAction",
    "GuardEvent",
    "GuardKind",
    "GuardSubject",
    "GuardVerdict",
    "Guardrail",
    "ImagePart",
    "InboxAccepted",
    "InboxDiscarded",
    "InstructionContext",
    "InstructionEvent",
    "InvocationPolicy",
    "LedgerClaim",
    "LedgerReserve",
    "LimitKind",
    "Message",
    "MessageSource",
    "Model",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "Offer",
    "OpaqueResources",
    "Origin",
    "PreStep",
    "PreStepFunction",
    "PresetView",
    "Price",
    "ProbingModel",
    "RemoteAgent",
    "RemoteAgentModel",
    "Requirement",
    "ResourceBase",
    "RewindEvent",
    "Role",
    "SessionBoundModel",
    "SessionHeader",
    "SessionHost",
    "SessionLifecycle",
    "SessionRemoval",
    "SessionStore",
    "SettlingRun",
    "SkillCandidate",
    "SkillDefinition",
    "SkillFile",
    "SkillLocation",
    "SkillObservation",
    "SkillProvider",
    "SkillProviderBlocking",
    "SkillProviderChanges",
    "SkillProviderDiagnostics",
    "SkillProviderFactory",
    "SkillProviderFiles",
    "SkillSummary",
    "SkippedSkill",
    "SourceLayer",
    "Specialist",
    "Spend",
    "StepContext",
    "StopReason",
    "StoreProvider",
    "StoredEvent",
    "SubagentCapabilities",
    "SubagentEvent",
    "SubagentProvider",
    "SubagentResult",
    "SubagentRun",
    "SubagentStartRequest",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolFilter",
    "ToolFunction",
    "ToolLayer",
    "ToolOutput",
    "ToolResult",
    "ToolSchema",
    "ToolSource",
    "Tracer",
    "TurnEnded",
    "TurnStart",
    "TurnStarted",
    "UrlResources",
    "Usage",
    "UserMessage",
    "Workspace",
    "WorkspaceBackend",
    "WorkspaceKind",
    "check_provider_offer",
    "declared_capabilities",
    "format_amount",
    "is_skill_name",
    "within",
)

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        ("Admission", "AdmissionKind", "Caller", "CallerGate", "CallerRule", "CallerVia"),
        "_callers",
    ),
    **dict.fromkeys(("Offer", "Requirement"), "_capabilities"),
    **dict.fromkeys(
        ("GUARD_KINDS", "GuardAction", "GuardKind", "GuardSubject", "GuardVerdict", "Guardrail"),
        "_guardrails",
    ),
    **dict.fromkeys(
        (
            "AssistantMessage",
            "CompactionEvent",
            "ContextMessage",
            "DescriptorEvent",
            "Event",
            "InboxAccepted",
            "InboxDiscarded",
            "InstructionEvent",
            "MessageSource",
            "Origin",
            "GuardEvent",
            "RewindEvent",
            "SessionHeader",
            "StoredEvent",
            "ToolResult",
            "TurnEnded",
            "TurnStarted",
            "UserMessage",
        ),
        "_events",
    ),
    **dict.fromkeys(("SessionHost",), "_hosts"),
    **dict.fromkeys(
        (
            "FinishReason",
            "ImagePart",
            "Message",
            "ModelRequest",
            "ModelResponse",
            "Role",
            "ToolCall",
            "ToolSchema",
            "Usage",
        ),
        "_messages",
    ),
    **dict.fromkeys(
        (
            "ClosableModel",
            "Model",
            "ModelProvider",
            "ProbingModel",
            "RemoteAgent",
            "RemoteAgentModel",
            "SessionBoundModel",
        ),
        "_models",
    ),
    **dict.fromkeys(
        (
            "LIMIT_KINDS",
            "Budget",
            "BudgetLedger",
            "LedgerClaim",
            "LedgerReserve",
            "LimitKind",
            "Price",
            "Spend",
            "format_amount",
            "within",
        ),
        "_budgets",
    ),
    **dict.fromkeys(("PresetView", "SourceLayer", "Specialist", "ToolLayer"), "_presets"),
    **dict.fromkeys(
        (
            "SKILL_NAME_MAX",
            "SKILL_NAME_PATTERN",
            "BundledFiles",
            "DirectoryResources",
            "InvocationPolicy",
            "OpaqueResources",
            "ResourceBase",
            "SkillCandidate",
            "SkillDefinition",
            "SkillFile",
            "SkillLocation",
            "SkillObservation",
            "SkillProvider",
            "SkillProviderBlocking",
            "SkillProviderChanges",
            "SkillProviderDiagnostics",
            "SkillProviderFactory",
            "SkillProviderFiles",
            "SkillSummary",
            "SkippedSkill",
            "UrlResources",
            "is_skill_name",
        ),
        "_skills",
    ),
    **dict.fromkeys(
        (
            "CompactionInput",
            "CompactionStrategy",
            "DynamicInstruction",
            "InstructionContext",
            "PreStep",
            "PreStepFunction",
            "StepContext",
        ),
        "_steps",
    ),
    **dict.fromkeys(
        ("SessionLifecycle", "SessionRemoval", "SessionStore", "StoreProvider"), "_store"
    ),
    **dict.fromkeys(
        (
            "CAPABILITIES",
            "AgentOptions",
            "CancelSignal",
            "Capability",
            "ContinuablePlan",
            "ContinuableProvider",
            "SettlingRun",
            "SubagentCapabilities",
            "SubagentEvent",
            "SubagentProvider",
            "SubagentResult",
            "SubagentRun",
            "SubagentStartRequest",
            "check_provider_offer",
            "declared_capabilities",
        ),
        "_subagents",
    ),
    **dict.fromkeys(
        (
            "Tool",
            "ToolContext",
            "ToolError",
            "ToolFilter",
            "ToolFunction",
            "ToolOutput",
            "ToolSource",
        ),
        "_tools",
    ),
    **dict.fromkeys(("Tracer", "TurnStart"), "_tracing"),
    **dict.fromkeys(("StopReason",), "_turns"),
    **dict.fromkeys(
        ("CommandResult", "Workspace", "WorkspaceBackend", "WorkspaceKind"), "_workspaces"
    ),
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
