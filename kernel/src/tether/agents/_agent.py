"""The Agent: a durable session, an inbox, and the turn loop that works through it.

A turn: a message is accepted into the inbox (``inbox/accepted`` is durable before
``followup`` returns) -> the loop claims it (``user/message``, ``turn/start``) -> per step:
queued steering and injected messages, then pre-step hooks, are appended -> one model request
-> tool calls run (safe ones concurrently) -> results appended -> until an answer without tool
calls or a limit -> ``turn/end`` with a stop reason. Every event reaches the store before the
agent acts on it, and the model request of step N+1 is the request of step N plus appended
messages: the base prompt and tool list never change within a session.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup

from ..errors import AgentError, ErrorCode, ModelError, StoreError, SubagentError, TetherError
from ..ground import leaves
from ..models import (
    ContextWindow,
    Message,
    Model,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
    is_session_bound,
    messages_tokens,
    schema_tokens,
    window_for,
)
from ..store import (
    AssistantMessage,
    CompactionEvent,
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    InstructionEvent,
    MessageSource,
    SessionHeader,
    SessionStore,
    StopReason,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from ..store._events import compacted_view, replace_surrogates
from ..store.replay import OpenTurn, event_to_message, fold
from ._approvals import ApprovalPolicy
from ._calls import run_in_batches, run_tool
from ._compaction import CompactionPolicy, CompactionStrategy, compact
from ._delegation import apply_pins, delegation_pins
from ._instructions import DynamicInstruction, InstructionContext
from ._keeper import keep_sessions
from ._repair import closing_events
from ._step import (
    FINISH_TO_STOP,
    REPEAT_ORIGIN,
    REPEAT_REFUSED,
    AgentLimits,
    PreStep,
    RepeatWatch,
    StepContext,
    build_request,
    changed_instructions,
    pre_step_messages,
    request_with_retries,
    storable_response,
)
from ._tools import ToolFilter, ToolRegistry
from ._tracing import Tracer, TurnStart, carry_trace, tracing

if TYPE_CHECKING:
    from ..loading import Kernel, Scope
    from ..runtime import Runtime

__all__ = ("Agent", "new_header")

log = logging.getLogger("tether.agents")

_USER_SOURCE = MessageSource(kind="user")
#: Store errors after which the agent must not write again: another process owns the session.
_FENCED: frozenset[str] = frozenset({"SESSION_BUSY", "SESSION_CONFLICT"})
#: The result an open tool call gets when its turn ends before the call finished.
UNFINISHED_CALL = (
    "error: interrupted: the turn ended before this tool finished; it may or may not have run"
)
_NO_USAGE = Usage()

#: The descriptor kind that logs a change of a session's model: ``{"old": ..., "new": ...}``.
MODEL_DESCRIPTOR = "model"
#: How long teardown waits for the final log writes of a cancelled turn.
TEARDOWN_TIMEOUT = 5.0


@dataclass
class _InboxItem:
    message_id: str
    content: str
    source: MessageSource
    trace: Mapping[str, str] = field(default_factory=dict[str, str])
    """The trace context the sender's tracer carried (:meth:`Tracer.carry`)."""


def _new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(8).hex()}"


def _storable_result(result: ToolResult) -> ToolResult:
    content = replace_surrogates(result.content)
    if content is result.content:
        return result
    return result.model_copy(update={"content": content})


class Agent:
    """One agent running one session. Use as ``async with``; see the module docstring."""

    # Slots: thousands of live children each hold one agent, and an instance dict costs more.
    __slots__ = (
        "__weakref__",
        "_appending",
        "_compactions",
        "_cwd",
        "_delegation_note",
        "_delta_listeners",
        "_earlier_answers",
        "_ended",
        "_fault",
        "_group",
        "_history",
        "_idle",
        "_inbox",
        "_injected",
        "_instruction_values",
        "_jobs",
        "_last_error",
        "_last_stop",
        "_leased",
        "_listeners",
        "_log_length",
        "_model_spec",
        "_new_session",
        "_on_idle",
        "_on_teardown",
        "_parked",
        "_restored",
        "_resume",
        "_runner_active",
        "_steering",
        "_step",
        "_streamed",
        "_tally",
        "_tearing_down",
        "_told",
        "_turn_item",
        "_turn_scope",
        "_turns",
        "_unsaved",
        "_window",
        "approval",
        "compaction",
        "compaction_strategy",
        "header",
        "holds_images",
        "instructions",
        "limits",
        "model",
        "pre_steps",
        "runtime",
        "scope",
        "store",
        "system",
        "tool_policy",
        "tools",
        "tracer",
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
        new_session: bool = False,
        tracer: Tracer | None = None,
    ) -> None:
        self.header = header
        self._model_spec = model_spec
        self.runtime = runtime
        """The runtime the agent lives in (its services: ``runtime.skills``,
        ``runtime.subagents``, ``runtime.permission_host``); ``None`` for a bare agent."""
        self.scope = scope
        """The agent's scope: registries resolve through its chain."""
        # The process's working directory now, as a string: a Path is made on first use.
        self._cwd: Path | str = cwd if cwd is not None else os.getcwd()
        self.approval: ApprovalPolicy = "ask"
        """Whether tools marked ``needs_approval`` run: ``ask`` the kernel's permission host
        (refused without one), ``allow``, or ``deny`` (a delegated child's, pinned)."""
        self.tool_policy: ToolFilter | None = None
        """Tools the model sees but may not call (a fork keeps its parent's tool list for
        prompt-cache reuse and enforces its delegation's filter here)."""
        self.store = store
        self.model = model
        self.system: tuple[str, ...] = tuple(system)
        self.tools = tools or ToolRegistry()
        self.instructions = tuple(instructions)
        self.pre_steps = tuple(pre_steps)
        self.limits = limits or AgentLimits()
        self.tracer = tracer
        """Sees every turn, model request and tool call (``tether_tracers``); ``None``: nobody
        does, and the loop enters nothing."""
        self._history: list[Message] = []
        self.holds_images = False
        """Whether a message of its history carries images (a tool returned some): then a
        model that takes no images reads a note in their place (``build_request``)."""
        self._instruction_values: dict[str, str] = {}
        self._turns = 0
        self._inbox: deque[_InboxItem] = deque()
        self._steering: list[_InboxItem] = []
        self._injected: list[_InboxItem] = []
        self._listeners: list[Callable[[Event], None]] = []
        self._delta_listeners: list[Callable[[ModelDelta], None]] = []
        self._streamed: list[str] = []  # the text of the answer streaming now
        self._group: TaskGroup | None = None
        self._jobs = 0
        self._on_teardown: dict[object, Callable[[], None]] = {}
        self._on_idle: list[Callable[[], None]] = []
        self._tearing_down = False
        self._turn_scope: anyio.CancelScope | None = None
        self._runner_active = False
        self._parked = False
        self._idle: anyio.Event | None = None  # made only when someone waits for idle
        self._restored = False
        self._last_stop: StopReason = "completed"
        self._last_error: str | None = None
        self._log_length = 0
        self._fault: TetherError | None = None
        self._turn_item: _InboxItem | None = None
        self._ended: TurnEnded | None = None  # the end of the turn that ran last
        self._step: tuple[str, int] | None = None  # the model step in progress (current_step)
        self._resume: OpenTurn | None = None  # a cut turn that goes on when next driven
        self._unsaved: tuple[Event, ...] = ()
        self._told = 0  # how many of the unsaved events listeners have heard of
        # One append at a time: a store that awaits its writes (PostgreSQL) would otherwise
        # let two appends both carry the held events (stored twice). Fast: no checkpoint when
        # free, so a store that never awaits (SQLite) sees no new scheduling point.
        self._appending = anyio.Lock(fast_acquire=True)
        self._leased = False
        self._new_session = new_session
        self.compaction = CompactionPolicy()
        """When and how the history is compacted (``[agent.NAME] compaction``)."""
        self.compaction_strategy: CompactionStrategy | None = None
        """The plugin strategy that writes summaries; ``None``: the agent's model does."""
        self._earlier_answers = 0
        self._tally: tuple[int, int, int] | None = None  # (messages, tokens, of them counted)
        self._window: ContextWindow | bool | None = False  # False: not looked up yet
        self._delegation_note: Message | None = None
        self._compactions = 0

    # ---------------------------------------------------------------- lifecycle

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def cwd(self) -> Path:
        """The working directory its tools and skill providers act in (the process's when the
        agent was made, unless it was given one)."""
        cwd = self._cwd
        if isinstance(cwd, str):
            cwd = self._cwd = Path(cwd)
        return cwd

    @cwd.setter
    def cwd(self, value: Path) -> None:
        self._cwd = value

    @property
    def kernel(self) -> Kernel | None:
        """The frozen kernel the agent was composed from (``runtime.kernel``)."""
        return self.runtime.kernel if self.runtime is not None else None

    @property
    def name(self) -> str | None:
        """The agent preset this session runs."""
        return self.header.agent

    @property
    def model_spec(self) -> str | None:
        """The model spec this agent runs: the one it was composed with, else the one its
        session recorded; ``None`` when neither is known (a model object given directly)."""
        return self._model_spec or self.header.model

    @property
    def status(self) -> Literal["running", "idle"]:
        """``running`` while a turn runs or accepted messages wait to be claimed."""
        return "running" if self._runner_active else "idle"

    @property
    def messages(self) -> tuple[Message, ...]:
        """The history the model's next request starts from."""
        return tuple(self._history)

    @property
    def turns(self) -> int:
        return self._turns

    @property
    def in_turn(self) -> bool:
        """Whether a turn is open now (its steps running), not just woken to start one."""
        return self._turn_scope is not None

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
        descriptor): its tools, their call policy and its approvals (``deny``). They are
        applied here, on every route that restores it, and only ever narrow what the agent
        was composed with.
        """
        took_lease = False
        if log is None:
            if repair:
                await self._take_lease()
                took_lease = True
                try:
                    await self.store.take_mail(self.session_id)  # into the log, read with it
                    await self._record_model()
                    log = [stored.event for stored in await self.store.events(self.session_id)]
                except BaseException:
                    # Failed or cancelled before anything was rebuilt: nothing ran, so the
                    # session goes back to whoever drives it next (a kept lease would refuse
                    # every later attempt of this process).
                    await self._give_lease_back()
                    raise
            else:
                log = [stored.event for stored in await self.store.events(self.session_id)]
        else:
            self._leased = True
        folded = fold(log, seed_length=self.header.seed_length)
        try:
            pins = delegation_pins(self.header, folded.setup)
        except TetherError:
            if took_lease:
                await self._give_lease_back()  # nothing ran: leave the session to the next one
            raise
        if pins is not None:
            apply_pins(self, pins)
        self._log_length = folded.length
        self._history.extend(folded.history)
        self._earlier_answers = folded.earlier_answers
        self._delegation_note = folded.delegation_note
        self._compactions = len(folded.compactions)
        if folded.counted is not None:
            self._tally = (*folded.counted, folded.counted[1])
        self.holds_images = self.holds_images or any(m.images for m in folded.history)
        self._instruction_values.update(folded.instructions)
        self._turns = folded.turns
        for pending in folded.unclaimed:
            # A steer outlives the turn it was meant for only as a turn of its own; injected
            # context waits for the next step or turn, as it would have.
            item = _InboxItem(
                pending.message_id, pending.content, pending.source, pending.trace or {}
            )
            (self._injected if pending.delivery == "context" else self._inbox).append(item)
        self._restored = True
        open_turn = folded.open_turn if repair else None
        if open_turn is not None and self._resumable(open_turn):
            # Cut in a step whose open calls may all run again: the turn goes on when the
            # agent is next driven (its calls first), instead of being closed here.
            self._resume = open_turn
        elif open_turn is not None:
            events = closing_events(open_turn)
            await self._append(*events)
            for event in events[:-1]:
                self._history.append(event_to_message(event))  # type: ignore[arg-type]

    def _resumable(self, open_turn: OpenTurn) -> bool:
        """Whether a turn a crash cut can go on: it was cut in a tool step and every call left
        open is one of this agent's idempotent tools; or, when its runtime resumes cut turns
        (``Runtime.resume_cut_turns``: a cluster's workers), it was cut in a model step after
        its first (the step is asked again; a cut first step re-queues its message anyway)."""
        if open_turn.claim is None:
            return False
        if not open_turn.calls:
            return self.runtime is not None and self.runtime.resume_cut_turns
        for call in open_turn.calls:
            tool = self.tools.get(call.name)
            if tool is None or not tool.idempotent:
                return False
        return True

    async def _record_model(self) -> None:
        """Make the model this agent was composed with the session's recorded one, logging
        the change (a ``model`` descriptor with the old and new spec) when it replaces
        another. Runs with the lease held, before the log is read."""
        spec = self._model_spec
        if spec is None or spec == self.header.model:
            return
        change = DescriptorEvent(
            kind=MODEL_DESCRIPTOR, data={"old": self.header.model, "new": spec}
        )
        self.header = await self.store.set_model(self.session_id, spec, [change])
        log.info("session %s: model %s -> %s", self.session_id, change.data["old"], spec)

    async def _take_lease(self) -> None:
        """Become the session's one driver (``SESSION_BUSY`` if a live process is)."""
        await self.store.acquire(self.session_id)
        self._leased = True

    async def __aenter__(self) -> Agent:
        fresh = not self._restored and self._new_session
        if fresh:
            # A session its store just created (lease held, log empty) needs no reading.
            await self.restore(log=())
        elif not self._restored:
            await self.restore()
        elif not self._leased:
            await self._take_lease()  # a dormant agent entered again
        if self.runtime is not None:
            live = self.runtime.live_agents
            if live.get(self.session_id, self) is not self:
                raise StoreError(
                    ErrorCode.SESSION_CONFLICT,
                    f'session "{self.session_id}" is already open in this process',
                    remedy="send to the open agent instead of opening the session twice",
                )
            live[self.session_id] = self
        self._tearing_down = False
        try:
            if is_session_bound(self.model):  # a remote agent's model opens its connection
                await self.model.attach(self)
            self._group = anyio.create_task_group()
            await self._group.__aenter__()
            if self._keeps_sessions():
                self.start_job(keep_sessions, self.store, self._route_mail)
            if self._inbox:
                self._parked = True  # restored messages wait for the next waking message
            if not fresh or not self.store.durable:
                # Posted while it was dormant: they run now. A durable store's session created
                # a moment ago skips the read (a query): the process's keeper, which every
                # agent on a durable store has, finds its mail on its next round.
                await self.collect_mail()
        except BaseException as exc:
            await self._abandon_entry(exc)
            raise
        return self

    async def _abandon_entry(self, exc: BaseException) -> None:
        """Entering failed or was cancelled after the session was taken: undo it (the task
        group, the registration as open, the lease), so that the next attempt, in this process
        or another, finds the session as a crash would have left it."""
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            with contextlib.suppress(BaseException):
                await group.__aexit__(type(exc), exc, exc.__traceback__)
        runtime = self.runtime
        if runtime is not None and runtime.live_agents.get(self.session_id) is self:
            del runtime.live_agents[self.session_id]
        if self._leased:
            await self._give_lease_back()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._group is not None
        self._parked = True
        self._tearing_down = True
        if self._turn_scope is not None:
            self._turn_scope.cancel()
        if self._runner_active:
            # Let the cancelled turn record its end (turn/end, "cancelled" results) first.
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + TEARDOWN_TIMEOUT):
                await self.when_idle()
        if self._unsaved:
            with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
                await self._flush_held()
        # The group is cancelled only when something still runs in it (cancelling costs more
        # than the rest of the teardown), and before hosted children are told to stop: a job
        # waiting for a child's end is cancelled, not woken by the end the teardown causes.
        if self._jobs or self._runner_active:
            self._group.cancel_scope.cancel()
        for release in [*self._on_teardown.values()]:
            release()  # hosted children start their own teardown
        self._on_teardown.clear()
        try:
            return await self._group.__aexit__(*exc_info)
        except BaseExceptionGroup as group:
            body = exc_info[1]
            if body is not None and all(e is body for e in leaves(group)):
                return False  # the block's own exception, unwrapped: it propagates as raised
            raise
        finally:
            self._group = None
            self._runner_active = False
            self._set_idle()
            if self._leased:
                self._leased = False
                if anyio.current_effective_deadline() == -math.inf:
                    # Left because the task is cancelled: release anyway, shielded and bounded.
                    deadline = anyio.current_time() + TEARDOWN_TIMEOUT
                    with anyio.CancelScope(shield=True, deadline=deadline):
                        await self._release_lease()
                else:
                    await self._release_lease()
            if is_session_bound(self.model):
                with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
                    await self.model.detach(self)
            runtime = self.runtime
            if runtime is not None and runtime.live_agents.get(self.session_id) is self:
                del runtime.live_agents[self.session_id]

    async def _give_lease_back(self) -> None:
        """Release the lease this agent took, shielded and bounded (its caller may be
        cancelled), when entering the session failed before it was driven."""
        self._leased = False
        with anyio.CancelScope(shield=True), anyio.move_on_after(TEARDOWN_TIMEOUT):
            await self._release_lease()

    async def _release_lease(self) -> None:
        # If this fails, the lease expires, or its owner is seen to be gone.
        with contextlib.suppress(TetherError):
            await self.store.release(self.session_id)

    def _keeps_sessions(self) -> bool:
        """Whether this agent keeps the process's sessions: renews their leases and delivers
        mail other processes post to them. Only a durable store is shared with other
        processes, and one keeper per tree is enough: the agent whose parent is not open here."""
        if not self.store.durable:
            return False
        runtime = self.runtime
        if runtime is None:
            return True
        if runtime.keeps(self.store):
            return False  # the runtime keeps the process's sessions (inside Runtime.open)
        parent = self.header.parent_session
        return parent is None or parent not in runtime.live_agents

    async def _route_mail(self, session_id: str) -> None:
        """Hand the mail of ``session_id`` to its agent here (through the runtime, which
        restores a stored child under its open ancestor); mail for sessions this process does
        not drive is left for their owner."""
        if self.runtime is not None:
            await self.runtime.deliver_mail(self.store, session_id)
        elif session_id == self.session_id:
            await self.collect_mail()

    async def collect_mail(self) -> int:
        """Move the messages other processes posted to this session into its log and inbox
        (``store.take_mail``); they run as if sent here. How many there were."""
        if self._group is None or self._tearing_down or not self._leased:
            return 0  # left in the store for whoever drives the session next
        if self._fault is not None and self._fault.code in _FENCED:
            return 0
        posted = await self.store.take_mail(self.session_id)
        if not posted:
            return 0
        self._log_length += len(posted)
        wake = False
        for message in posted:
            for listener in self._listeners:
                listener(message)
            item = _InboxItem(
                message.message_id, message.content, message.source, message.trace or {}
            )
            if message.delivery == "context":
                self._injected.append(item)
            elif message.delivery == "step" and self._turn_scope is not None:
                self._steering.append(item)
            else:
                self._inbox.append(item)
                wake = True
        if wake:
            if not self._entered() or self._tearing_down:
                # Left while the store answered: the messages are in the log, accepted and
                # unclaimed, and in the inbox, parked; whoever enters the session next runs
                # them (a restore from the log, or this agent entered again and resumed).
                self._parked = True
            else:
                self._wake()
        return len(posted)

    def start_job(self, function: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``function(*args)`` in the agent's task group: a background job the agent owns,
        cancelled when the agent is left (``async with`` exits)."""
        self._require_open()
        assert self._group is not None
        self._jobs += 1
        self._group.start_soon(self._job, function, args)

    async def _job(self, function: Callable[..., Coroutine[Any, Any, Any]], args: Any) -> None:
        try:
            await function(*args)
        finally:
            self._jobs -= 1

    async def record(self, *events: Event) -> None:
        """Append events that are not part of the conversation (descriptors, such as what a
        remote child's connection did) to the log, telling listeners."""
        if any(not isinstance(e, DescriptorEvent) for e in events):
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                "record() takes descriptor events only; messages go through the inbox",
            )
        await self._append(*events)

    @property
    def tearing_down(self) -> bool:
        """Whether ``async with`` is being left (messages sent now are not run)."""
        return self._tearing_down

    @property
    def pending(self) -> int:
        """Accepted messages not yet claimed (queued turns and steers, parked ones too)."""
        return len(self._inbox) + len(self._steering)

    def on_idle(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` each time the agent goes idle; returns an unsubscribe function."""
        self._on_idle.append(callback)
        return lambda: self._on_idle.remove(callback) if callback in self._on_idle else None

    def on_teardown(self, key: object, release: Callable[[], None] | None) -> None:
        """Call ``release()`` when the agent is left, before its jobs are cancelled (a
        hosted child ends its own turn cleanly); ``None`` removes the callback of ``key``."""
        if release is None:
            self._on_teardown.pop(key, None)
        else:
            self._on_teardown[key] = release

    def listen(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``listener(event)`` for each event of the log, in order; returns an unsubscribe
        function. Events are stored before listeners hear of them, except the ones that open a
        turn or a step (``turn/start``, the claim, pre-step messages): those are heard when the
        step starts and stored with its answer, in one commit."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def listen_deltas(self, listener: Callable[[ModelDelta], None]) -> Callable[[], None]:
        """Call ``listener(delta)`` for each piece of the model's answers as it arrives (text,
        reasoning, tool-call arguments; ``retry`` when a step's request is sent again); returns
        an unsubscribe function. While any agent listens, its model's answers are streamed
        (:mod:`tether.models` streaming); deltas are never stored: the answer is, once, as an
        ``assistant/message`` event that :meth:`listen` hears."""
        self._delta_listeners.append(listener)
        return lambda: self._delta_listeners.remove(listener)

    def _hear_delta(self, delta: ModelDelta) -> None:
        if delta.kind == "text":
            self._streamed.append(delta.text)
        elif delta.kind == "retry":
            self._streamed.clear()  # what arrived before the retry is not part of the answer
        for listener in self._delta_listeners:
            try:
                listener(delta)
            except Exception:  # a display's bug never breaks the answer it shows
                log.exception("a delta listener of session %s failed", self.session_id)
        runtime = self.runtime
        if runtime is not None:
            for shared in runtime.delta_listeners:
                try:
                    shared(self, delta)
                except Exception:
                    log.exception("a runtime delta listener failed (session %s)", self.session_id)

    @property
    def current_step(self) -> tuple[str, int] | None:
        """The model step whose answer arrives now: the message id of the turn's message and
        the step's number in the turn (1 for the first); ``None`` between model requests. A
        delta listener reads it to say which answer a piece belongs to (a relay to other
        processes, :class:`tether.store.DeltaRelay`)."""
        return self._step

    def _streams(self) -> bool:
        """Whether anyone listens to this agent's deltas (its answers are streamed then)."""
        if self._delta_listeners:
            return True
        runtime = self.runtime
        return runtime is not None and bool(runtime.delta_listeners)

    async def _append(self, *events: Event, hold: bool = False) -> None:
        """Store ``events`` (after any held ones), then tell the listeners.

        With ``hold``, events the store refused for a passing reason (``STORE_BUSY``) are kept
        and written first by the next append: what a turn produced (the model's answer, a tool
        result) is never lost once received. A lost lease (``SESSION_BUSY``, another process
        owns the session now) is final: the agent writes nothing more.
        """
        async with self._appending:
            if self._fault is not None and self._fault.code in _FENCED:
                raise self._fault
            held = len(self._unsaved)
            batch = (*self._unsaved, *events) if held else events
            try:
                await self.store.append(self.session_id, batch)
            except TetherError as exc:
                if exc.code in _FENCED:
                    self._unsaved, self._told = (), 0
                    self._fault = exc
                    self._parked = True
                elif hold:
                    # Deferred while it was written: those follow what it held.
                    self._unsaved = (*batch, *self._unsaved[held:])
                    self._told = min(self._told, held)
                raise
            told = min(self._told, held)
            if held:
                # Only what this batch held is stored: what was deferred meanwhile stays held.
                self._unsaved, self._told = self._unsaved[held:], max(0, self._told - held)
                if self._fault is not None and self._fault.code not in _FENCED:
                    self._fault = None  # what it held is stored: the agent may take turns again
            self._log_length += len(batch)
            for event in batch[told:]:
                for listener in self._listeners:
                    listener(event)

    def _defer(self, *events: Event) -> None:
        """Store ``events`` with the next append (what opens a turn or a step waits for the
        model's answer, so that both are one commit); listeners hear of them now."""
        tell = self._told == len(self._unsaved)  # in order: nothing untold before them
        self._unsaved = (*self._unsaved, *events)
        if tell:
            self._told = len(self._unsaved)
            for event in events:
                for listener in self._listeners:
                    listener(event)

    async def _flush_held(self) -> None:
        """Try once more to store what a turn produced and the store refused."""
        if self._unsaved:
            try:
                await self._append()
            except TetherError as exc:
                if self._fault is None:
                    self._fault = exc

    # ---------------------------------------------------------------- inbox

    def _entered(self) -> bool:
        """Inside ``async with agent:`` (read again after an await: it may have been left)."""
        return self._group is not None

    def _require_open(self) -> None:
        if self._group is None:
            raise RuntimeError("use the agent inside `async with agent:` before sending to it")

    async def followup(
        self,
        content: str,
        *,
        source: MessageSource | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        """Queue ``content`` as a later turn (FIFO); returns once it is durably accepted.

        ``trace``: the sender's trace context (W3C keys, ``traceparent``...) when it came from
        another process (an ACP prompt's ``_meta``); default: the caller's, from the agent's
        tracer (:class:`Tracer`)."""
        self._require_open()
        item = await self._accept(content, source or _USER_SOURCE, "turn", trace)
        self._inbox.append(item)
        self._wake()
        return item.message_id

    async def steer(self, content: str, *, source: MessageSource | None = None) -> str:
        """A message the running turn sees at its next step; an idle agent takes it as a turn.

        A steer that arrives after the turn's last step becomes the next turn instead.
        """
        self._require_open()
        source = source or MessageSource(kind="steer")
        if not self._runner_active or self._turn_scope is None:
            return await self.followup(content, source=source)
        item = await self._accept(content, source, "step")
        self._steering.append(item)
        return item.message_id

    async def inject(self, content: str, *, source: MessageSource | None = None) -> str:
        """Add context without waking the agent: the next step (or turn) sees it."""
        self._require_open()
        source = source or MessageSource(kind="inject")
        if self._turn_scope is None:
            item = _InboxItem(_new_id("msg"), replace_surrogates(content), source)
            await self._commit_message(item)
        else:
            item = await self._accept(content, source, "context")
            self._injected.append(item)
        return item.message_id

    async def _accept(
        self,
        content: str,
        source: MessageSource,
        delivery: Literal["turn", "step", "context"],
        trace: Mapping[str, str] | None = None,
    ) -> _InboxItem:
        """Record a message durably before it is acknowledged; its claim comes later."""
        carried = dict(trace) if trace else carry_trace(self)
        item, accepted = _acceptance(content, source, delivery, carried)
        await self._append(accepted)
        return item

    async def run(self, content: str, *, source: MessageSource | None = None) -> StopReason:
        """``followup`` then wait until idle; the stop reason of the last turn.

        When the agent is idle, the turn runs inline, in the caller's task (no task is started
        for it): cancelling the caller then aborts the turn, which still records its end."""
        self._require_open()
        source = source or _USER_SOURCE
        if self._runner_active:
            self._inbox.append(await self._accept(content, source, "turn"))
            self._parked = False
            await self.when_idle()  # the running drain takes it
        else:
            # Nobody is told the message was accepted before its turn ends, so its acceptance
            # is stored with the turn's first answer, in the commit that stores its claim: a
            # crash before that commit loses the call whole, as a crash before it would have.
            item, accepted = _acceptance(content, source, "turn", carry_trace(self))
            self._defer(accepted)
            self._inbox.append(item)
            self._parked = False
            self._runner_active = True
            await self._drain()
        return self._last_stop

    @property
    def fault(self) -> TetherError | None:
        """A store failure that stopped the agent (its last turn could not be recorded)."""
        return self._fault

    @property
    def last_stop_reason(self) -> StopReason:
        """The stop reason of the most recent turn."""
        return self._last_stop

    @property
    def log_length(self) -> int:
        """How many events the session's log holds as far as this agent knows (what it read on
        restore plus what it appended): a later read finds more only if someone else wrote."""
        return self._log_length

    @property
    def last_error(self) -> str | None:
        """Why the most recent turn ended with ``error`` (its ``turn/end.error``), if it did."""
        return self._last_error

    async def when_idle(self) -> None:
        """Wait until no turn runs and no accepted message waits."""
        if not self._runner_active:
            return
        if self._idle is None:
            self._idle = anyio.Event()
        await self._idle.wait()

    def _set_idle(self) -> None:
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.set()

    async def cancel(self, *, keep_inbox: bool = False) -> None:
        """Abort the running turn (stop reason ``aborted``).

        With ``keep_inbox`` the queued messages stay parked until the next waking message;
        without it they are discarded (``inbox/discarded``).
        """
        self._parked = True
        resume, self._resume = self._resume, None
        if resume is not None:  # a cut turn waiting to go on: closed as a restore would
            events = closing_events(resume)
            await self._append(*events)
            for event in events[:-1]:
                self._history.append(event_to_message(event))  # type: ignore[arg-type]
        if not keep_inbox:
            dropped, self._inbox = [*self._inbox, *self._steering], deque()
            self._steering.clear()
            if dropped:
                await self._append(*(InboxDiscarded(message_id=i.message_id) for i in dropped))
        if self._turn_scope is not None:
            self._turn_scope.cancel()

    def interrupt(self) -> bool:
        """``cancel(keep_inbox=True)`` from synchronous code: abort the running turn now; queued
        messages stay parked until the next waking message. Whether a turn was running (and
        not already being stopped)."""
        self._parked = True
        scope = self._turn_scope
        if scope is None or scope.cancel_called:
            return False
        scope.cancel()
        return True

    def resume(self) -> None:
        """Run the messages a restore or an interrupt left parked, without sending one."""
        self._require_open()
        if self._inbox or self._resume is not None:
            self._wake()

    async def run_parked(self) -> None:
        """``resume`` in the caller's task: run the messages a restore or an interrupt left
        parked, inline when the agent is idle (no task is started), and return once it is
        idle. A host that has a task for the agent anyway (a hosted child) saves one."""
        self._require_open()
        self._parked = False
        if self._runner_active:
            await self.when_idle()
        elif self._inbox or self._resume is not None:
            self._runner_active = True
            await self._drain()

    def _wake(self) -> None:
        if self._group is None:
            raise RuntimeError("use the agent inside `async with agent:` before sending to it")
        self._parked = False
        if self._runner_active:
            return  # the drain looks at the inbox again before it goes idle
        self._runner_active = True
        self._group.start_soon(self._drain)

    async def _drain(self) -> None:
        """Run the inbox's turns until it is empty or parked: in a task of the agent's group
        (woken by a message), or inline in the caller's task (``run`` on an idle agent)."""
        try:
            resume, self._resume = self._resume, None
            if resume is not None and resume.claim is not None:
                claim = resume.claim  # the turn a crash cut goes on before anything new
                await self._run_turn(
                    _InboxItem(claim.message_id, claim.content, claim.source), resume=resume
                )
            while self._inbox and not self._parked:
                item = self._inbox.popleft()
                if item.source.kind == "notice":
                    # Notices queued behind it join its turn's first step: an idle agent
                    # told of many children's ends at once takes one turn, not one each.
                    while self._inbox and self._inbox[0].source.kind == "notice":
                        self._steering.append(self._inbox.popleft())
                await self._run_turn(item)
        finally:
            self._runner_active = False
            self._set_idle()
            for callback in [*self._on_idle]:
                callback()

    async def _commit_message(self, item: _InboxItem) -> None:
        await self._append(
            UserMessage(message_id=item.message_id, content=item.content, source=item.source)
        )
        self._history.append(Message(role="user", content=item.content))

    async def preview(self, prompt: str | None = None) -> tuple[ModelRequest, tuple[Message, ...]]:
        """The first request the next turn would send, without running or logging anything.

        Returns the request and the messages in it that are not in the log yet (dynamic
        instructions that would change, ``prompt``, pre-step messages). Resolvers and pre-step
        hooks are called, so they should not have side effects.
        """
        turn = self._turns + 1
        context = InstructionContext(self.name, self.session_id, turn)
        instructions = await changed_instructions(
            self.instructions, self._instruction_values, context
        )
        pending = [event_to_message(event) for event in instructions]
        if prompt is not None:
            pending.append(Message(role="user", content=prompt))
        step = StepContext(self, turn, 1, prompt, _USER_SOURCE)
        pending += [event_to_message(m) for m in await pre_step_messages(self.pre_steps, step)]
        messages = [*self._history, *(m for m in pending if m is not None)]
        request = build_request(self, messages, self.limits.max_output_tokens)
        pending = [m for m in pending if m is not None]
        return request, tuple(pending)

    # ---------------------------------------------------------------- context window

    @property
    def window(self) -> ContextWindow | None:
        """The model's context window (``None``: unknown, no budget is kept); see
        :func:`tether.models.window_for`."""
        window = self._window
        if window is False:
            found = window_for(self.model_spec, self.model, self.limits.context_window)
            self._window = found
            return found
        return window  # type: ignore[return-value]

    @property
    def compactions(self) -> int:
        """How many times the session's history was compacted. A pre-step hook that appends
        something once (a catalog) appends it again when this grows: what it appended before
        is no longer in :attr:`messages`."""
        return self._compactions

    @property
    def turn_message(self) -> str | None:
        """The message of the running turn, or of the last turn this agent ran (a
        compaction that keeps only a turn's last steps restates it before them)."""
        item = self._turn_item
        return item.content if item is not None else None

    @property
    def earlier_answers(self) -> int:
        """Answers of the session a compaction summary replaced (not in :attr:`messages`)."""
        return self._earlier_answers

    @property
    def delegation_note(self) -> Message | None:
        """What a delegated child was told about its task (its log's delegation note), which
        a compaction restates; ``None`` for a root session."""
        return self._delegation_note

    @property
    def instruction_values(self) -> Mapping[str, str]:
        """The current value of each dynamic instruction slot."""
        return dict(self._instruction_values)

    def base_tokens(self) -> int:
        """The estimated tokens of the base prompt and the tool list."""
        return schema_tokens(self.system, self.tools.schemas(self))

    def context_tokens(self) -> int:
        """The tokens the next request carries: what the provider counted for the last one
        (its input and output), plus an estimate of what was appended since
        (:func:`tether.models.message_tokens`); all estimated when nothing was counted yet."""
        return self.context_count()[0]

    def context_count(self) -> tuple[int, int]:
        """``(tokens, counted)``: :meth:`context_tokens`, and how many of them the provider
        counted (the rest is estimated)."""
        history = self._history
        tally = self._tally
        if tally is None or tally[0] > len(history):
            tally = (0, self.base_tokens(), 0)
        length, tokens, counted = tally
        if length < len(history):
            tokens += messages_tokens(itertools.islice(history, length, None))
            tally = (len(history), tokens, counted)
        self._tally = tally
        return tokens, counted

    async def compact(self) -> CompactionEvent | None:
        """Compact the session now (``manual``; docs/compaction.md): waits until no turn
        runs, then replaces the history with a summary and the kept tail. The stored
        ``compaction`` event, or ``None`` when there was nothing to replace. Raises
        ``COMPACTION_FAILED`` when compaction is ``off`` or no summary could be written (the
        history stays whole then)."""
        self._require_open()
        if self.compaction.mode == "off":
            raise AgentError(
                ErrorCode.COMPACTION_FAILED,
                f"compaction is off for agent {self.name or '(global scope)'}",
                remedy='set compaction = "manual" (or "auto") in the agent\'s table',
            )
        while self._runner_active:
            await self.when_idle()
        self._runner_active = True
        try:
            return await compact(self, "manual")
        finally:
            self._runner_active = False
            if self._inbox and not self._parked:
                self._wake()  # what came meanwhile runs now; its waiters wait for it
            else:
                self._set_idle()

    @property
    def unstored_messages(self) -> int:
        """How many of the last :attr:`messages` come from events not stored yet (what opens
        a turn or a step waits for the step's answer; what a busy store refused is held)."""
        return sum(1 for event in self._unsaved if event_to_message(event) is not None)

    @property
    def unstored_instruction_slugs(self) -> frozenset[str]:
        """The instruction slots whose new value is among the events not stored yet."""
        return frozenset(e.slug for e in self._unsaved if isinstance(e, InstructionEvent))

    async def apply_compaction(self, event: CompactionEvent, planned: int) -> CompactionEvent:
        """Store ``event``, planned on the first ``planned`` messages of the history, and make
        its view the history; the event as stored.

        What was stored while its summary was written (a steer's acceptance stores what the
        turn held; an injected message, a task's result) is added to what it keeps, so the
        log's fold and this agent agree. What is still not stored (:attr:`unstored_messages`)
        follows it: the event is stored alone, before those events, so a crash before the
        step's answer leaves the turn unopened in the log, its message to run again."""
        if self._fault is not None and self._fault.code in _FENCED:
            raise self._fault
        later = self._history[planned:]
        unstored = self.unstored_messages
        stored, following = later[: len(later) - unstored], later[len(later) - unstored :]
        if stored:
            event = event.model_copy(update={"kept": (*event.kept, *stored)})
        view = compacted_view(event)
        event = event.model_copy(update={"tokens_after": messages_tokens(view)})
        try:
            await self.store.append(self.session_id, (event,))
        except TetherError as exc:
            if exc.code in _FENCED:
                self._unsaved, self._told = (), 0
                self._fault = exc
                self._parked = True
            raise
        self._log_length += 1
        for listener in self._listeners:
            listener(event)
        self._history[:] = [*view, *following]
        self._earlier_answers = event.earlier_answers
        self._tally = None
        self._compactions += 1
        self.holds_images = any(message.images for message in self._history)
        return event

    # ---------------------------------------------------------------- the turn

    async def _run_turn(self, item: _InboxItem, resume: OpenTurn | None = None) -> None:
        """Run the turn of ``item``; with ``resume``, go on with the turn a crash cut (its
        open calls, all idempotent, run again first; the log holds everything before)."""
        tracer = self.tracer
        if tracer is None:
            await self._turn(item, resume)
            return
        start = TurnStart(
            turn=self._turns + 1 if resume is None else resume.turn,
            message_id=item.message_id,
            content=item.content,
            source=item.source,
            trace=item.trace,
            resumed=resume is not None,
        )
        with tracing(tracer), tracer.turn(self, start) as ended:
            try:
                await self._turn(item, resume)
            finally:
                if self._ended is not None:
                    ended(self._ended)

    async def _turn(self, item: _InboxItem, resume: OpenTurn | None) -> None:
        self._turn_item = item
        self._ended = None
        if resume is None:
            self._turns += 1
        turn = self._turns if resume is None else resume.turn
        # A resumed turn counts the steps, and the usage, it stored before it was cut.
        usage = _NO_USAGE if resume is None or not resume.steps else resume.usage
        steps = 0 if resume is None else resume.steps
        stop: StopReason = "error"
        error: str | None = None
        final: AssistantMessage | None = None
        pending_calls: tuple[ToolCall, ...] = ()
        claimed = False
        # Steps in a row that make the same calls (a small model may loop on one call).
        repeats = RepeatWatch(self.limits.max_repeated_calls)
        scope = anyio.CancelScope()
        outer: BaseException | None = None
        try:
            with scope:
                self._turn_scope = scope
                try:
                    # One batch opens the turn: turn/start, changed instructions, then the message
                    # that started it. Its user/message is the claim. The batch is stored with the
                    # first step's answer, in one commit: a crash before that re-queues the message
                    # (its unanswered model request changed nothing), and a one-step turn costs one
                    # commit, not three (each an fsync with synchronous = FULL).
                    if resume is None:
                        instructions = await self._resolve_instructions(turn)
                        claim = UserMessage(
                            message_id=item.message_id, content=item.content, source=item.source
                        )
                        self._defer(
                            TurnStarted(turn=turn, message_id=item.message_id),
                            *instructions,
                            claim,
                        )
                        for event in instructions:
                            self._instruction_values[event.slug] = event.content
                            self._history.append(event_to_message(event))  # type: ignore[arg-type]
                        self._history.append(Message(role="user", content=item.content))
                        claimed = True
                    else:
                        claimed = True  # opened and claimed before the crash
                        pending_calls = resume.calls
                        await self._run_tools(resume.calls)
                        pending_calls = ()
                    while True:
                        if steps >= self.limits.max_steps:
                            stop = "max-tokens"
                            break
                        steps += 1
                        await self._before_step(turn, steps)
                        self._step = (item.message_id, steps)
                        response = storable_response(await self._request(steps, usage))
                        self._step = None
                        usage = response.usage if usage is _NO_USAGE else usage + response.usage
                        message = AssistantMessage(
                            content=response.text,
                            tool_calls=response.tool_calls,
                            usage=response.usage,
                            finish_reason=response.finish_reason,
                        )
                        self._history.append(
                            Message(
                                role="assistant",
                                content=response.text,
                                tool_calls=response.tool_calls,
                            )
                        )
                        if response.usage.input_tokens:  # the provider counted this much
                            counted = response.usage.input_tokens + response.usage.output_tokens
                            self._tally = (len(self._history), counted, counted)
                        over_budget = (
                            self.limits.max_output_tokens is not None
                            and usage.output_tokens >= self.limits.max_output_tokens
                        )
                        if not response.tool_calls:
                            stop = FINISH_TO_STOP.get(response.finish_reason, "error")
                            final = message  # stored together with turn/end below
                            break
                        pending_calls = response.tool_calls
                        verdict = repeats.see(response.tool_calls)
                        if verdict == "stop":
                            # The same calls again after the notice: answered, not run.
                            refused = [
                                ToolResult(
                                    tool_call_id=call.id,
                                    name=call.name,
                                    content=REPEAT_REFUSED,
                                    is_error=True,
                                )
                                for call in response.tool_calls
                            ]
                            await self._append(message, *refused, hold=True)
                            for result in refused:
                                self._history.append(event_to_message(result))  # type: ignore[arg-type]
                            pending_calls = ()
                            stop, error = "error", str(repeats.error(self.name))
                            break
                        await self._append(message, hold=True)
                        await self._run_tools(response.tool_calls)
                        pending_calls = ()
                        if verdict == "notice":
                            notice = ContextMessage(
                                role="user", content=repeats.notice(), origin=REPEAT_ORIGIN
                            )
                            await self._append(notice, hold=True)
                            self._history.append(Message(role="user", content=notice.content))
                        if over_budget:
                            stop = "max-tokens"
                            break
                except ModelError as exc:
                    stop, error = "error", str(exc)
                except Exception as exc:
                    # A plugin's instruction resolver, pre-step hook or tool runner failed outside
                    # a tool call: the turn ends with "error" and says why; the agent lives on.
                    stop, error = "error", f"{type(exc).__name__}: {exc}"
                finally:
                    self._turn_scope = None
                    self._step = None
        except anyio.get_cancelled_exc_class() as exc:
            outer = exc  # the caller of an inline turn was cancelled: the turn is aborted
        if scope.cancelled_caught or outer is not None:
            stop = "aborted"
            if final is None and self._streamed:
                final = self._partial_answer()
        self._streamed.clear()
        closing = self._closing_events(item, claimed, final, pending_calls)
        self._ended = TurnEnded(turn=turn, stop_reason=stop, usage=usage, steps=steps, error=error)
        closing.append(self._ended)
        self._last_stop = stop
        self._last_error = error
        try:
            if scope.cancel_called or outer is not None:
                # A cancelled turn still records how it ended: shielded, and bounded in time.
                deadline = anyio.current_time() + TEARDOWN_TIMEOUT
                with anyio.CancelScope(shield=True, deadline=deadline):
                    await self._append(*closing, hold=True)
            else:
                await self._append(*closing, hold=True)
        except TetherError as exc:
            # The store refused the turn's end: the agent stops taking turns and says why
            # through `fault`. A passing fault (a locked store) keeps the turn's events, which
            # the next write stores first; after a lost lease (another process owns the
            # session) it writes nothing more.
            self._fault = exc
            self._last_stop = "error"
            self._parked = True
        if outer is not None:
            self._parked = True  # what is queued waits for the next waking message
            raise outer

    def _partial_answer(self) -> AssistantMessage:
        """What a cancelled stream delivered of its answer, kept and marked ``partial`` (its
        tool calls, incomplete, are not)."""
        text = replace_surrogates("".join(self._streamed))
        self._history.append(Message(role="assistant", content=text))
        return AssistantMessage(content=text, partial=True)

    def _closing_events(
        self,
        item: _InboxItem,
        claimed: bool,
        final: AssistantMessage | None,
        pending_calls: tuple[ToolCall, ...],
    ) -> list[Event]:
        """What a turn appends as it ends, before ``turn/end``."""
        closing: list[Event] = []
        if not claimed:  # ended before the turn opened: open it now and keep the message
            closing.append(TurnStarted(turn=self._turns, message_id=item.message_id))
            closing.append(
                UserMessage(message_id=item.message_id, content=item.content, source=item.source)
            )
            self._history.append(Message(role="user", content=item.content))
        if final is not None:
            closing.append(final)
        if pending_calls:
            # Only the calls of the interrupted step can be open; results are never older.
            recent = self._history[-len(pending_calls) :]
            answered = {m.tool_call_id for m in recent if m.role == "tool"}
            for call in pending_calls:
                if call.id not in answered:
                    result = ToolResult(
                        tool_call_id=call.id,
                        name=call.name,
                        content=UNFINISHED_CALL,
                        is_error=True,
                    )
                    closing.append(result)
                    self._history.append(event_to_message(result))  # type: ignore[arg-type]
        self._requeue_late_steering()
        closing.extend(self._drain_pending_messages())  # late injected context is kept
        return closing

    def _requeue_late_steering(self) -> None:
        """Steers that arrived after the last step of a turn become the next turns, first."""
        for item in reversed(self._steering):
            self._inbox.appendleft(item)
        self._steering.clear()

    def _drain_pending_messages(self) -> list[Event]:
        """Steering and injected messages, claimed for the step about to run."""
        events: list[Event] = []
        for item in [*self._steering, *self._injected]:
            events.append(
                UserMessage(message_id=item.message_id, content=item.content, source=item.source)
            )
            self._history.append(Message(role="user", content=item.content))
        self._steering.clear()
        self._injected.clear()
        return events

    async def _resolve_instructions(self, turn: int) -> list[InstructionEvent]:
        """The instruction events whose value changed; applied once they are stored."""
        if not self.instructions:
            return []
        context = InstructionContext(self.name, self.session_id, turn)
        return await changed_instructions(self.instructions, self._instruction_values, context)

    async def _before_step(self, turn: int, step: int) -> None:
        if not (self._steering or self._injected or self.pre_steps):
            return
        events = self._drain_pending_messages()
        item = self._turn_item
        if self.pre_steps:
            context = StepContext(
                self,
                turn,
                step,
                item.content if item is not None else None,
                item.source if item is not None else None,
            )
            for message in await pre_step_messages(self.pre_steps, context):
                events.append(message)
                if isinstance(message, ContextMessage):
                    self._history.append(Message(role=message.role, content=message.content))
        if events:
            self._defer(*events)  # stored with the step's answer

    async def _request(self, step: int, usage: Usage) -> ModelResponse:
        budget = self.limits.max_output_tokens
        remaining = None if budget is None else max(budget - usage.output_tokens, 1)
        window = self.window
        if window is not None:
            await self._fit(window, remaining)
        try:
            return await self._send(step, build_request(self, self._history, remaining))
        except ModelError as exc:
            # The provider counted more than the estimate: compact once, and ask again.
            if exc.code != ErrorCode.CONTEXT_WINDOW_EXCEEDED or self.compaction.mode != "auto":
                raise
            if await compact(self, "overflow") is None:
                raise
        return await self._send(step, build_request(self, self._history, remaining))

    async def _send(self, step: int, request: ModelRequest) -> ModelResponse:
        tracer = self.tracer
        if tracer is None:
            return await self._ask(request)
        with tracer.model_request(self, step, request) as answered:
            response = await self._ask(request)
            answered(response)
            return response

    async def _ask(self, request: ModelRequest) -> ModelResponse:
        if not self._streams():
            return await request_with_retries(self.model, request, self.limits)
        self._streamed.clear()
        response = await request_with_retries(self.model, request, self.limits, self._hear_delta)
        self._streamed.clear()
        return response

    async def _fit(self, window: ContextWindow, remaining: int | None) -> None:
        """Make the next request fit ``window``: compact at the threshold (``auto``); a request
        that would still not fit is never sent (``CONTEXT_WINDOW_EXCEEDED``)."""
        budget = window.budget(remaining)
        tokens = self.context_tokens()
        policy = self.compaction
        limit = budget
        if policy.mode == "auto":
            limit = min(budget, int(window.tokens * policy.threshold))
        if tokens <= limit:
            return
        if policy.mode == "auto":
            await compact(self, "auto")
            tokens = self.context_tokens()
        if tokens <= budget:
            return
        if policy.mode == "auto":
            remedy = (
                "even compacted, the base prompt, the tools and the latest messages do not "
                "fit: use a model with a larger window, or fewer tools"
            )
        elif policy.mode == "manual":
            remedy = (
                "compact the session (/compact in tether run, tether sessions compact ID, "
                'Agent.compact()), or set compaction = "auto"'
            )
        else:
            remedy = 'compaction is off: set compaction = "auto" (or "manual") for the agent'
        raise ModelError(
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            f"the next request of session {self.session_id} would carry about {tokens} tokens, "
            f"more than the {budget} its model's context window allows ({window.tokens} "
            f"tokens, {window.tokens - budget} kept for the answer); it was not sent",
            remedy=remedy,
        )

    async def _run_tools(self, calls: Sequence[ToolCall]) -> None:
        tracer = self.tracer

        async def run(call: ToolCall) -> None:
            if tracer is None:
                result = _storable_result(await run_tool(self, call))
            else:
                with tracer.tool_call(self, call) as done:
                    result = _storable_result(await run_tool(self, call))
                    done(result)
            # Durable as soon as it exists: a crash while a sibling still runs keeps it.
            await self._append(result, hold=True)
            self._history.append(event_to_message(result))  # type: ignore[arg-type]
            if result.images:
                self.holds_images = True

        await run_in_batches(self, calls, run)


def _acceptance(
    content: str,
    source: MessageSource,
    delivery: Literal["turn", "step", "context"],
    trace: dict[str, str] | None = None,
) -> tuple[_InboxItem, InboxAccepted]:
    """A message for the inbox and the event that records its acceptance (with the trace
    context its sender carried, :func:`carry_trace`)."""
    content = replace_surrogates(content)
    item = _InboxItem(_new_id("msg"), content, source, trace or {})
    accepted = InboxAccepted(
        message_id=item.message_id,
        content=content,
        source=source,
        delivery=delivery,
        trace=trace,
    )
    return item, accepted


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
) -> SessionHeader:
    """A header for a new session (id ``ses_...`` unless given)."""
    return SessionHeader(
        id=session_id or _new_id("ses"),
        created_at=time.time(),
        label=label,
        agent=agent,
        parent_session=parent_session,
        origin=origin,
        delegation_depth=delegation_depth,
        seed_length=seed_length,
        model=model,
    )
