"""The Agent: a durable session, an inbox, and the turn loop that works through it.

An agent is built whole from its parts (keyword arguments kept as one frozen
:class:`~tether.agents.AgentSpec`, ``agent.spec``) and its jobs are owned by collaborators,
each with its own small API:

* ``agent.lease`` (:class:`~tether.agents.SessionLease`): the session's lease, the log it
  writes (every event reaches the store before the agent acts on it) and the mail other
  processes post;
* ``agent.inbox`` (:class:`~tether.agents.Inbox`): messages accepted and not yet claimed;
* ``agent.loop`` (:class:`~tether.agents.TurnLoop`): the turns, from claim to ``turn/end``;
* ``agent.budget`` (:class:`~tether.agents.ContextBudget`): the history, its cost against the
  model's context window, and compaction.

The model request of step N+1 is the request of step N plus appended messages: the base
prompt and tool list never change within a session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from ..contracts import Budget, Caller, DescriptorEvent, Guardrail, Workspace
from ..errors import ErrorCode, StoreError, TetherError
from ..ground import leaves
from ..models import Message, Model, ModelDelta, is_session_bound
from ..store import (
    CompactionEvent,
    Event,
    MessageSource,
    SessionHeader,
    SessionStore,
    StopReason,
)
from ..store._lifecycle import check_open
from ..store.replay import fold
from ..workspaces._place import WORKSPACE_DESCRIPTOR, AgentWorkspace
from ._approvals import ApprovalPolicy
from ._budget import ContextBudget
from ._compaction import CompactionPolicy, CompactionStrategy
from ._delegation import delegation_pins
from ._inbox import USER_SOURCE, Inbox, acceptance, new_id
from ._instructions import DynamicInstruction
from ._lease import TEARDOWN_TIMEOUT, SessionLease
from ._loop import TurnLoop
from ._spec import AgentSpec
from ._spending import Spending, enter_spending, leave_spending
from ._step import AgentLimits, PreStep
from ._tools import ToolFilter, ToolRegistry
from ._tracing import Tracer, carry_trace

if TYPE_CHECKING:
    from ..loading import Scope
    from ..runtime import Runtime

__all__ = ("Agent", "new_header")

_STEER_SOURCE = MessageSource(kind="steer")
_INJECT_SOURCE = MessageSource(kind="inject")


class Agent:
    """One agent running one session. Use as ``async with``; see the module docstring."""

    # Slots: thousands of live children each hold one agent, and an instance dict costs more.
    __slots__ = (
        "__weakref__",
        "_budget_record",
        "_jobs",
        "_new_session",
        "_on_teardown",
        "_restored",
        "_stack",
        "_workspace",
        "budget",
        "caller",
        "header",
        "inbox",
        "initiator",
        "lease",
        "loop",
        "spec",
        "spending",
    )

    def __init__(
        self,
        *,
        header: SessionHeader,
        store: SessionStore,
        model: Model,
        system: Sequence[str] = (),
        tools: ToolRegistry | None = None,
        instructions: Sequence[DynamicInstruction] = (),
        pre_steps: Sequence[PreStep] = (),
        limits: AgentLimits | None = None,
        runtime: Runtime | None = None,
        scope: Scope | None = None,
        cwd: Path | None = None,
        model_spec: str | None = None,
        tracer: Tracer | None = None,
        approval: ApprovalPolicy = "ask",
        tool_policy: ToolFilter | None = None,
        compaction: CompactionPolicy | None = None,
        compaction_strategy: CompactionStrategy | None = None,
        budget: Budget | None = None,
        new_session: bool = False,
        caller: Caller | None = None,
        guardrails: Sequence[Guardrail] = (),
    ) -> None:
        """An agent on the session ``header``, made of the parts :class:`AgentSpec` names
        (``new_session``: its store just created ``header``, lease held, log empty, so entering
        reads nothing back; ``caller``: the sender of messages naming none, ``inbox.sender``)."""
        self.header = header
        """The session's header (its model record changes when the agent takes it)."""
        # Who created the session, and who is asking: the caller of the last message taken
        # that named one (docs/callers.md).
        self.initiator = self.caller = header.caller
        self.spec = AgentSpec(
            store=store,
            model=model,
            system=tuple(system),
            tools=tools or ToolRegistry(),
            instructions=tuple(instructions),
            pre_steps=tuple(pre_steps),
            limits=limits or AgentLimits(),
            runtime=runtime,
            scope=scope,
            cwd=cwd,
            model_spec=model_spec,
            tracer=tracer,
            approval=approval,
            tool_policy=tool_policy,
            compaction=compaction or CompactionPolicy(),
            compaction_strategy=compaction_strategy,
            budget=budget,
            guardrails=tuple(guardrails),
        )
        """What the agent is made of; a restore only narrows it to what its log pins."""
        self.lease = SessionLease(self)
        """The session's lease, the log the agent writes, its mail."""
        self.inbox = Inbox(self, caller)
        """Messages accepted and not yet claimed."""
        self.loop = TurnLoop(self)
        """The turns: which runs, how the last ended, idleness."""
        self.budget = ContextBudget(self)
        """The history and its cost against the model's context window."""
        self._jobs = 0
        self._on_teardown: dict[object, Callable[[], None]] | None = None
        self._stack: AsyncExitStack | None = None
        self._restored = False
        self._new_session = new_session
        self._budget_record: DescriptorEvent | None = None
        self._workspace = AgentWorkspace(self)
        self.spending: Spending | None = None
        """The budgets its requests and children are charged to while it is entered
        (``None``: it spends under none)."""

    # ---------------------------------------------------------------- what it is

    @property
    def session_id(self) -> str:
        """The id of the session the agent runs."""
        return self.header.id

    @property
    def name(self) -> str | None:
        """The agent preset this session runs."""
        return self.header.agent

    @property
    def store(self) -> SessionStore:
        """Where its session's log lives (``spec.store``)."""
        return self.spec.store

    @property
    def model(self) -> Model:
        """What answers its requests (``spec.model``)."""
        return self.spec.model

    @property
    def tools(self) -> ToolRegistry:
        """The tools its model sees (``spec.tools``, narrowed to what a delegation pinned)."""
        return self.spec.tools

    @property
    def runtime(self) -> Runtime | None:
        """The runtime the agent lives in (``spec.runtime``); ``None`` for a bare agent."""
        return self.spec.runtime

    @property
    def cwd(self) -> Path:
        """The folder it started from (the process's, or the one given): skills are found there."""
        return self._workspace.cwd

    @property
    def workspace(self) -> Workspace:
        """Where its files live and its commands run (docs/workspaces.md)."""
        return self._workspace.current

    @property
    def messages(self) -> tuple[Message, ...]:
        """The history the model's next request starts from."""
        return tuple(self.budget.history)

    @property
    def status(self) -> Literal["running", "idle"]:
        """``running`` while a turn runs or accepted messages wait to be claimed."""
        return "running" if self.loop.running else "idle"

    @property
    def turns(self) -> int:
        """Turns the session has taken."""
        return self.loop.turns

    @property
    def fault(self) -> TetherError | None:
        """A store failure that stopped the agent (its last turn could not be recorded)."""
        return self.lease.fault

    @property
    def tearing_down(self) -> bool:
        """Whether ``async with`` is being left (messages sent now are not run)."""
        return self.loop.closing

    # ---------------------------------------------------------------- lifecycle

    async def restore(self, *, repair: bool = True, log: Sequence[Event] | None = None) -> None:
        """Rebuild history, instruction slots and unclaimed inbox messages from the log.

        With ``repair`` (the default) the agent is about to drive the session: it first takes
        the session's lease (``SESSION_BUSY`` when another live process drives it) and moves
        messages posted to the session's mailbox into its log; then a turn the log opened but
        never closed (the process stopped mid-turn) is closed: open tool calls get an error
        result (the tool may or may not have run) and the turn ends ``aborted``, so the
        history is one a model API accepts again. ``repair=False`` only reads. ``log`` is the
        whole log when the caller just wrote it (a new child, whose lease ``create`` took).

        A delegated child's log pins what its delegation allowed (its ``delegation``
        descriptor): its tools, their call policy and its approvals (``deny``). The spec is
        narrowed to them here (:meth:`AgentSpec.pinned`), on every route that restores it.
        """
        lease = self.lease
        took_lease = log is None and repair
        if log is None:
            log = await lease.read(repair=repair)
        else:
            lease.leased = True
            if not log and self.header.origin == "user":
                self._restored = True  # a new root session: nothing to fold, nothing pinned
                return
        folded = fold(log, seed_length=self.header.seed_length)
        try:
            pins = delegation_pins(self.header, folded.setup)
        except TetherError:
            if took_lease:
                await lease.give_back()  # nothing ran: leave the session to the next one
            raise
        if pins is not None:
            self.spec = self.spec.pinned(pins)
        lease.log_length = folded.length
        self._budget_record = folded.budget
        self._workspace.restored(folded.setup.get(WORKSPACE_DESCRIPTOR))
        self.budget.restored(folded)
        self.loop.turns = folded.turns
        self.inbox.restored(folded)
        self._restored = True
        open_turn = folded.open_turn if repair else None
        if open_turn is not None and self.loop.resumable(open_turn):
            # Cut in a step whose open calls may all run again: the turn goes on when the
            # agent is next driven (its calls first), instead of being closed here.
            self.loop.go_on(open_turn)
        elif open_turn is not None:
            await self.loop.close_cut(open_turn)

    async def __aenter__(self) -> Agent:
        lease, loop = self.lease, self.loop
        fresh = not self._restored and self._new_session
        if fresh:
            # A session its store just created (lease held, log empty) needs no reading.
            await self.restore(log=())
        elif not self._restored:
            await self.restore()
        elif not lease.leased:
            await lease.take()  # a dormant agent entered again
        spec, session_id = self.spec, self.header.id
        if spec.runtime is not None:
            live = spec.runtime.live_agents
            if live.get(session_id, self) is not self:
                raise StoreError(
                    ErrorCode.SESSION_CONFLICT,
                    f'session "{session_id}" is already open in this process',
                    remedy="send to the open agent instead of opening the session twice",
                )
            live[session_id] = self
        loop.closing = False
        stack = AsyncExitStack()
        try:
            # Before the task group: a budget that cannot be counted fails the entry alone.
            await enter_spending(self, self._budget_record, fresh=fresh)
            await self._workspace.enter(fresh=fresh)
            if is_session_bound(spec.model):  # a remote agent's model opens its connection
                await spec.model.attach(self)
            loop.group = await stack.enter_async_context(anyio.create_task_group())
            if lease.keeps_sessions():
                lease.keep()
            if self.inbox.queued:
                loop.parked = True  # restored messages wait for the next waking message
            if not fresh or not spec.store.durable:
                # Posted while it was dormant: they run now. A durable store's session created
                # a moment ago skips the read (a query): the process's keeper, which every
                # agent on a durable store has, finds its mail on its next round.
                await lease.collect_mail()
        except BaseException as exc:
            # Undo it all (the task group, the registration, the lease), so that the next
            # attempt, here or in another process, finds the session as a crash left it.
            if loop.group is not None:
                loop.group.cancel_scope.cancel()
            deadline = anyio.current_time() + TEARDOWN_TIMEOUT
            with anyio.CancelScope(shield=True, deadline=deadline):
                try:
                    await stack.__aexit__(type(exc), exc, exc.__traceback__)
                finally:
                    await self._left()  # last out: the lease, the model, the registration
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        stack, self._stack = self._stack, None
        loop, lease = self.loop, self.lease
        group = loop.group
        assert stack is not None
        assert group is not None
        loop.closing = True
        loop.interrupt()  # parks the inbox and cancels the turn that runs
        if loop.running:
            # Let the cancelled turn record its end (turn/end, "cancelled" results) first.
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + TEARDOWN_TIMEOUT):
                await loop.when_idle()
        if lease.unsaved:
            with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
                await lease.flush_held()
        # The group is cancelled only when something still runs in it (cancelling costs more
        # than the rest of the teardown), and before hosted children are told to stop: a job
        # waiting for a child's end is cancelled, not woken by the end the teardown causes.
        if self._jobs or loop.running:
            group.cancel_scope.cancel()
        teardown, self._on_teardown = self._on_teardown, None
        for release in [*teardown.values()] if teardown else ():
            release()  # hosted children start their own teardown
        try:
            return await stack.__aexit__(*exc_info)
        except BaseExceptionGroup as group:
            body = exc_info[1]
            if body is not None and all(e is body for e in leaves(group)):
                return False  # the block's own exception, unwrapped: it propagates as raised
            raise
        finally:
            await self._left()  # last out: the lease, the model, the registration

    async def _left(self) -> None:
        """The last of leaving (or of an entry that failed): the lease goes back, a
        session-bound model lets go, the session is no longer open here."""
        loop, spec = self.loop, self.spec
        loop.group = None
        loop.running = False
        loop.set_idle()
        await leave_spending(self)
        if self.lease.leased:
            await self.lease.leave()
        if is_session_bound(spec.model):
            with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
                await spec.model.detach(self)
        runtime = spec.runtime
        if runtime is not None and runtime.live_agents.get(self.header.id) is self:
            del runtime.live_agents[self.header.id]

    def start_job(self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``function(*args)`` in the agent's task group: a background job the agent owns,
        cancelled when the agent is left (``async with`` exits)."""
        group = self.loop.require_open()
        self._jobs += 1
        group.start_soon(self._job, function, args)

    async def _job(self, function: Callable[..., Coroutine[Any, Any, Any]], args: Any) -> None:
        try:
            await function(*args)
        finally:
            self._jobs -= 1

    def on_teardown(self, key: object, release: Callable[[], None] | None) -> None:
        """Call ``release()`` when the agent is left, before its jobs are cancelled (a
        hosted child ends its own turn cleanly); ``None`` removes the callback of ``key``."""
        if release is None:
            if self._on_teardown:
                self._on_teardown.pop(key, None)
        else:
            if self._on_teardown is None:
                self._on_teardown = {}
            self._on_teardown[key] = release

    def listen(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for each event of the log, in order; returns an unsubscribe
        function. Events are stored before listeners hear of them, except the ones that open a
        turn or a step (``turn/start``, the claim, pre-step messages): those are heard when the
        step starts and stored with its answer, in one commit."""
        return self.lease.listen(listener)

    def listen_deltas(self, listener: Callable[[ModelDelta], None]) -> Callable[[], None]:
        """Call ``listener(delta)`` for each piece of the model's answers as it arrives (text,
        reasoning, tool-call arguments; ``retry`` when a step's request is sent again); returns
        an unsubscribe function. While any agent listens, its model's answers are streamed
        (:mod:`tether.models` streaming); deltas are never stored: the answer is, once, as an
        ``assistant/message`` event that :meth:`listen` hears."""
        return self.loop.listen_deltas(listener)

    # ---------------------------------------------------------------- sending

    async def followup(
        self,
        content: str,
        *,
        caller: Caller | None = None,
        source: MessageSource | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        """Queue ``content`` as a later turn (FIFO); returns once it is durably accepted.
        ``caller``: who sends it (default: ``inbox.sender``), admitted by the session's gates
        (``CALLER_REFUSED``, docs/callers.md). ``trace``: the sender's trace context (W3C keys)
        from another process (an ACP prompt's ``_meta``); default: the agent's tracer's."""
        self.loop.require_open()
        source = self.inbox.source(source or USER_SOURCE, caller, "followup")
        item = await self.inbox.accept(content, source, "turn", trace)
        self.inbox.queued.append(item)
        self.loop.wake()
        return item.message_id

    async def steer(
        self, content: str, *, caller: Caller | None = None, source: MessageSource | None = None
    ) -> str:
        """A message the running turn sees at its next step; an idle agent takes it as a turn
        (as does a steer that arrives after the turn's last step). ``caller``: as ``followup``.
        """
        loop = self.loop
        loop.require_open()
        source = self.inbox.source(source or _STEER_SOURCE, caller, "steer")
        if not loop.running or not loop.in_turn:
            return await self.followup(content, source=source)
        item = await self.inbox.accept(content, source, "step")
        self.inbox.steered(item)
        return item.message_id

    async def inject(
        self, content: str, *, caller: Caller | None = None, source: MessageSource | None = None
    ) -> str:
        """Add context without waking the agent: the next step (or turn) sees it. ``caller``:
        as ``followup``."""
        self.loop.require_open()
        inbox = self.inbox
        return await inbox.inject(content, inbox.source(source or _INJECT_SOURCE, caller, "inject"))

    async def run(
        self, content: str, *, caller: Caller | None = None, source: MessageSource | None = None
    ) -> StopReason:
        """``followup`` then wait until idle; the stop reason of the last turn.

        When the agent is idle, the turn runs inline, in the caller's task (no task is started
        for it): cancelling the caller then aborts the turn, which still records its end."""
        loop, inbox = self.loop, self.inbox
        loop.require_open()
        source = inbox.source(source or USER_SOURCE, caller, "followup")
        if loop.running:
            inbox.queued.append(await inbox.accept(content, source, "turn"))
            loop.parked = False
            await loop.when_idle()  # the running drain takes it
        else:
            check_open(self.header)  # before a model call whose answer it could not store
            # Told of no acceptance before its turn ends, it is stored with the turn's first
            # answer, in its claim's commit: a crash before it loses the call whole.
            item, accepted = acceptance(content, source, "turn", carry_trace(self))
            self.lease.defer(accepted)
            inbox.queued.append(item)
            loop.parked = False
            loop.running = True
            await loop.drain()
        return loop.last_stop_reason

    async def when_idle(self) -> None:
        """Wait until no turn runs and no accepted message waits."""
        await self.loop.when_idle()

    async def cancel(self, *, keep_inbox: bool = False) -> None:
        """Abort the running turn (stop reason ``aborted``). With ``keep_inbox`` the queued
        messages stay parked until the next waking message; else they are discarded."""
        await self.loop.cancel(keep_inbox=keep_inbox)

    def interrupt(self) -> bool:
        """``cancel(keep_inbox=True)`` from synchronous code: abort the running turn now; queued
        messages stay parked until the next waking message. Whether a turn was running (and
        not already being stopped)."""
        return self.loop.interrupt()

    async def compact(self) -> CompactionEvent | None:
        """Compact the session now (``manual``; docs/compaction.md): waits until no turn
        runs, then replaces the history with a summary and the kept tail. The stored
        ``compaction`` event, or ``None`` when there was nothing to replace. Raises
        ``COMPACTION_FAILED`` when compaction is ``off`` or no summary could be written (the
        history stays whole then)."""
        self.loop.require_open()
        return await self.loop.compact()


def new_header(
    *,
    agent: str | None = None,
    label: str | None = None,
    session_id: str | None = None,
    parent_session: str | None = None,
    origin: Literal["user", "subagent"] = "user",
    delegation_depth: int = 0,
    seed_length: int = 0,
    model: str | None = None,
    detached: bool = False,
    caller: Caller | None = None,
) -> SessionHeader:
    """A header for a new session (id ``ses_...`` unless given); ``caller``: its initiator."""
    return SessionHeader(
        id=session_id or new_id("ses"),
        created_at=time.time(),
        label=label,
        agent=agent,
        parent_session=parent_session,
        origin=origin,
        delegation_depth=delegation_depth,
        seed_length=seed_length,
        model=model,
        detached=detached,
        caller=caller,
    )
