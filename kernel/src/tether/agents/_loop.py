"""An agent's turn loop: it claims the inbox's messages and runs their turns (``agent.loop``).

A turn: the loop claims a message (``user/message``, ``turn/start``) -> per step: queued
steering and injected messages, then pre-step hooks, are appended -> the budget makes the
request fit -> one model request -> tool calls run (safe ones concurrently) -> results
appended -> until an answer without tool calls or a limit -> ``turn/end`` with a stop reason.
The loop runs in a task of the agent's group (woken by a message), or inline in the caller's
task (``Agent.run`` on an idle agent, :meth:`TurnLoop.run_parked`).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from ..errors import AgentError, ErrorCode
from ..models import Message, ModelDelta, ModelRequest
from ..store import CompactionEvent, StopReason
from ..store.replay import OpenTurn, event_to_message
from ._inbox import USER_SOURCE, InboxItem
from ._instructions import InstructionContext
from ._repair import closing_events
from ._step import StepContext, build_request, changed_instructions, pre_step_messages
from ._stream import AnswerStream
from ._turn import Turn

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("TurnLoop",)


async def _nothing() -> None:
    return None


class TurnLoop:
    """The turns of one agent: which runs, how it ends, who waits for the agent to be idle."""

    __slots__ = (
        "_idle",
        "_on_idle",
        "_owner",
        "_resume",
        "closing",
        "group",
        "last_error",
        "last_stop_reason",
        "parked",
        "running",
        "stream",
        "turn",
        "turns",
    )

    def __init__(self, agent: Agent) -> None:
        self._owner = weakref.ref(agent)
        self.group: TaskGroup | None = None
        """The task group woken turns and the agent's jobs run in (while it is entered)."""
        self.closing = False
        """Whether ``async with`` is being left (messages sent now are not run)."""
        self.running = False
        """Whether a turn runs or accepted messages wait to be claimed (``status``)."""
        self.parked = False
        """Whether queued messages wait for the next waking message (a restore, an
        interrupt)."""
        self.turns = 0
        """Turns the session has taken."""
        self.last_stop_reason: StopReason = "completed"
        """The stop reason of the most recent turn."""
        self.last_error: str | None = None
        """Why the most recent turn ended with ``error`` (its ``turn/end.error``), if it did."""
        self._idle: anyio.Event | None = None  # made only when someone waits for idle
        self._resume: OpenTurn | None = None  # a cut turn that goes on when next driven
        self.turn: Turn | None = None
        """The turn that runs now, or that ran last."""
        self.stream: AnswerStream | None = None
        """The delta listeners and the answer streaming now (made when first needed)."""
        self._on_idle: tuple[Callable[[], None], ...] = ()

    # ---------------------------------------------------------------- state

    @property
    def _agent(self) -> Agent:
        """The agent it works for, held weakly: the agent holds this, and a cycle would leave
        every finished agent (its history, its turn) to the cyclic collector."""
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    @property
    def in_turn(self) -> bool:
        """Whether a turn is open now (its steps running), not just woken to start one."""
        return self.turn is not None and self.turn.scope is not None

    @property
    def current_step(self) -> tuple[str, int] | None:
        """The model step whose answer arrives now: the message id of the turn's message and
        the step's number in the turn (1 for the first); ``None`` between model requests. A
        delta listener reads it to say which answer a piece belongs to (a relay to other
        processes, :class:`tether.store.DeltaRelay`)."""
        return self.turn.step if self.turn is not None else None

    @property
    def turn_message(self) -> str | None:
        """The message of the running turn, or of the last turn this agent ran (a
        compaction that keeps only a turn's last steps restates it before them)."""
        return self.turn.item.content if self.turn is not None else None

    def on_idle(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` each time the agent goes idle; returns an unsubscribe function."""
        self._on_idle = (*self._on_idle, callback)

        def unsubscribe() -> None:
            self._on_idle = tuple(c for c in self._on_idle if c is not callback)

        return unsubscribe

    def listen_deltas(self, listener: Callable[[ModelDelta], None]) -> Callable[[], None]:
        """See :meth:`tether.agents.Agent.listen_deltas`."""
        if self.stream is None:
            self.stream = AnswerStream(self._agent)
        return self.stream.listen(listener)

    def tool_progress(self, call_id: str, tool: str, text: str) -> None:
        """A ``tool_progress`` delta (:meth:`tether.agents.ToolContext.progress`) to the
        agent's delta listeners and the runtime's; nothing when nobody listens."""
        delta = ModelDelta("tool_progress", text, name=tool or None, call_id=call_id)
        stream = self.stream
        if stream is None:
            runtime = self._agent.runtime
            if runtime is None or not runtime.delta_listeners:
                return
            stream = self.stream = AnswerStream(self._agent)
        stream.hear(delta)

    # ---------------------------------------------------------------- driving

    @property
    def open(self) -> bool:
        """Whether the agent is entered and not being left (messages sent now run)."""
        return self.group is not None and not self.closing

    def require_open(self) -> TaskGroup:
        """The agent's task group; ``RuntimeError`` when the agent is not entered."""
        group = self.group
        if group is None:
            raise RuntimeError("use the agent inside `async with agent:` before sending to it")
        return group

    def wake(self) -> None:
        """Run the queued messages in a task of the agent's group (unless a drain runs)."""
        group = self.require_open()
        self.parked = False
        if self.running:
            return  # the drain looks at the inbox again before it goes idle
        self.running = True
        group.start_soon(self.drain)

    async def when_idle(self) -> None:
        """Wait until no turn runs and no accepted message waits."""
        if not self.running:
            return
        if self._idle is None:
            self._idle = anyio.Event()
        await self._idle.wait()

    def set_idle(self) -> None:
        """Wake whoever waits for idle."""
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.set()

    def resume(self) -> None:
        """Run the messages a restore or an interrupt left parked, without sending one."""
        self.require_open()
        if self._agent.inbox.queued or self._resume is not None:
            self.wake()

    def run_parked(self) -> Awaitable[None]:
        """``resume`` in the caller's task: run the messages a restore or an interrupt left
        parked, inline when the agent is idle (no task is started), and return once it is
        idle. A host that has a task for the agent anyway (a hosted child) saves one (and
        the drain is awaited by the caller itself: no frame is spent here)."""
        self.require_open()
        self.parked = False
        if self.running:
            return self.when_idle()
        if self._agent.inbox.queued or self._resume is not None:
            self.running = True
            return self.drain()
        return _nothing()

    def interrupt(self) -> bool:
        """Abort the running turn now; queued messages stay parked until the next waking
        message. Whether a turn was running (and not already being stopped)."""
        self.parked = True
        scope = self.turn.scope if self.turn is not None else None
        if scope is None or scope.cancel_called:
            return False
        scope.cancel()
        return True

    async def cancel(self, *, keep_inbox: bool = False) -> None:
        """See :meth:`tether.agents.Agent.cancel`."""
        agent = self._agent
        self.parked = True
        resume, self._resume = self._resume, None
        if resume is not None:  # a cut turn waiting to go on: closed as a restore would
            await self.close_cut(resume)
        if not keep_inbox:
            dropped = agent.inbox.discard()
            if dropped:
                await agent.lease.append(*dropped)
        if self.turn is not None and self.turn.scope is not None:
            self.turn.scope.cancel()

    def resumable(self, open_turn: OpenTurn) -> bool:
        """Whether a turn a crash cut can go on: it was cut in a tool step and every call left
        open is one of this agent's idempotent tools; or, when its runtime resumes cut turns
        (``Runtime.resume_cut_turns``: a cluster's workers), it was cut in a model step after
        its first (the step is asked again; a cut first step re-queues its message anyway)."""
        if open_turn.claim is None:
            return False
        if not open_turn.calls:
            runtime = self._agent.runtime
            return runtime is not None and runtime.resume_cut_turns
        tools = self._agent.tools
        for call in open_turn.calls:
            tool = tools.get(call.name)
            if tool is None or not tool.idempotent:
                return False
        return True

    def go_on(self, open_turn: OpenTurn) -> None:
        """Go on with the cut turn ``open_turn`` when next driven (:meth:`resumable`)."""
        self._resume = open_turn

    async def close_cut(self, open_turn: OpenTurn) -> None:
        """Close a turn a crash cut, as a restore does: open calls get an error result (the
        tool may or may not have run) and the turn ends ``aborted``."""
        events = closing_events(open_turn)
        await self._agent.lease.append(*events)
        history = self._agent.budget.history
        for event in events[:-1]:
            history.append(event_to_message(event))  # type: ignore[arg-type]

    async def drain(self) -> None:
        """Run the inbox's turns until it is empty or parked: in a task of the agent's group
        (woken by a message), or inline in the caller's task (``run`` on an idle agent)."""
        inbox = self._agent.inbox
        try:
            resume, self._resume = self._resume, None
            if resume is not None and resume.claim is not None:
                claim = resume.claim  # the turn a crash cut goes on before anything new
                item = InboxItem(claim.message_id, claim.content, claim.source)
                self.turn = Turn(self, self._agent, item, resume)
                await self.turn.run()
            while inbox.queued and not self.parked:
                self.turn = Turn(self, self._agent, inbox.next_turn())
                await self.turn.run()
        finally:
            self.running = False
            self.set_idle()
            for callback in self._on_idle:
                callback()

    async def compact(self) -> CompactionEvent | None:
        """Compact now (``manual``): waits until no turn runs, and keeps the agent running
        meanwhile so that no turn starts. ``COMPACTION_FAILED`` when compaction is ``off``."""
        agent = self._agent
        if agent.spec.compaction.mode == "off":
            raise AgentError(
                ErrorCode.COMPACTION_FAILED,
                f"compaction is off for agent {agent.name or '(global scope)'}",
                remedy='set compaction = "manual" (or "auto") in the agent\'s table',
            )
        while self.running:
            await self.when_idle()
        self.running = True
        try:
            return await self._agent.budget.compact("manual")
        finally:
            self.running = False
            if self._agent.inbox.queued and not self.parked:
                self.wake()  # what came meanwhile runs now; its waiters wait for it
            else:
                self.set_idle()

    async def preview(self, prompt: str | None = None) -> tuple[ModelRequest, tuple[Message, ...]]:
        """The first request the next turn would send, without running or logging anything.

        Returns the request and the messages in it that are not in the log yet (dynamic
        instructions that would change, ``prompt``, pre-step messages). Resolvers and pre-step
        hooks are called, so they should not have side effects.
        """
        agent = self._agent
        spec, budget = agent.spec, agent.budget
        turn = self.turns + 1
        context = InstructionContext(
            agent.name, agent.session_id, turn, agent.caller, agent.initiator
        )
        values = dict(budget.instruction_values)
        instructions = await changed_instructions(spec.instructions, values, context)
        pending = [event_to_message(event) for event in instructions]
        if prompt is not None:
            pending.append(Message(role="user", content=prompt))
        step = StepContext(agent, turn, 1, prompt, USER_SOURCE)
        pending += [event_to_message(m) for m in await pre_step_messages(spec.pre_steps, step)]
        kept = [m for m in pending if m is not None]
        request = build_request(agent, [*budget.history, *kept], spec.limits.max_output_tokens)
        return request, tuple(kept)

    # ---------------------------------------------------------------- the turn
