"""The runtime: what one process does with a frozen :class:`~tether.loading.Kernel`.

A kernel is the result of a profile (plugins, scopes, checked requirements) and never changes.
Everything live sits here: the agents open in this process, who answers permission questions,
the skill registry, the subagent service and the cache of agent presets. Agents receive their
runtime (``agent.runtime``); plugins reach the services through it.

    kernel = load_kernel("tether.toml")
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main")
        await runtime.run_session(agent, ["hello"])  # or: async with runtime.hold(agent) as held

``Runtime(kernel, store)`` without ``open`` is a runtime with no task group of its own: agents
composed on it still run (each owns its task group), which is all a test or a one-shot script
needs. ``open`` adds the task group background work runs in, and closes what it opened.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .. import agents
from ..agents._callers import admit
from ..agents._compose import (
    AgentPreset,
    build_preset,
    resolve_agent_name,
    resolve_preset_model,
)
from ..agents._guard_names import forwarded_guardrails, forwarded_record
from ..agents._tools import ToolRegistry, ToolSource
from ..contracts import Admission
from ..errors import (
    ErrorCode,
    ModelError,
    PluginError,
    ProfileError,
    StoreError,
    TetherError,
)
from ..ground import leaves
from ..loading import Kernel, LoadedPlugin, Scope
from ..skills import SkillProviderFactory, SkillRegistry
from ._collector import tuned_collector
from ._hold import COMPACT_GESTURE, HeldSession, SessionHold
from ._presets import with_preset_tools
from ._state import RuntimeState, StateKey
from ._tools import ToolCatalog
from ._workspaces import WORKSPACES, RuntimeWorkspaces

if TYPE_CHECKING:
    from anyio import CancelScope
    from anyio.abc import TaskGroup

    from ..agents._agent import Agent
    from ..agents._approvals import PermissionHost
    from ..agents._limits import AgentLimits
    from ..contracts import Budget, Caller, Guardrail, Price
    from ..models import Model, ModelDelta
    from ..store import Event, SessionHeader, SessionStore, StopReason, StoredEvent
    from ..subagents import SubagentProvider, SubagentRuntime
    from ._follow import FollowedSession
    from ._hosts import SessionHost
    from ._send import SentMessage

__all__ = ("COMPACT_GESTURE", "Runtime", "compose_agent")

_T = TypeVar("_T")


class Runtime:
    """The live half of tether for one kernel in one process; see the module docstring."""

    def __init__(
        self,
        kernel: Kernel,
        store: SessionStore | None = None,
        *,
        permission_host: PermissionHost | None = None,
    ) -> None:
        self.kernel = kernel
        """The frozen result of the profile."""
        self.store = store
        """The session store agents composed here use unless told otherwise."""
        self.live_agents: dict[str, Agent] = {}
        """The agents open (inside ``async with``) in this process, by session id."""
        self.permission_host: PermissionHost | None = permission_host
        """Who answers permission questions (tool approvals, ACP children's asks); ``None``:
        such calls are refused."""
        self.child_host: SessionHost | None = None
        """Where one-shot children run: ``None`` here; a session host (a ``tether worker``
        sets its cluster's) has each child driven by whichever worker the host picks."""
        self.resume_cut_turns = False
        """Whether a turn a crash cut in a model step is asked again rather than ``aborted``
        (a ``tether worker`` sets it; a cut tool step goes on only if its calls are idempotent)."""
        self._skills: SkillRegistry | None = None
        self._subagents: SubagentRuntime | None = None
        self._presets: dict[str | None, AgentPreset] = {}
        self.tool_catalog = ToolCatalog(self)
        """What tools the plugins offer and the tool sources list (composed per preset)."""
        self._group: TaskGroup | None = None
        self._kept: SessionStore | None = None
        self._state = RuntimeState()
        self.delta_listeners: list[Callable[[Agent, ModelDelta], None]] = []
        """Listeners of every agent's deltas (:meth:`listen_deltas`)."""
        self._prices: Mapping[str, Price] | None = None

    @property
    def prices(self) -> Mapping[str, Price]:
        """The model prices the profile sets (``[prices.NAME]``), over tether's own table
        (:func:`tether.models.price_for` looks here first)."""
        prices = self._prices
        if prices is None:
            from ..budgets._prices import profile_prices

            prices = self._prices = profile_prices(self.kernel.profile)
        return prices

    # ------------------------------------------------------------------ lifetime

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        kernel: Kernel,
        store: SessionStore | None = None,
        *,
        permission_host: PermissionHost | None = None,
        tune_collector: bool = True,
    ) -> AsyncGenerator[Runtime]:
        """A runtime with a task group of its own, for ``async with``. Leaving it cancels the
        background work started in it (:meth:`start_soon`), then closes the plugins' closable
        state (:meth:`state`). The store stays the caller's: it is not closed here.

        ``tune_collector``: the collector runs at :data:`RUNTIME_THRESHOLDS` while open, which
        keeps thousands of live children linear (``_collector.py``); ``False`` leaves it be."""
        runtime = cls(kernel, store, permission_host=permission_host)
        try:
            with tuned_collector() if tune_collector else nullcontext():
                async with runtime._opened():
                    yield runtime
        except BaseExceptionGroup as group:
            # The block's own exception, as it was raised (the background work was only
            # cancelled): not wrapped in a group the caller did not ask for.
            found = leaves(group)
            if len(found) == 1 and not isinstance(found[0], anyio.get_cancelled_exc_class()):
                body = found[0]
                # Raised as it was: its cause and context as the block left them.
                context, cause = body.__context__, body.__cause__
                suppress = body.__suppress_context__
                try:
                    raise body
                finally:
                    body.__context__, body.__cause__ = context, cause
                    body.__suppress_context__ = suppress
            raise

    @asynccontextmanager
    async def _opened(self) -> AsyncGenerator[None]:
        """The task group, and the keeper of a durable store."""
        store = self.store
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                if store is not None and store.durable:
                    self._kept = store
                    group.start_soon(self._keep, store)
                for source in self.tool_catalog.eager_sources():
                    group.start_soon(self.tool_catalog.warm, source)
                try:
                    yield
                finally:
                    self._group = None
                    group.cancel_scope.cancel()
        finally:  # once the background work has ended: plugins' state (:meth:`state`)
            await self._state.aclose()

    def listen_deltas(self, listener: Callable[[Agent, ModelDelta], None]) -> Callable[[], None]:
        """Call ``listener(agent, delta)`` for each piece of every answer of every agent of
        this runtime (the root and its children, as :meth:`Agent.listen_deltas` does for
        one); returns an unsubscribe function. A live view of a delegation tree uses it to
        show each child's latest line."""
        self.delta_listeners.append(listener)
        return lambda: self.delta_listeners.remove(listener)

    @property
    def is_open(self) -> bool:
        """Whether the runtime has a task group (inside ``Runtime.open``)."""
        return self._group is not None

    def start_soon(
        self, function: Callable[..., Coroutine[Any, Any, object]], *args: object
    ) -> None:
        """Run ``function(*args)`` in the runtime's task group (inside ``Runtime.open``)."""
        if self._group is None:
            raise RuntimeError("start background work inside `async with Runtime.open(...)`")
        self._group.start_soon(function, *args)

    def state(self, key: StateKey[_T]) -> _T:
        """The value of ``key`` in this runtime: made by ``key.factory(runtime)`` on first
        use, then the same object for the runtime's life (a plugin's per-runtime state, as
        tether-mcp-client's server connections). Inside :meth:`open`, a value with ``async
        aclose()`` (:class:`~tether.runtime.ClosableState`) is closed when the runtime closes,
        after its background work, last made first. See ``tether/runtime/_state.py``."""
        return self._state.get(self, key)

    # ------------------------------------------------------------------ workspaces

    @property
    def workspaces(self) -> RuntimeWorkspaces:
        """Its workspace backends, ``backend(name)`` (``local``, ``userns``, a plugin's), and
        ``folder(store)``, where session workspaces are made (docs/workspaces.md)."""
        return self.state(WORKSPACES)

    # ------------------------------------------------------------------ services

    @property
    def skills(self) -> SkillRegistry:
        """The skill registry: every plugin instance's ``tether_skill_providers``, in its scope
        layer. Built on first use, so a profile without skills pays nothing for them."""
        if self._skills is None:
            registry = SkillRegistry()
            for scope in self.kernel.scopes():
                for plugin in scope.plugins:
                    for factory in plugin.collect("tether_skill_providers", SkillProviderFactory):
                        _register_skill_provider(registry, plugin, scope, factory)
            self._skills = registry
        return self._skills

    @property
    def subagents(self) -> SubagentRuntime:
        """The subagent service: every plugin instance's ``tether_subagent_providers``, by
        name. Built on first use."""
        if self._subagents is None:
            # Imported here: a profile without delegation never loads the subagent room.
            from ..subagents import SubagentProvider, SubagentRuntime

            service = SubagentRuntime(self.store)
            for plugin in self.kernel.plugins:
                for provider in plugin.collect("tether_subagent_providers", SubagentProvider):
                    _register_subagent_provider(service, plugin, provider)
            self._subagents = service
        return self._subagents

    @property
    def delegates(self) -> bool:
        """Whether children may exist (to show, or to recover): some plugin offers subagent
        providers (the built-in plugin ``tether.specialists`` does when some agent of the
        profile declares subagents)."""
        return any(p.implements("tether_subagent_providers") for p in self.kernel.plugins)

    def preset(self, agent: str | None) -> AgentPreset:
        """The agent preset ``agent`` (``None``: the global scope), built once per runtime
        with the tools plugins offer it by what it declares (``tether_preset_tools``): a
        preset is fixed at load, like the base prompt it produces."""
        cached = self._presets.get(agent)
        if cached is None:
            cached = with_preset_tools(build_preset(self.kernel, agent))
            self._presets[agent] = cached
        return cached

    async def tools(
        self,
        preset: AgentPreset,
        extra: Sequence[ToolSource] = (),
        *,
        caller: Caller | None = None,
    ) -> ToolRegistry:
        """The tool list an agent of ``preset`` gets when composed now for ``caller``
        (:meth:`ToolCatalog.compose <tether.runtime.ToolCatalog.compose>`)."""
        return await self.tool_catalog.compose(preset, extra, caller=caller)

    # ------------------------------------------------------------------ agents

    def agent(
        self,
        preset: AgentPreset,
        header: SessionHeader,
        store: SessionStore,
        model: Model,
        *,
        limits: AgentLimits | None = None,
        cwd: Path | None = None,
        model_spec: str | None = None,
        new_session: bool = False,
        tools: ToolRegistry | None = None,
        budget: Budget | None = None,
        caller: Caller | None = None,
        guardrails: Sequence[Guardrail] = (),
    ) -> Agent:
        """An agent of ``preset`` on the session ``header``, living in this runtime
        (``new_session``: the store just created ``header``; see ``AgentPreset.agent``;
        ``tools``: what :meth:`tools` composed, default the preset's own). ``budget``: what
        the session holds (docs/budgets.md); default for a root session, the profile's
        (``preset.root_budget``). ``caller``: who sends the messages sent through the agent
        without naming one (docs/callers.md). ``guardrails``: checks on top of a root
        session's (forwarded by a delegating tether, docs/guardrails.md)."""
        if budget is None and header.parent_session is None:
            budget = preset.root_budget
        rails = {g.name: g for g in (*preset.root_guardrails, *guardrails)}
        return preset.agent(
            header,
            store,
            model,
            limits=limits,
            cwd=cwd,
            model_spec=model_spec,
            runtime=self,
            new_session=new_session,
            tools=tools,
            budget=budget,
            caller=caller,
            guardrails=tuple(rails.values()) if guardrails else None,
        )

    async def compose(
        self,
        *,
        agent: str | None = None,
        model: Model | str | None = None,
        session_id: str | None = None,
        label: str | None = None,
        limits: AgentLimits | None = None,
        record_model: bool = True,
        store: SessionStore | None = None,
        tool_sources: Sequence[ToolSource] = (),
        cwd: Path | None = None,
        budget: Budget | None = None,
        caller: Caller | None = None,
        guardrails: Sequence[str] = (),
    ) -> Agent:
        """An :class:`Agent` for ``agent`` on a new session, or on ``session_id`` if given, on
        ``store`` (default: the runtime's). Use the result as ``async with agent:``.
        ``tool_sources``: sources of this agent alone (merged into its nearest layer), on top
        of its preset's. ``cwd``: the directory its tools act in (default: the process's).

        A string ``model`` is a spec resolved relative to the current directory; ``None`` uses
        the session's recorded model, else the agent's profile ``model``. The spec is recorded
        in a new session's header; on a stored session a string ``model`` that differs from its
        recorded one becomes its model when the agent takes the session, logged as a ``model``
        descriptor with the old and new spec. A session written before tether recorded models
        (header ``model`` None) keeps using the profile's model until one is given explicitly.
        ``record_model=False`` uses ``model`` on a stored session without recording it (an
        agent that only hosts others, as ``tether sessions send``'s).

        ``budget``: the budget the session holds for its whole tree (docs/budgets.md); default
        for a root session, the profile's (``[agent.NAME] budget`` within ``[tether]
        budget``). A budget its log holds already is kept (its clock goes on); a different
        one starts from now.

        ``caller``: who is asking (docs/callers.md). A new session records it as its
        initiator (``header.caller``); on a stored session it becomes the sender of the
        messages sent through this agent without naming one. The agent's caller gates admit
        it first (kind ``session``; on a stored session only when a caller is given):
        ``CALLER_REFUSED``, and no session is created.

        ``guardrails``: names a delegating tether forwarded (``tether acp``, ``tether a2a
        serve``), checking the session on top of its own; one its scope does not offer is
        ``GUARDRAIL_INVALID`` (no session is made); a new session's log records them.
        """
        store = store or self.store
        if store is None:
            raise StoreError(
                ErrorCode.STORE_UNAVAILABLE,
                "no session store to compose the agent on",
                remedy="pass store=... or give the runtime a store",
            )
        kernel = self.kernel
        header = await store.header(session_id) if session_id is not None else None
        if header is not None:
            # A stored session keeps its own agent preset; --agent may only confirm it.
            if agent is not None and header.agent != agent:
                raise ProfileError(
                    ErrorCode.UNKNOWN_AGENT,
                    f'session "{session_id}" runs agent {header.agent!r}, not {agent!r}',
                    remedy=f"drop --agent or pass --agent {header.agent}",
                )
            name = resolve_agent_name(kernel, header.agent)
        else:
            name = resolve_agent_name(kernel, agent)
        preset = self.preset(name)
        spec: str | None = None  # the spec to record, when it is known
        if model is not None and not isinstance(model, str):
            resolved: Model = model
        elif model is not None:
            resolved = resolve_preset_model(preset, model, base=Path.cwd())
            spec = model
        elif header is not None and header.model not in (None, preset.model_spec):
            # The session's own model, given as --model once: a relative path in it
            # (function:, scripted:) is relative to the directory tether runs in.
            try:
                resolved = resolve_preset_model(preset, header.model, base=Path.cwd())
            except ModelError as exc:
                raise ModelError(
                    exc.code,
                    f'session "{header.id}" runs model "{header.model}", which cannot be used '
                    f"here: {exc.message}",
                    remedy=f"{exc.remedy + '; or ' if exc.remedy else ''}pass --model SPEC to "
                    "continue the session on another model (recorded in the session)",
                ) from exc
        else:
            # The profile's model (also when the session recorded that one): relative to the
            # profile file that names it.
            model_file = kernel.profile.file_of("agent", name, "model") if name else None
            base = model_file.parent if model_file is not None else kernel.profile.folder
            resolved = resolve_preset_model(preset, None, base=base)
            if header is None:
                spec = preset.model_spec
        # Before the session exists: a failure leaves none. The gates first: a refused
        # caller has no tool source listed for it.
        created = header is None
        fresh = header or agents.new_header(agent=name, label=label, model=spec, caller=caller)
        if preset.caller_gates and (created or caller is not None):
            admit(preset.caller_gates, Admission(fresh.id, name, caller, "session"))
        tools = await self.tools(preset, tool_sources, caller=caller)
        rails = forwarded_guardrails(preset.offered_guardrails, guardrails) if guardrails else ()
        if header is None:
            header = await store.create(fresh, forwarded_record(rails))
        if not record_model and session_id is not None:
            spec = None
        return self.agent(
            preset,
            header,
            store,
            resolved,
            limits=limits,
            cwd=cwd,
            model_spec=spec,
            new_session=created and not rails,  # a record in its log: restored from it
            tools=tools,
            budget=budget,
            caller=caller,
            guardrails=rails,
        )

    # ------------------------------------------------------------------ sessions

    async def recover(self, agent: Agent) -> None:
        """After a crash: the continuable children of ``agent`` that hold accepted, unrun
        messages pick up again (nothing to do when no plugin delegates)."""
        if self.delegates:
            await self.subagents.continuation.recover(agent)

    async def settle(self, agent: Agent) -> None:
        """Wait until ``agent`` is quiet: idle, its continuable children and one-shot tasks
        settled, with the turns their notices and results give."""
        await agent.when_idle()
        if self._subagents is not None:
            while True:
                await self._subagents.continuation.wait_quiet(agent)
                # One-shot tasks too: their results give turns of their own.
                if not await self._subagents.tasks.wait_jobs(agent):
                    return

    async def deliver_mail(self, store: SessionStore, session_id: str) -> None:
        """Hand the mail other processes posted to ``session_id`` in ``store`` to its agent
        here (or to the subagent service, which restores a stored child under its open
        ancestor); mail for a session this process does not drive is left for its owner."""
        if self._subagents is not None:
            await self._subagents.continuation.deliver_mail(store, self.live_agents, session_id)
            return
        agent = self.live_agents.get(session_id)
        if agent is not None:
            await agent.lease.collect_mail()

    def keeps(self, store: SessionStore) -> bool:
        """Whether this runtime keeps ``store``'s sessions for the process (inside
        ``Runtime.open``, on a durable store): then no agent of it runs a keeper of its own."""
        return self._group is not None and self._kept is store

    async def _keep(self, store: SessionStore) -> None:
        """The process's one keeper of ``store``'s sessions: renew their leases, deliver the
        mail other processes post to them (see :func:`tether.agents.keep_sessions`)."""

        async def deliver(session_id: str) -> None:
            await self.deliver_mail(store, session_id)

        from ..agents._keeper import keep_sessions

        await keep_sessions(store, deliver)

    def hold(
        self,
        agent: Agent,
        *,
        recover: bool = False,
        stop: CancelScope | None = None,
        close_model: bool = True,
    ) -> AbstractAsyncContextManager[HeldSession]:
        """The one way to host a session in this process: ``async with runtime.hold(agent)
        as held:`` enters ``agent`` (lease, posted mail, repair, :attr:`live_agents`), recovers
        its children with ``recover``, serves the block's prompts and posted mail, and on
        leaving closes a :class:`~tether.models.ClosableModel` (``close_model``), also when
        the block raised. ``stop`` cuts the block short, as Ctrl-C does. See
        ``tether/runtime/_hold.py``."""
        return SessionHold(self, agent, recover=recover, stop=stop, close=close_model)

    def follow(
        self,
        host: SessionHost,
        session_id: str | None = None,
        *,
        agent: str | None = None,
        new: bool = False,
        hear: Callable[[StoredEvent], None] | None = None,
        hear_delta: Callable[[ModelDelta], None] | None = None,
        caller: Caller | None = None,
    ) -> AbstractAsyncContextManager[FollowedSession]:
        """``async with runtime.follow(host, session_id) as followed:``: the session (``None``:
        a new one of ``agent``) whose turns ``host`` runs elsewhere, followed from this
        runtime's store; its events to ``hear``, the pieces of its answers to ``hear_delta``.
        ``new``: ``session_id`` names a session not created yet, which its first message
        creates (a server that gave the client the id first). ``caller``: who sends the
        messages (docs/callers.md). See ``tether/runtime/_follow.py``."""
        from ._follow import follow_session

        return follow_session(self, host, session_id, agent, new, hear, hear_delta, caller)

    def send(
        self,
        session_id: str,
        content: str,
        *,
        model: str | None = None,
        wait: bool = False,
        hear: Callable[[Event], None] | None = None,
        hear_delta: Callable[[ModelDelta], None] | None = None,
        caller: Caller | None = None,
        steer: bool = False,
    ) -> SentMessage:
        """A person's message to the stored session ``session_id``, queued through its
        mailbox (``tether sessions send``): :meth:`SentMessage.deliver` posts it and sees it
        through, holding the root here when nobody drives it. ``caller``: who sends it (kept
        with the message; the session's gates admit it before it is posted,
        ``CALLER_REFUSED``: docs/callers.md). ``steer``: for the running turn's next step
        (``tether sessions steer``). See ``tether/runtime/_send.py``."""
        from ._send import SentMessage

        return SentMessage(
            self,
            session_id,
            content,
            model=model,
            wait=wait,
            hear=hear,
            hear_delta=hear_delta,
            caller=caller,
            steer=steer,
        )

    async def run_session(
        self,
        agent: Agent,
        prompts: Sequence[str] = (),
        *,
        recover: bool = False,
        stop: CancelScope | None = None,
        close_model: bool = True,
    ) -> StopReason:
        """Hold ``agent``'s session (:meth:`hold`), send ``prompts`` in order, wait until
        quiet, leave (``tether run``, an embedding application). Returns the stop reason of
        the last turn; a store fault that stopped the agent is raised.

        A prompt that is exactly ``/compact`` (:data:`COMPACT_GESTURE`) is not sent: once the
        turns of the prompts before it have run, the session is compacted
        (:meth:`Agent.compact`, docs/compaction.md).
        """
        async with self.hold(agent, recover=recover, stop=stop, close_model=close_model) as held:
            await held.run(prompts)
        return agent.loop.last_stop_reason


async def compose_agent(
    runtime: Runtime | Kernel,
    store: SessionStore | None = None,
    *,
    agent: str | None = None,
    model: Model | str | None = None,
    session_id: str | None = None,
    label: str | None = None,
    limits: AgentLimits | None = None,
    record_model: bool = True,
) -> Agent:
    """:meth:`Runtime.compose` as a function. A :class:`Kernel` gets a runtime of its own
    (pass one :class:`Runtime` to agents that share live state: children, permission host)."""
    if isinstance(runtime, Kernel):
        runtime = Runtime(runtime, store)
    return await runtime.compose(
        agent=agent,
        model=model,
        session_id=session_id,
        label=label,
        limits=limits,
        record_model=record_model,
        store=store,
    )


def _register_subagent_provider(
    service: SubagentRuntime, plugin: LoadedPlugin, provider: SubagentProvider
) -> None:
    """Register one subagent provider; a failure names the plugin that offered it."""
    try:
        service.register_provider(provider)
    except TetherError as exc:
        raise type(exc)(
            exc.code,
            f'plugin "{plugin.name}" ({plugin.entry.source}): {exc.message}',
            plugin=plugin.name,
            remedy=exc.remedy,
        ) from exc


def _register_skill_provider(
    registry: SkillRegistry, plugin: LoadedPlugin, scope: Scope, factory: SkillProviderFactory
) -> None:
    """Register one factory's provider; a failure names the plugin that offered it."""
    try:
        registry.register_provider(
            factory.create,
            name=factory.name,
            scope=None if scope.kind == "global" else scope,
        )
    except TetherError as exc:
        raise type(exc)(
            exc.code,
            f'plugin "{plugin.name}" ({plugin.entry.source}): {exc.message}',
            file=exc.file,
            key=exc.key,
            plugin=plugin.name,
            remedy=exc.remedy,
            where=exc.where,
        ) from exc
    except Exception as exc:
        raise PluginError(
            ErrorCode.PLUGIN_HOOK_FAILED,
            f'plugin "{plugin.name}" ({plugin.entry.source}) failed to create skill provider '
            f'"{factory.name}": {type(exc).__name__}: {exc}',
            plugin=plugin.name,
            remedy="fix the plugin or its settings (--debug shows the traceback)",
        ) from exc
