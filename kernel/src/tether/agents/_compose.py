"""Agent presets: an agent's scope's tools, model, instructions and hooks, from a kernel.

A preset is pure: it is worked out from the frozen kernel alone. A runtime caches it
(:meth:`tether.runtime.Runtime.preset`) and composes agents from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import agents as _package
from ..contracts import (
    Budget,
    Caller,
    CallerGate,
    CompactionStrategy,
    DynamicInstruction,
    Guardrail,
    Model,
    ModelProvider,
    PreStep,
    SourceLayer,
    Specialist,
    SubagentProvider,
    Tool,
    ToolFilter,
    ToolLayer,
    ToolSource,
    Tracer,
)
from ..errors import AgentError, ErrorCode, ModelError, ProfileError, SubagentError
from ..ground import format_loc
from ..loading import Kernel, LoadedPlugin, Scope
from ..models import resolve_model
from ._callers import ProfileGate
from ._guard_names import off_route, offered_guardrails, pick_guardrails
from ._instructions import PARALLEL_TOOLS_SECTION, load_instructions
from ._limits import AgentLimits, CompactionPolicy
from ._tools import ToolRegistry
from ._tracing import tracer_of

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..store import SessionHeader, SessionStore
    from ._agent import Agent
    from ._approvals import ApprovalPolicy

__all__ = (
    "AgentPreset",
    "Specialist",
    "build_preset",
    "check_servable",
    "resolve_agent_name",
    "resolve_preset_model",
)


@dataclass(frozen=True)
class AgentPreset:
    """Everything an agent is before it has a session: the parts of its model request."""

    name: str | None
    kernel: Kernel
    scope: Scope
    system: tuple[str, ...]
    tools: ToolRegistry
    instructions: tuple[DynamicInstruction, ...]
    pre_steps: tuple[PreStep, ...]
    model_providers: tuple[ModelProvider, ...]
    model_spec: str | None
    tool_layers: tuple[ToolLayer, ...] = ()
    """The plugins' tools per scope layer, nearest first (what ``tools`` merges)."""
    tool_sources: tuple[SourceLayer, ...] = ()
    """The plugins' tool sources per scope layer, nearest first: listed at compose
    (:meth:`tether.runtime.Runtime.tools`) and merged into the layer's tools."""
    specialists: tuple[Specialist, ...] = ()
    """The agent's declared subagents (``[agent.NAME] subagents``, or its folder's
    ``subagents/``), in declaration order."""
    limits: AgentLimits | None = None
    """The agent's own limits (``[agent.NAME] limits``), or ``None`` for the defaults."""
    approval: ApprovalPolicy | None = None
    """The agent's own approval policy (``[agent.NAME] approval``), or ``None``."""
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    """When and how the agent's history is compacted (``[agent.NAME] compaction``)."""
    compaction_strategy: CompactionStrategy | None = None
    """The plugin strategy ``compaction.strategy`` names (``None``: the agent's model)."""
    tracer: Tracer | None = None
    """What the global layer's plugins offer through ``tether_tracers``, as one (``None``:
    none)."""
    budget: Budget | None = None
    """The agent's own budget (``[agent.NAME] budget``): of its root sessions (within
    ``[tether] budget``) and, as a declared subagent, of its subtree (within what its parent
    has left)."""
    root_budget: Budget | None = None
    """What a root session of the agent holds: ``budget`` within ``[tether] budget``."""
    caller_gates: tuple[CallerGate, ...] = ()
    """Who may start the agent's sessions and send to them: the profile's gate
    (``[agent.NAME] callers``), then what plugins offer (``tether_caller_gates``), nearest
    layer first (docs/callers.md)."""
    guardrails: tuple[Guardrail, ...] = ()
    """The agent's own guardrails (``[agent.NAME] guardrails``): in every session of it, and
    passed down to every child below (docs/guardrails.md)."""
    root_guardrails: tuple[Guardrail, ...] = ()
    """What a root session of the agent is checked by: ``[tether] guardrails``, then its
    own."""
    guardrails_exempt: bool | frozenset[str] = False
    """As a child, the guardrails passed down that do not apply (``true``: none do)."""
    offered_guardrails: Mapping[str, Guardrail] = field(default_factory=dict[str, Guardrail])
    """Every guardrail the plugins visible in its scope offer, by name."""

    def child_guardrails(self, passed: Sequence[Guardrail]) -> tuple[Guardrail, ...]:
        """What a child session of this agent is checked by: what its parent passes down
        (``passed``: the parent's own), less what this agent is exempt from, then its own."""
        exempt = self.guardrails_exempt
        if exempt is True:
            passed = ()
        elif exempt:
            passed = tuple(g for g in passed if g.name not in exempt)
        merged = {g.name: g for g in (*passed, *self.guardrails)}
        return tuple(merged.values())

    @property
    def has_tool_sources(self) -> bool:
        """Whether some plugin in the scope offers tool sources (the tool list is made at
        compose, not here)."""
        return any(self.tool_sources)

    def agent(
        self,
        header: SessionHeader,
        store: SessionStore,
        model: Model,
        *,
        limits: AgentLimits | None = None,
        cwd: Path | None = None,
        model_spec: str | None = None,
        runtime: Runtime | None = None,
        new_session: bool = False,
        tools: ToolRegistry | None = None,
        scope: Scope | None = None,
        tool_policy: ToolFilter | None = None,
        approval: ApprovalPolicy | None = None,
        budget: Budget | None = None,
        caller: Caller | None = None,
        guardrails: Sequence[Guardrail] | None = None,
    ) -> Agent:
        """An agent of this preset on the session ``header``; ``model_spec`` is the spec of
        ``model``, recorded as the session's model when the agent takes the session (a change
        is logged), or ``None`` to leave the session's record as it is. ``runtime`` is where
        the agent lives (its services: skills, subagents, the permission host).
        ``new_session``: the store just created ``header`` (its lease held, its log empty), so
        entering the agent reads nothing back. ``tools``: the list the runtime composed from
        the preset's tools and tool sources (default: the preset's tools). A delegated child
        gives its own ``scope`` (default: the preset's), the ``tool_policy`` of its delegation
        and its ``approval`` (default: the preset's, else ``ask``). ``budget``: the budget its
        session holds (docs/budgets.md). ``caller``: who sends the messages sent through it
        without naming one (docs/callers.md). ``guardrails``: what checks its content
        (default: a root session's, :attr:`root_guardrails`; a child's:
        :meth:`child_guardrails`). The agent is built whole: nothing is set on it
        afterwards."""
        # Read from the package, which imports ``_agent`` on first use and keeps it: a
        # function-level import would resolve the module again on every agent made.
        return _package.Agent(
            header=header,
            store=store,
            model=model,
            system=self.system,
            tools=self.tools if tools is None else tools,
            instructions=self.instructions,
            pre_steps=self.pre_steps,
            limits=limits if limits is not None else self.limits,
            runtime=runtime,
            scope=self.scope if scope is None else scope,
            cwd=cwd,
            model_spec=model_spec,
            new_session=new_session,
            tracer=self.tracer,
            approval=approval or self.approval or "ask",
            tool_policy=tool_policy,
            compaction=self.compaction,
            compaction_strategy=self.compaction_strategy,
            budget=budget,
            caller=caller,
            guardrails=self.root_guardrails if guardrails is None else guardrails,
        )


def resolve_agent_name(kernel: Kernel, requested: str | None) -> str | None:
    """``requested``, else ``main``, else the only agent; ``None`` when none is declared."""
    if requested is not None:
        kernel.agent_scope(requested)  # raises UNKNOWN_AGENT with the declared names
        return requested
    agents = kernel.agents
    if not agents:
        return None
    if "main" in agents:
        return "main"
    if len(agents) == 1:
        return agents[0]
    raise ProfileError(
        ErrorCode.UNKNOWN_AGENT,
        f"the profile declares several agents ({', '.join(agents)}) and none is called main",
        file=kernel.profile.path,
        remedy="pass --agent NAME",
    )


def _collect(plugins: Iterable[LoadedPlugin], hook: str, kind: type[Any]) -> list[tuple[str, Any]]:
    return [(plugin.name, item) for plugin in plugins for item in plugin.collect(hook, kind)]


def build_preset(kernel: Kernel, agent: str | None) -> AgentPreset:
    """Collect an agent's parts from the plugins visible in its scope (``None``: the global
    scope). Pure; :meth:`tether.runtime.Runtime.preset` builds each preset once."""
    scope = kernel.global_scope if agent is None else kernel.agent_scope(agent)
    layers: list[ToolLayer] = []
    sources: list[SourceLayer] = []
    for _, plugins in scope.layers():
        layers.append(tuple(_collect(plugins, "tether_tools", Tool)))
        sources.append(tuple(_collect(plugins, "tether_tool_sources", ToolSource)))
    tools = ToolRegistry.from_layers(layers)
    visible = scope.visible_plugins()
    providers = [p for _, p in _collect(visible, "tether_model_providers", ModelProvider)]
    instructions = [i for _, i in _collect(visible, "tether_instructions", DynamicInstruction)]
    slugs = [i.slug for i in instructions]
    duplicated = sorted({slug for slug in slugs if slugs.count(slug) > 1})
    if duplicated:
        raise AgentError(
            ErrorCode.INSTRUCTIONS_INVALID,
            f"dynamic instruction slug(s) offered twice: {', '.join(duplicated)}",
            remedy="each slug names one slot; rename one of them",
        )
    # The same pre-step object offered twice (the kernel's [Tasks] note) runs once.
    pre_steps = list({id(p): p for _, p in _collect(visible, "tether_pre_step", PreStep)}.values())
    table = kernel.profile.agent.get(agent) if agent is not None else None
    system: list[str] = []
    if table is not None and table.instructions is not None:
        text = load_instructions(table.instructions)
        if text:
            system.append(text)
    specialists = _specialists(kernel, agent, table)
    if len(tools) or any(sources) or any(s.visibility is not False for s in specialists):
        system.append(PARALLEL_TOOLS_SECTION)
    limits = None
    if table is not None and (table.limits is not None or table.context_window is not None):
        given: dict[str, Any] = {}
        if table.limits is not None:
            given = {k: v for k, v in table.limits.model_dump().items() if v is not None}
        limits = AgentLimits(**given, context_window=table.context_window)
    compaction = _compaction(table)
    strategy = _strategy(visible, agent, compaction)
    budget = Budget.from_data(table.budget) if table is not None and table.budget else None
    tether_budget = kernel.profile.tether.budget
    root_budget = Budget.from_data(tether_budget).within(budget) if tether_budget else budget
    # Tracing is the process's, not an agent's: only the global layer's plugins offer tracers.
    tracers = [t for _, t in _collect(kernel.global_scope.plugins, "tether_tracers", Tracer)]
    gates: list[CallerGate] = []
    if table is not None and table.callers is not None:
        gates.append(ProfileGate(table.callers, str(agent)))
    gates += [g for _, g in _collect(visible, "tether_caller_gates", CallerGate)]
    offered = offered_guardrails(_collect(visible, "tether_guardrails", Guardrail))
    own = pick_guardrails(
        offered, table.guardrails if table is not None else (), f"[agent.{agent}] guardrails"
    )
    every = pick_guardrails(offered, kernel.profile.tether.guardrails, "[tether] guardrails")
    exempt = table.guardrails_exempt if table is not None else False
    root_guardrails = tuple({g.name: g for g in (*every, *own)}.values())
    _check_routes(visible, agent, root_guardrails)
    return AgentPreset(
        name=agent,
        kernel=kernel,
        scope=scope,
        system=tuple(system),
        tools=tools,
        instructions=tuple(instructions),
        pre_steps=tuple(pre_steps),
        model_providers=tuple(providers),
        model_spec=table.model if table is not None else None,
        tool_layers=tuple(layers),
        tool_sources=tuple(sources),
        specialists=specialists,
        limits=limits,
        approval=table.approval if table is not None else None,
        compaction=compaction,
        compaction_strategy=strategy,
        tracer=tracer_of(tracers),
        budget=budget,
        root_budget=root_budget,
        caller_gates=tuple(gates),
        guardrails=own,
        root_guardrails=root_guardrails,
        guardrails_exempt=exempt if isinstance(exempt, bool) else frozenset(exempt),
        offered_guardrails=offered,
    )


def _check_routes(
    visible: Sequence[LoadedPlugin], agent: str | None, rails: Sequence[Guardrail]
) -> None:
    """The check at load (docs/guardrails.md, "Down the tree"): a guardrail that checks
    content inside a child (any kind but ``remote_result``) cannot reach inside a remote agent
    (a subagent provider whose ``route`` is ``acp`` or ``a2a``) unless the remote agent's
    entry says ``guardrails = "forward"`` (a tether: the names are sent and applied there) or
    ``"exempt"`` (the profile lets it run unchecked inside). Neither: ``GUARDRAIL_INVALID``."""
    if not any(kind != "remote_result" for rail in rails for kind in rail.kinds):
        return  # nothing is collected: a profile without such guardrails asks no provider
    for plugin, provider in _collect(visible, "tether_subagent_providers", SubagentProvider):
        problem = off_route(provider, rails, agent=agent, plugin=plugin)
        if problem is not None:
            raise problem


def _compaction(table: Any) -> CompactionPolicy:
    """The agent's compaction policy from its table (a mode, or a table of settings)."""
    given = table.compaction if table is not None else None
    if given is None:
        return CompactionPolicy()
    if isinstance(given, str):
        return CompactionPolicy(mode=given)  # type: ignore[arg-type]
    return CompactionPolicy(
        mode=given.mode, threshold=given.threshold, keep=given.keep, strategy=given.strategy
    )


def _strategy(
    visible: Sequence[LoadedPlugin], agent: str | None, policy: CompactionPolicy
) -> CompactionStrategy | None:
    """The strategy ``policy`` names, from the plugins visible in the agent's scope."""
    offered = _collect(visible, "tether_compaction_strategies", CompactionStrategy)
    for plugin, strategy in offered:
        if strategy.name == "summary":
            raise AgentError(
                ErrorCode.COMPACTION_FAILED,
                f'plugin "{plugin}" offers a compaction strategy named "summary", the name of '
                "the built-in one",
                plugin=plugin,
                remedy="give the strategy another name",
            )
    if policy.strategy == "summary":
        return None
    for _, strategy in offered:
        if strategy.name == policy.strategy:
            return strategy
    names = sorted({strategy.name for _, strategy in offered})
    raise AgentError(
        ErrorCode.COMPACTION_FAILED,
        f'agent "{agent}" compacts with strategy "{policy.strategy}", which no plugin in its '
        "scope offers" + (f" (offered: {', '.join(names)})" if names else ""),
        key=format_loc(("agent", str(agent)), ("compaction", "strategy")),
        remedy='load the plugin that offers it, or use strategy = "summary"',
    )


def _specialists(kernel: Kernel, agent: str | None, table: Any) -> tuple[Specialist, ...]:
    """The declared subagents of ``agent``, from its table (checked at load: they exist and
    have descriptions)."""
    if table is None or not table.subagents:
        return ()
    found: list[Specialist] = []
    for name in table.subagents:
        child = kernel.profile.agent.get(name)
        if child is None:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                f'agent "{agent}" declares subagent "{name}", which the profile does not declare',
                key=format_loc(("agent", str(agent)), ("subagents",)),
                remedy="declare the agent, or remove it from subagents",
            )
        if not child.description:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                f'subagent "{name}" of agent "{agent}" has no description; its parent\'s model '
                "reads it to decide when to delegate",
                key=format_loc(("agent", name), ("description",)),
                remedy='add description = "..." to the subagent',
            )
        found.append(
            Specialist(
                tool_name=child.tool_name or name,
                agent=name,
                description=child.description,
                visibility=child.tool,
                when=child.when,
            )
        )
    return tuple(found)


def resolve_preset_model(
    preset: AgentPreset, spec: str | None, *, base: Path | None = None
) -> Model:
    """The model for ``spec`` (or the preset's own), through the scope's model providers."""
    spec = spec or preset.model_spec
    if spec is None:
        where = format_loc(("agent", preset.name), ("model",)) if preset.name else "the profile"
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"no model for agent {preset.name or '(global)'}",
            key=where,
            remedy='set model = "provider:name" in the agent table or pass --model SPEC',
        )
    return resolve_model(spec, preset.model_providers, base=base)


def check_servable(kernel: Kernel, agent: str | None, model_spec: str | None) -> None:
    """Fail at a server's start (``tether acp``, ``tether a2a serve``) on an unknown agent, a
    missing model or an unknown model provider; nothing is built (a model's credentials are
    only needed by the first session)."""
    from ..models import find_model_provider

    name = resolve_agent_name(kernel, agent)
    preset = build_preset(kernel, name)
    spec = model_spec or preset.model_spec
    if spec is None:
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"no model for agent {name or '(global)'}",
            key=f"[agent.{name}] model" if name else None,
            file=kernel.profile.path,
            remedy='set model = "provider:name" in the agent table or pass --model SPEC',
        )
    find_model_provider(spec, preset.model_providers)
