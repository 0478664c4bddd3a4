"""The local-child kit: what a local child agent is made of, and the two ways to make one.

A new child is composed in its setup window (:func:`compose_local_child`); a stored continuable
child is restored cold from its own log (:func:`restore_local_child`). Both describe the child
as a :class:`ChildSpec` and make its agent with :meth:`ChildSpec.agent`, and the continuable
descriptor a cold restore reads is written and read by that same class, so a child restored
cold is made exactly as it was composed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ..agents import (
    AgentLimits,
    AgentPreset,
    ApprovalPolicy,
    ToolFilter,
    ToolRegistry,
    new_header,
    resolve_preset_model,
    stricter,
)
from ..agents._delegation import CONTINUABLE_DESCRIPTOR, DELEGATION_DESCRIPTOR
from ..agents._spending import child_budget
from ..budgets._accounts import (
    NOTHING,
    ONE_CHILD,
    Overrun,
    budget_descriptor,
    charge,
    settle,
    settle_now,
    start_child_now,
    unstart_child,
)
from ..contracts import Guardrail, Spend, SubagentStartRequest
from ..errors import ErrorCode, StoreError, SubagentError
from ..store import (
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    SessionHeader,
    SessionStore,
    UserMessage,
)
from ..workspaces._place import child_plan
from ._depth import child_depth
from .notices import APPROVAL_NOTES, CONTINUABLE_NOTE, DELEGATION_NOTE

if TYPE_CHECKING:
    from ..agents import Agent
    from ..loading import Scope
    from ..models import Model
    from ..runtime import Runtime

__all__ = (
    "CONTINUABLE_DESCRIPTOR",
    "SETUP_WINDOW",
    "ChildSpec",
    "compose_local_child",
    "create_child_session",
    "find_continuable_descriptor",
    "restore_local_child",
)

#: Added to a continuable child's note when it has the ``report`` tool.
REPORT_HINT = " Use the report tool to tell it something before you finish."
#: How many events after a child's seed the continuable descriptor is looked for in (its setup
#: window: the delegation descriptor, the continuable descriptor, the note, the first prompt).
SETUP_WINDOW = 16


@dataclass(frozen=True)
class ChildSpec:
    """How a local child agent is made: the parts its setup window decided.

    A new child's spec comes from its delegation (:meth:`of`, then the delegation's tools); a
    stored continuable child's from its continuable descriptor (:meth:`restored`). Either way
    :meth:`agent` makes the agent, so both ways give the same child.
    """

    provider: str
    """The subagent provider that started the child."""
    runtime: Runtime
    """The runtime the child lives in (its host's)."""
    preset: AgentPreset
    """The agent preset the child is (its parent's)."""
    store: SessionStore
    """The store of the child's session (its host's)."""
    cwd: Path
    """The working directory of its tools (its host's)."""
    scope: Scope
    """The scope the child's own scope is made in (its host's)."""
    model: Model
    """The model the child talks to."""
    model_route: str | None
    """The model spec a cold restore resolves again; ``None``: the host's model."""
    limits: AgentLimits
    """The child's limits: its host's, with the delegation's output-token budget."""
    tools: ToolRegistry
    """The child's tools. A restored child starts from its preset's, which its log's
    ``delegation`` descriptor narrows to what was delegated (``Agent.restore`` applies it)."""
    policy: ToolFilter | None = None
    """The call-time policy over those tools (a fork keeps its parent's tool list)."""
    approval: ApprovalPolicy = "deny"
    """Whether tools that need approval run: the stricter of its host's policy and, for a
    declared subagent, its own preset's (:meth:`of`). ``ask`` asks the runtime's permission
    host, the one its root asks: the question names the child's path."""
    guardrails: tuple[Guardrail, ...] = ()
    """What checks the child's content: what its host passes down (less what its preset is
    exempt from), then its preset's own (docs/guardrails.md); its delegation descriptor
    records their names, which every restore adds back."""

    @classmethod
    def of(
        cls,
        host: Agent,
        agent: str | None,
        *,
        provider: str,
        model_route: str | None = None,
        model: Model | None = None,
        max_output_tokens: int | None = None,
        tools: ToolRegistry | None = None,
        policy: ToolFilter | None = None,
        own: bool = False,
    ) -> ChildSpec:
        """A child of the preset ``agent`` run under ``host`` (the agent it is composed or
        restored under): ``model`` is the provider's own (a remote agent), else the model of
        ``model_route``, else the host's; ``tools`` default to the preset's. ``own``: the
        child is a declared subagent, with its preset's own limits and scope (not the
        host's)."""
        runtime = host.runtime
        if runtime is None:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                f'agent "{host.session_id}" was composed without a runtime, so it cannot delegate',
                remedy="compose agents with tether.runtime.compose_agent",
            )
        preset = runtime.preset(agent)
        if model is None:
            model = host.model
            if model_route is not None:
                base = _model_base(preset) if own else None
                model = resolve_preset_model(preset, model_route, base=base)
        limits = host.spec.limits
        if own:
            limits = preset.limits or AgentLimits()
        if max_output_tokens is not None:
            limits = dataclasses.replace(limits, max_output_tokens=max_output_tokens)
        return cls(
            provider=provider,
            runtime=runtime,
            preset=preset,
            approval=stricter(host.spec.approval, preset.approval if own else None),
            store=host.store,
            cwd=host.cwd,
            scope=preset.scope if own else host.spec.scope or runtime.kernel.global_scope,
            model=model,
            model_route=model_route,
            limits=limits,
            tools=tools if tools is not None else preset.tools,
            policy=policy,
            guardrails=preset.child_guardrails(host.spec.guardrails),
        )

    @classmethod
    def restored(
        cls,
        host: Agent,
        header: SessionHeader,
        descriptor: DescriptorEvent,
        *,
        tools: ToolRegistry | None = None,
    ) -> ChildSpec:
        """The spec of the stored continuable child ``header`` restored under ``host``, as
        its continuable descriptor (:meth:`continuable_descriptor`) recorded it; ``tools``:
        its preset's tools as the runtime composes them now (default: the preset's own)."""
        data = descriptor.data
        route = data.get("model")
        budget = data.get("max_output_tokens")
        if route is not None and not isinstance(route, str):
            raise _corrupt(header, "model", route, "a model spec")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0
        ):
            raise _corrupt(header, "max_output_tokens", budget, "a positive integer")
        return cls.of(
            host,
            header.agent,
            provider=str(data.get("provider", "")),
            model_route=route,
            max_output_tokens=budget,
            tools=tools,
            own=data.get("specialist") is True,
        )

    def agent(self, header: SessionHeader) -> Agent:
        """The child's agent on the session ``header``: not restored, not entered."""
        return self.preset.agent(
            header,
            self.store,
            self.model,
            limits=self.limits,
            cwd=self.cwd,
            runtime=self.runtime,
            tools=self.tools,
            scope=self.scope.child(header.id),
            tool_policy=self.policy,
            approval=self.approval,
            guardrails=self.guardrails,
        )

    def delegation_descriptor(self, request: SubagentStartRequest) -> DescriptorEvent:
        """What the delegation allowed the child, recorded in its own log: what every route
        that continues the child restores it with (``tether.agents`` applies it on restore).
        ``parent_overrides`` snapshots the parent's own narrowing of its preset."""
        parent = request.parent
        overrides: dict[str, Any] = {}
        if parent.tools.names() != self.preset.tools.names():
            overrides["tools"] = parent.tools.names()
        if parent.spec.tool_policy is not None:
            overrides["tool_policy"] = parent.spec.tool_policy.as_data()
        return DescriptorEvent(
            kind=DELEGATION_DESCRIPTOR,
            version=1,
            data={
                "provider": self.provider,
                "parent_session": parent.session_id,
                "approval": self.approval,
                "parent_overrides": overrides,
                "max_depth": request.max_depth,
                "tool_filter": _filter_data(request),
                "persona": request.persona,
                "output_schema": request.output_schema,
                "tools": self.tools.names(),
                "policy": self.policy.as_data() if self.policy is not None else None,
                "guardrails": [g.name for g in self.guardrails],
            },
        )

    def continuable_descriptor(self, request: SubagentStartRequest) -> DescriptorEvent:
        """What a cold restore rebuilds a continuable child from (:meth:`restored`)."""
        return DescriptorEvent(
            kind=CONTINUABLE_DESCRIPTOR,
            version=1,
            data={
                "mode": "continuable",
                "provider": self.provider,
                "label": request.label,
                "model": self.model_route,
                "max_output_tokens": self.limits.max_output_tokens,
                "persona": request.persona,
                "tool_filter": _filter_data(request),
                "tools": self.tools.names() if self.tools is not self.preset.tools else None,
                "policy": self.policy.as_data() if self.policy is not None else None,
                "max_depth": request.max_depth,
                **({"tool": request.tool} if request.tool is not None else {}),
                **({"specialist": True} if request.agent is not None else {}),
            },
        )


def shares_workspace(request: SubagentStartRequest) -> bool:
    """Whether the child works in its parent's workspace (docs/workspaces.md): as its request
    says (a provider fills in its own default: a fork shares,
    :meth:`LocalChildProvider.fill_workspace_default`), else as its declared agent's
    ``[agent.NAME] workspace = { share = ... }`` says; by default it gets its own."""
    if request.share_workspace is not None:
        return request.share_workspace
    runtime = request.parent.runtime
    if runtime is None or request.agent is None:
        return False
    table = runtime.kernel.profile.agent.get(request.agent)
    return table is not None and table.workspace is not None and table.workspace.share


def _model_spec(agent: Agent) -> str | None:
    """The model spec ``agent`` runs: the one it was made with, else its session's record."""
    return agent.spec.model_spec or agent.header.model


def _model_base(preset: AgentPreset) -> Path | None:
    """The folder a preset's own relative model spec resolves against (the file that wrote
    it), as :meth:`tether.runtime.Runtime.compose` resolves it."""
    if preset.name is None:
        return None
    file = preset.kernel.profile.file_of("agent", preset.name, "model")
    return file.parent if file is not None else preset.kernel.profile.folder


async def compose_local_child(
    request: SubagentStartRequest,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
    continuable: bool = False,
    model: Model | None = None,
    model_route: str | None = None,
    first_prompt: InboxAccepted | None = None,
) -> Agent:
    """The setup window: create the child's session and log, and return its agent, restored
    and not yet entered. With ``continuable``, a ``subagent`` descriptor (what a cold restore
    rebuilds the child from) follows the delegation descriptor."""
    spec, header, setup = await create_child_session(
        request,
        provider=provider,
        seed=seed,
        keep_tool_list=keep_tool_list,
        continuable=continuable,
        model=model,
        model_route=model_route,
        first_prompt=first_prompt,
    )
    try:
        child = spec.agent(header)
        await child.restore(log=setup)  # just written: no need to read it back
    except BaseException:
        with anyio.CancelScope(shield=True):
            await request.parent.store.delete(header.id)  # nobody was told of it: leave nothing
        raise
    return child


async def create_child_session(
    request: SubagentStartRequest,
    *,
    provider: str,
    seed: Sequence[Event] = (),
    keep_tool_list: bool = False,
    continuable: bool = False,
    model: Model | None = None,
    model_route: str | None = None,
    first_prompt: InboxAccepted | None = None,
) -> tuple[ChildSpec, SessionHeader, list[Event]]:
    """The setup window of :func:`compose_local_child`, stored and not restored: the child's
    spec, its header and its setup events. Its session's lease is this store's (a child
    another process drives is released to it, :mod:`tether.subagents._hosted`)."""
    parent = request.parent
    depth = child_depth(parent, request.max_depth)
    options = request.agent_options
    wanted = request.budget
    if model_route is None and options is not None:
        model_route = options.model
    if request.agent is not None:
        # A declared subagent: its own preset, tools, model and limits; nothing of the parent's.
        runtime = parent.runtime
        preset = runtime.preset(request.agent) if runtime is not None else None
        if preset is not None and preset.budget is not None:
            wanted = preset.budget if wanted is None else wanted.within(preset.budget)
        spec = ChildSpec.of(
            parent,
            request.agent,
            provider=provider,
            model_route=model_route or (preset.model_spec if preset is not None else None),
            model=model,
            max_output_tokens=options.max_output_tokens if options else None,
            tools=await runtime.tools(preset, caller=parent.caller)
            if runtime is not None and preset
            else None,
            own=True,
        )
    else:
        # The child is the parent agent preset in a child scope, with the parent's own tools
        # and call policy (a delegated parent's narrowing carries down), never the preset's.
        spec = ChildSpec.of(
            parent,
            parent.name,
            provider=provider,
            model_route=model_route,
            model=model,
            max_output_tokens=options.max_output_tokens if options else None,
            tools=parent.tools,
            policy=parent.spec.tool_policy,
        )
    spec = _delegated_tools(spec, request, keep_tool_list=keep_tool_list, continuable=continuable)
    remote = model is not None
    seed = [e for e in seed if not isinstance(e, InboxAccepted | InboxDiscarded)]
    header = new_header(
        agent=spec.preset.name,
        label=request.label,
        parent_session=parent.session_id,
        origin="subagent",
        delegation_depth=depth,
        seed_length=len(seed),
        model=None if remote else (spec.model_route or _model_spec(parent)),
        detached=request.detached,
        caller=parent.caller,  # the child works for whom its parent works for now
    )
    setup: list[Event] = [*seed, spec.delegation_descriptor(request)]
    if continuable:
        setup.append(spec.continuable_descriptor(request))
    setup.append(
        ContextMessage(
            role="user",
            content=_note(request, spec, continuable=continuable, remote=remote),
            origin="delegation",
        )
    )
    # Where it works: its parent's workspace or one of its own, decided once (docs/workspaces.md).
    share = shares_workspace(request)
    plan = child_plan(parent.workspace, header.id, share=share, parent_id=parent.session_id)
    setup.append(plan.descriptor())
    spending = parent.spending
    chain = spending.chain if spending is not None else ()
    own = child_budget(wanted, chain)
    if own is not None:
        setup.append(budget_descriptor(own, time.time(), Spend()))
    if first_prompt is not None:
        setup.append(first_prompt)  # accepted with the session: one durable step
    if not chain:
        # The session and its setup window are created together: never half a child.
        await parent.store.create(header, setup)
        return spec, header, setup
    # Every budget above the child counts it first (children in all, and working at once),
    # before the store write, which other starts may pass meanwhile; it works until it
    # leaves (its agent closes here, or a hosted run ends).
    assert spending is not None
    counted = start_child_now(chain)
    if isinstance(counted, Overrun):
        raise counted.error()
    if counted:
        spending.accounts.child_counted(header.id, chain)
        try:
            await parent.store.create(header, setup)
        except BaseException:
            spending.accounts.child_left(header.id, counted=False)
            unstart_child(chain)
            raise
        return spec, header, setup
    done = await charge(chain, ONE_CHILD)
    if isinstance(done, Overrun):
        raise done.error()
    spending.accounts.child_counted(header.id, chain)
    try:
        await parent.store.create(header, setup)
    except BaseException:
        spending.accounts.child_left(header.id)
        with anyio.CancelScope(shield=True):
            await settle(done, NOTHING)
        raise
    if not settle_now(done, ONE_CHILD):
        await settle(done, ONE_CHILD)
    return spec, header, setup


async def restore_local_child(
    parent: Agent, header: SessionHeader, descriptor: DescriptorEvent
) -> Agent:
    """A continuable child rebuilt from its own log (a cold restore) under ``parent`` (an
    open agent on its parent chain), restored and not yet entered. The provider is not called:
    the descriptor says everything the setup window decided (its model and budget here; its
    tools, their policy and its approvals are pinned by its ``delegation`` descriptor, which
    ``Agent.restore`` applies), and the log holds the rest."""
    runtime = parent.runtime
    # Its preset's tools as composed now (tool sources listed again), which its log's
    # delegation descriptor then narrows to what was delegated.
    tools = (
        await runtime.tools(runtime.preset(header.agent), caller=header.caller)
        if runtime is not None
        else None
    )
    child = ChildSpec.restored(parent, header, descriptor, tools=tools).agent(header)
    await child.restore()
    return child


async def find_continuable_descriptor(
    store: SessionStore, header: SessionHeader
) -> DescriptorEvent | None:
    """The continuable descriptor of the session ``header``: the first one after its seed,
    in its setup window (``None``: not a continuable child)."""
    window = await store.events(header.id, after=header.seed_length, limit=SETUP_WINDOW)
    for stored in window:
        event = stored.event
        if isinstance(event, DescriptorEvent) and event.kind == CONTINUABLE_DESCRIPTOR:
            if event.version == 1 and event.data.get("mode") == "continuable":
                return event
            return None
        if isinstance(event, UserMessage | InboxAccepted):
            return None  # the setup window is over: a descriptor after this is not one
    return None


def _delegated_tools(
    spec: ChildSpec, request: SubagentStartRequest, *, keep_tool_list: bool, continuable: bool
) -> ChildSpec:
    """``spec`` with the delegation's tool filter applied to its tools: a scoped
    ``restrict()`` (a new registry for this child; the parent's stays as it is), or, with
    ``keep_tool_list``, a call-time policy over an unchanged tool list. A continuable child
    keeps the parent's tools a filter does not remove (``report``)."""
    tools, policy = spec.tools, spec.policy
    if request.tool_filter is not None:
        # A name no plugin offers is a misspelling; a name an ancestor's delegation already
        # took away (or this agent never had) is narrowed again, which changes nothing.
        known = spec.runtime.tool_catalog.known_names()
        if not keep_tool_list:
            tools = tools.restrict(request.tool_filter, known=known)
        else:
            request.tool_filter.check_names([*known, *tools.names()], available=tools.names())
            policy = request.tool_filter.narrow(policy)
    if continuable:
        parent_tools = request.parent.tools
        kept = [t for t in parent_tools if t.keep_on_restrict and tools.get(t.name) is None]
        if kept:
            tools = ToolRegistry([*tools, *kept])
    return dataclasses.replace(spec, tools=tools, policy=policy)


_PLAIN_NOTES = {approval: DELEGATION_NOTE + text for approval, text in APPROVAL_NOTES.items()}


def _note(
    request: SubagentStartRequest, spec: ChildSpec, *, continuable: bool, remote: bool
) -> str:
    """The delegation note the child reads after anything it inherited."""
    # The plain note is one string per approval policy, shared by every child that reads it.
    note = _PLAIN_NOTES[spec.approval]
    if request.persona:
        note += f"\n\nYour persona for this task:\n{request.persona}"
    if spec.policy is not None:
        allowed = spec.policy.as_data()
        note += f"\n\nOnly these tools are yours to call for this task: {json.dumps(allowed)}."
    if request.output_schema is not None:
        note += (
            "\n\nEnd with a final answer that is only JSON valid against this JSON Schema:\n"
            + json.dumps(request.output_schema)
        )
    if continuable:
        # A child behind a provider-supplied model (a remote agent) cannot call our tools.
        hint = REPORT_HINT if spec.tools.get("report") and not remote else ""
        note += "\n\n" + CONTINUABLE_NOTE + hint
    return note


def _filter_data(request: SubagentStartRequest) -> dict[str, list[str] | None] | None:
    return request.tool_filter.as_data() if request.tool_filter is not None else None


def _corrupt(header: SessionHeader, key: str, value: object, expected: str) -> StoreError:
    return StoreError(
        ErrorCode.SESSION_CORRUPT,
        f'the continuable descriptor of session "{header.id}" is not readable: {key} is '
        f"{value!r:.80}, not {expected}",
        remedy="the log was written by another program; restore it from a backup or start a "
        "new session",
    )
