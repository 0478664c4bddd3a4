"""What an agent is made of: its parts, fixed when it is made (:class:`AgentSpec`).

An :class:`~tether.agents.Agent` is built whole from its keyword arguments, which it keeps as
one frozen spec (``agent.spec``); nothing is set on it afterwards. The one change a spec sees
is a narrowing: a delegated session's log pins what its delegation allowed (its tools, their
call policy, its approvals), and :meth:`AgentSpec.pinned` narrows to them when the agent is
restored, never widening what it was made with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..contracts import Budget, Guardrail
from ..models import Model
from ..store import SessionStore
from ._approvals import ApprovalPolicy, stricter
from ._compaction import CompactionStrategy
from ._guard_names import NO_GUARDS, Guards, named_guardrails
from ._instructions import DynamicInstruction
from ._limits import AgentLimits, CompactionPolicy
from ._step import PreStep
from ._tools import ToolFilter, ToolRegistry
from ._tracing import Tracer

if TYPE_CHECKING:
    from ..loading import Scope
    from ..runtime import Runtime
    from ._delegation import DelegationPins

__all__ = ("AgentSpec",)

_DEFAULT_LIMITS = AgentLimits()
_DEFAULT_COMPACTION = CompactionPolicy()


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """The parts of an agent (``agent.spec``): the arguments it was made with."""

    store: SessionStore
    """Where its session's log lives."""
    model: Model
    """What answers its requests."""
    system: tuple[str, ...] = ()
    """The base prompt: fixed for the session, so a provider's prompt cache serves it."""
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    """The tools its model sees (fixed for the session)."""
    instructions: tuple[DynamicInstruction, ...] = ()
    """Dynamic instructions: slots whose changed values are appended as a turn opens."""
    pre_steps: tuple[PreStep, ...] = ()
    """Hooks that append messages before each model request."""
    limits: AgentLimits = _DEFAULT_LIMITS
    """Steps, tokens, retries and background tasks per turn."""
    runtime: Runtime | None = None
    """The runtime it lives in (its services: ``runtime.skills``, ``runtime.subagents``,
    ``runtime.permission_host``); ``None`` for a bare agent."""
    scope: Scope | None = None
    """Its scope: registries resolve through its chain."""
    cwd: Path | None = None
    """The working directory its tools act in; ``None``: the process's when it was made."""
    model_spec: str | None = None
    """The spec of ``model``, recorded as the session's model when the agent takes the session
    (a change is logged); ``None`` leaves the record as it is."""
    tracer: Tracer | None = None
    """Sees every turn, model request and tool call (``tether_tracers``); ``None``: nobody."""
    approval: ApprovalPolicy = "ask"
    """Whether tools marked ``needs_approval`` run: ``ask`` the runtime's permission host
    (refused without one), ``allow``, or ``deny`` (a delegated child's, pinned)."""
    tool_policy: ToolFilter | None = None
    """Tools the model sees but may not call (a fork keeps its parent's tool list for
    prompt-cache reuse and enforces its delegation's filter here)."""
    compaction: CompactionPolicy = _DEFAULT_COMPACTION
    """When and how the history is compacted (``[agent.NAME] compaction``)."""
    compaction_strategy: CompactionStrategy | None = None
    """The plugin strategy that writes summaries; ``None``: the agent's model does."""
    budget: Budget | None = None
    """The budget its session holds for its whole subtree (docs/budgets.md): set when the
    session is entered unless its log holds the same one already; ``None``: the log's, if any
    (a delegated child's is written when it is created)."""
    guardrails: tuple[Guardrail, ...] = ()
    """What checks its session's content (docs/guardrails.md): its own, ``[tether]
    guardrails`` for a root, and what its parent passed down (a delegated child's log pins
    them: a restore adds any that are missing, never drops one)."""
    guards: Guards = field(default=NO_GUARDS, init=False, repr=False, compare=False)
    """``guardrails`` by the kind of content each checks (:mod:`._guards`)."""

    def __post_init__(self) -> None:
        if self.guardrails:
            object.__setattr__(self, "guards", Guards(self.guardrails))

    def pinned(self, pins: DelegationPins) -> AgentSpec:
        """This spec narrowed to what a delegation allowed: never a tool it was not made with,
        never a looser policy or approval than either side says, never fewer guardrails than
        checked the child when it was delegated. Pinning twice changes nothing
        (an unchanged tool list keeps its registry, so its schemas stay byte-identical)."""
        approval = stricter(self.approval, pins.approval)
        policy = self.tool_policy if pins.policy is None else pins.policy.narrow(self.tool_policy)
        tools = self.tools
        if pins.tools is not None and tools.names() != list(pins.tools):
            tools = ToolRegistry(
                tool for tool in (self.tools.get(name) for name in pins.tools) if tool is not None
            )
        rails = self.guardrails
        have = {g.name for g in rails}
        missing = [name for name in pins.guardrails if name not in have]
        if missing:  # passed down when it was delegated: still checks it, wherever restored
            rails = (*rails, *named_guardrails(self.runtime, missing))
        unchanged = policy is self.tool_policy and tools is self.tools and rails is self.guardrails
        if approval == self.approval and unchanged:
            return self
        return replace(self, approval=approval, tool_policy=policy, tools=tools, guardrails=rails)
