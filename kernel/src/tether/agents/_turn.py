"""One turn of an agent's loop, from its claim to ``turn/end`` (:class:`Turn`).

A turn opens with one batch (``turn/start``, changed instructions, the claim of its message),
stored with the first step's answer. Each step: steering and injected messages, then
pre-step hooks, are appended -> the budget makes the request fit -> one model request (told
to the tracer, streamed while anyone listens) -> tool calls run (safe ones concurrently,
each result durable as soon as it exists) -> until an answer without tool calls or a limit.
Then the turn closes: open calls get an error result, late steers become the next turns,
late context is kept, and ``turn/end`` says why it stopped; a cancelled turn still records
its end, shielded and bounded.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING

import anyio

from ..budgets._accounts import (
    NOTHING,
    Account,
    Charge,
    Overrun,
    charge,
    settle,
)
from ..errors import ErrorCode, ModelError, TetherError
from ..models import Message, ModelResponse, ToolCall, Usage
from ..store import (
    AssistantMessage,
    ContextMessage,
    Event,
    GuardEvent,
    InstructionEvent,
    StopReason,
    ToolResult,
    TurnEnded,
    TurnStarted,
)
from ..store._events import replace_surrogates
from ..store.replay import OpenTurn, event_to_message
from ._calls import run_in_batches, run_tool
from ._guards import (
    GuardTrip,
    Outcome,
    StreamWatch,
    alongside,
    begin,
    close_unawaited,
    guard_claims,
    reclaim,
)
from ._inbox import InboxItem
from ._instructions import InstructionContext
from ._lease import TEARDOWN_TIMEOUT
from ._step import (
    FINISH_TO_STOP,
    REPEAT_ORIGIN,
    REPEAT_REFUSED,
    RepeatWatch,
    StepContext,
    build_request,
    changed_instructions,
    pre_step_messages,
    request_with_retries,
    storable_response,
)
from ._stream import AnswerStream
from ._tracing import TurnStart, tracing

if TYPE_CHECKING:
    from ._agent import Agent
    from ._loop import TurnLoop

__all__ = ("UNFINISHED_CALL", "Turn")

#: The result an open tool call gets when its turn ends before the call finished.
UNFINISHED_CALL = (
    "error: interrupted: the turn ended before this tool finished; it may or may not have run"
)
_NO_USAGE = Usage()


_NO_DEADLINE = contextlib.nullcontext()


def _deadline(wall: float) -> anyio.CancelScope:
    """A scope that cancels what it runs at the wall-clock time ``wall``."""
    return anyio.move_on_after(wall - time.time())


def _late(account: Account) -> Overrun:
    wall = account.budget.wall_seconds
    assert wall is not None
    return Overrun(account.holder, "wall_seconds", wall, time.time() - account.started, 0)


class BudgetStop(Exception):
    """A budget refused the step's request (or its wall time ran out during it)."""

    def __init__(self, overrun: Overrun) -> None:
        super().__init__(str(overrun.error()))
        self.overrun = overrun


def _storable_result(result: ToolResult) -> ToolResult:
    content = replace_surrogates(result.content)
    if content is result.content:
        return result
    return result.model_copy(update={"content": content})


class Turn:
    """The turn of one message: made when it starts, kept by the loop until the next one
    (what it was asked is what a compaction restates)."""

    __slots__ = ("_owner", "_resume", "ended", "item", "scope", "step")

    def __init__(
        self, loop: TurnLoop, agent: Agent, item: InboxItem, resume: OpenTurn | None = None
    ) -> None:
        # The agent, held weakly: its loop keeps this turn, and a cycle would leave every
        # finished agent to the cyclic collector. ``loop`` is the agent's own.
        self._owner = weakref.ref(agent)
        self._resume = resume
        self.item = item
        """The message the turn runs."""
        self.scope: anyio.CancelScope | None = None
        """The turn's cancel scope while its steps run (``None`` before and after)."""
        self.step: tuple[str, int] | None = None
        """The model step whose answer arrives now (``TurnLoop.current_step``)."""
        self.ended: TurnEnded | None = None
        """How it ended, once it has."""

    @property
    def _agent(self) -> Agent:
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    @property
    def _loop(self) -> TurnLoop:
        return self._agent.loop

    def run(self) -> Awaitable[None]:
        """Run the turn; with a cut turn to resume, go on with it (its open calls, all
        idempotent, run again first; the log holds everything before). Told to the agent's
        tracer, when it has one (without one, no frame is spent on telling)."""
        if self._agent.spec.tracer is None:
            return self._run()
        return self._traced()

    async def _traced(self) -> None:
        tracer = self._agent.spec.tracer
        assert tracer is not None
        resume, item = self._resume, self.item
        start = TurnStart(
            turn=self._loop.turns + 1 if resume is None else resume.turn,
            message_id=item.message_id,
            content=item.content,
            source=item.source,
            trace=item.trace,
            resumed=resume is not None,
        )
        with tracing(tracer), tracer.turn(self._agent, start) as ended:
            try:
                await self._run()
            finally:
                if self.ended is not None:
                    ended(self.ended)

    async def _run(self) -> None:
        agent, item, resume = self._agent, self.item, self._resume
        loop = agent.loop
        lease, history, limits = agent.lease, agent.budget.history, agent.spec.limits
        if resume is None:
            loop.turns += 1
        turn = loop.turns if resume is None else resume.turn
        # A resumed turn counts the steps, and the usage, it stored before it was cut.
        usage = _NO_USAGE if resume is None or not resume.steps else resume.usage
        steps = 0 if resume is None else resume.steps
        stop: StopReason = "error"
        error: str | None = None
        final: AssistantMessage | None = None
        pending_calls: tuple[ToolCall, ...] = ()
        claimed = False
        # Steps in a row that make the same calls (a small model may loop on one call); made
        # at the first step that makes calls.
        repeats: RepeatWatch | None = None
        overrun: Overrun | None = None
        scope = anyio.CancelScope()
        outer: BaseException | None = None
        tripped: GuardTrip | None = None
        answered: list[Event] = []  # guard records of the final answer, stored after it
        checking: Awaitable[Outcome] | None = None  # the message's checks that await
        try:
            with scope:
                self.scope = scope
                try:
                    # One batch opens the turn: turn/start, changed instructions, then the
                    # message that started it. Its user/message is the claim. The batch is
                    # stored with the first step's answer, in one commit: a crash before that
                    # re-queues the message (its unanswered model request changed nothing),
                    # and a one-step turn costs one commit, not three (each an fsync with
                    # synchronous = FULL).
                    if resume is None:
                        claim = item.claim(agent.caller)
                        if item.source.caller is not None:  # who asks, before what it sees
                            agent.caller = item.source.caller
                        instructions = await self._resolve_instructions(turn)
                        guarded: list[GuardEvent] = []
                        if agent.spec.guards.of("input"):  # checks that answer at once, now
                            outcome = begin(agent, "input", claim.content, target=claim.message_id)
                            if isinstance(outcome, Outcome):  # replaced
                                claim = claim.model_copy(update={"content": outcome.content})
                                guarded = [*outcome.events]
                            elif outcome is not None:
                                checking = outcome  # one awaits: alongside the first request
                        lease.defer(
                            TurnStarted(turn=turn, message_id=item.message_id),
                            *instructions,
                            claim,
                            *guarded,
                        )
                        for event in instructions:
                            agent.budget.set_instruction(event)
                        history.append(Message(role="user", content=claim.content))
                        claimed = True
                    else:
                        claimed = True  # opened and claimed before the crash
                        pending_calls = resume.calls
                        await self._run_tools(resume.calls)
                        pending_calls = ()
                    while True:
                        if steps >= limits.max_steps:
                            stop = "max-tokens"
                            break
                        steps += 1
                        await self._before_step(turn, steps)
                        self.step = (item.message_id, steps)
                        if checking is not None:
                            answer = await self._checked_request(checking, steps, usage)
                            checking = None
                        else:
                            answer = await self._request(steps, usage)
                        response = storable_response(answer)
                        self.step = None
                        said: list[Event] = []
                        if response.text and agent.spec.guards.of("output"):
                            seen = begin(agent, "output", response.text)
                            if seen is not None and not isinstance(seen, Outcome):
                                seen = await seen
                            if seen is not None and seen.events:
                                response = response.model_copy(update={"text": seen.content})
                                said = [*seen.events]
                        usage = response.usage if usage is _NO_USAGE else usage + response.usage
                        message = AssistantMessage(
                            content=response.text,
                            tool_calls=response.tool_calls,
                            usage=response.usage,
                            finish_reason=response.finish_reason,
                            remote_usage=response.remote_usage,
                        )
                        history.append(
                            Message(
                                role="assistant",
                                content=response.text,
                                tool_calls=response.tool_calls,
                            )
                        )
                        if response.usage.input_tokens:  # the provider counted this much
                            counted = response.usage
                            agent.budget.counted(counted.input_tokens + counted.output_tokens)
                        if agent.spending is not None:
                            self._notices()
                        over_budget = (
                            limits.max_output_tokens is not None
                            and usage.output_tokens >= limits.max_output_tokens
                        )
                        if not response.tool_calls:
                            stop = FINISH_TO_STOP.get(response.finish_reason, "error")
                            final = message  # stored together with turn/end below
                            answered = said
                            break
                        pending_calls = response.tool_calls
                        if repeats is None:
                            repeats = RepeatWatch(limits.max_repeated_calls)
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
                            await lease.append(message, *said, *refused, hold=True)
                            for result in refused:
                                history.append(event_to_message(result))  # type: ignore[arg-type]
                            pending_calls = ()
                            stop, error = "error", str(repeats.error(agent.name))
                            break
                        await lease.append(message, *said, hold=True)
                        await self._run_tools(response.tool_calls)
                        pending_calls = ()
                        if verdict == "notice":
                            notice = ContextMessage(
                                role="user", content=repeats.notice(), origin=REPEAT_ORIGIN
                            )
                            await lease.append(notice, hold=True)
                            history.append(Message(role="user", content=notice.content))
                        if over_budget:
                            stop = "max-tokens"
                            break
                except ModelError as exc:
                    stop, error = "error", str(exc)
                except GuardTrip as trip:
                    stop, error, tripped = "error", str(trip), trip
                except BudgetStop as exc:
                    stop, error, overrun = "error", str(exc), exc.overrun
                    if self.step is not None and loop.stream is not None:
                        loop.stream.end()  # what a cut request streamed is not the answer
                except Exception as exc:
                    # A plugin's instruction resolver, pre-step hook or tool runner failed
                    # outside a tool call: the turn ends with "error" and says why; the agent
                    # lives on.
                    stop, error = "error", f"{type(exc).__name__}: {exc}"
                finally:
                    self.scope = None
                    self.step = None
        except anyio.get_cancelled_exc_class() as exc:
            outer = exc  # the caller of an inline turn was cancelled: the turn is aborted
        if checking is not None:  # the turn ended before its first request: never awaited
            close_unawaited(checking)
        streamed = loop.stream.end() if loop.stream is not None else None
        cut = tripped is not None and tripped.event.kind == "output"  # mid-stream
        if scope.cancelled_caught or outer is not None or cut:
            stop = "aborted" if not cut else stop
            if final is None and streamed:
                # What a cancelled stream delivered of its answer, kept and marked
                # partial (its tool calls, incomplete, are not).
                text = replace_surrogates(streamed)
                history.append(Message(role="assistant", content=text))
                final = AssistantMessage(content=text, partial=True)
        closing = self._closing_events(claimed, final, pending_calls, answered)
        if tripped is not None:
            closing.extend(tripped.events)  # which guardrail stopped the turn, and why
        if overrun is not None:
            closing.append(overrun.descriptor())
        self.ended = TurnEnded(turn=turn, stop_reason=stop, usage=usage, steps=steps, error=error)
        closing.append(self.ended)
        loop.last_stop_reason = stop
        loop.last_error = error
        try:
            if scope.cancel_called or outer is not None:
                # A cancelled turn still records how it ended: shielded, and bounded in time.
                deadline = anyio.current_time() + TEARDOWN_TIMEOUT
                with anyio.CancelScope(shield=True, deadline=deadline):
                    await lease.append(*closing, hold=True)
            else:
                await lease.append(*closing, hold=True)
        except TetherError as exc:
            # The store refused the turn's end: the agent stops taking turns and says why
            # through `fault`. A passing fault (a locked store) keeps the turn's events, which
            # the next write stores first; after a lost lease (another process owns the
            # session) it writes nothing more.
            lease.fault = exc
            loop.last_stop_reason = "error"
            loop.parked = True
        if outer is not None:
            loop.parked = True  # what is queued waits for the next waking message
            raise outer

    def _closing_events(
        self,
        claimed: bool,
        final: AssistantMessage | None,
        pending_calls: tuple[ToolCall, ...],
        guarded: Sequence[Event] = (),
    ) -> list[Event]:
        """What a turn appends as it ends, before ``turn/end``."""
        agent, item = self._agent, self.item
        inbox, history = agent.inbox, agent.budget.history
        closing: list[Event] = []
        if not claimed:  # ended before the turn opened: open it now and keep the message
            closing.append(TurnStarted(turn=agent.loop.turns, message_id=item.message_id))
            closing.append(item.claim(agent.caller))
            history.append(Message(role="user", content=item.content))
            inbox.took(item.source)
        if final is not None:
            closing.append(final)
            closing.extend(guarded)  # a guardrail replaced its text
        if pending_calls:
            # Only the calls of the interrupted step can be open; results are never older.
            recent = history[-len(pending_calls) :]
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
                    history.append(event_to_message(result))  # type: ignore[arg-type]
        inbox.requeue_steering()
        closing.extend(inbox.take_step_messages(history))  # late injected context is kept
        return closing

    async def _resolve_instructions(self, turn: int) -> Sequence[InstructionEvent]:
        """The instruction events whose value changed; applied once they are stored."""
        agent = self._agent
        if not agent.spec.instructions:
            return ()
        context = InstructionContext(
            agent.name, agent.session_id, turn, agent.caller, agent.initiator
        )
        values = dict(agent.budget.instruction_values)
        return await changed_instructions(agent.spec.instructions, values, context)

    async def _before_step(self, turn: int, step: int) -> None:
        agent = self._agent
        inbox, pre_steps = agent.inbox, agent.spec.pre_steps
        if not (inbox.steering or inbox.injected or pre_steps):
            return
        history = agent.budget.history
        events = inbox.take_step_messages(history)
        if events and agent.spec.guards.of("input"):
            events = await guard_claims(agent, events, history)
        if pre_steps:
            context = StepContext(agent, turn, step, self.item.content, self.item.source)
            for message in await pre_step_messages(pre_steps, context):
                events.append(message)
                if isinstance(message, ContextMessage):  # a descriptor is stored, not sent
                    history.append(Message(role=message.role, content=message.content))
        if events:
            agent.lease.defer(*events)  # stored with the step's answer

    async def _request(self, step: int, usage: Usage) -> ModelResponse:
        """The model's answer for this step: the budget makes the request fit, the tree's
        budgets are charged (a request they refuse is never sent; one that passes their first
        deadline is cut there), the tracer is told, the answer streams while anyone listens,
        and what it spent is settled (nothing, when it failed or was cut). One frame: a
        waiting child's turn costs as little as it can."""
        agent = self._agent
        budget, spec = agent.budget, agent.spec
        allowed = spec.limits.max_output_tokens
        remaining = None if allowed is None else max(allowed - usage.output_tokens, 1)
        if budget.window is not None:  # unknown: no budget is kept, nothing to fit
            await budget.fit(remaining)
        spending = agent.spending
        done: Charge | None = None
        deadline: tuple[float, Account] | None = None
        if spending is not None:
            tokens = budget.context_tokens() if spending.counts_input else 0
            charged, need, remaining = spending.begin(tokens, remaining)
            if charged is None:
                charged = await charge(spending.chain, need)
            if isinstance(charged, Overrun):
                raise BudgetStop(charged)
            done, deadline = charged, spending.deadline
        stream = agent.loop.stream
        runtime = spec.runtime
        if stream is None and runtime is not None and runtime.delta_listeners:
            stream = agent.loop.stream = AnswerStream(agent)
        hear = stream.hear if stream is not None and stream.wanted else None
        if hear is not None and spec.guards.streaming:  # guardrails that watch it stream
            hear = StreamWatch(agent, spec.guards.streaming).wrap(hear)
        tracer, compacted = spec.tracer, False
        answer: ModelResponse | None = None
        try:
            while True:
                request = build_request(agent, budget.history, remaining)
                if hear is not None:
                    stream.begin()  # type: ignore[union-attr]
                timer = _NO_DEADLINE if deadline is None else _deadline(deadline[0])
                try:
                    with timer:
                        if tracer is None:
                            response = await request_with_retries(
                                spec.model, request, spec.limits, hear
                            )
                        else:
                            with tracer.model_request(agent, step, request) as answered:
                                response = await request_with_retries(
                                    spec.model, request, spec.limits, hear
                                )
                                answered(response)
                except ModelError as exc:
                    # The provider counted more than the estimate: compact once, and ask again.
                    overflow = exc.code == ErrorCode.CONTEXT_WINDOW_EXCEEDED
                    if compacted or not overflow or spec.compaction.mode != "auto":
                        raise
                    compacted = True
                    if await budget.compact("overflow") is None:
                        raise
                    continue
                if timer is not _NO_DEADLINE and timer.cancelled_caught:  # type: ignore[union-attr]
                    assert deadline is not None
                    raise BudgetStop(_late(deadline[1]))
                if hear is not None:
                    stream.end()  # type: ignore[union-attr]
                answer = response
                return response
        finally:
            if done is not None:
                assert spending is not None
                if not spending.end(done, answer):
                    spent = NOTHING if answer is None else spending.spent(answer)
                    with anyio.CancelScope(shield=True):
                        await settle(done, spent)

    async def _checked_request(
        self, checking: Awaitable[Outcome], step: int, usage: Usage
    ) -> ModelResponse:
        """The first step's answer while the turn's message is still being checked: asked
        alongside the check, asked again when the check replaced the message (its claim and
        its history entry take the replacement first); a trip ends the turn."""
        outcome, answer = await alongside(checking, lambda: self._request(step, usage))
        if isinstance(outcome, GuardTrip):
            raise outcome
        if answer is None:
            reclaim(self._agent, self.item.message_id, outcome)
            answer = await self._request(step, usage)
        return answer

    def _notices(self) -> None:
        """The budget notices of the limits passed their warning share: appended (stored with
        the next step's answer, or the turn's end), read by the model from its next request."""
        agent = self._agent
        spending = agent.spending
        assert spending is not None
        events = spending.notices()
        if not events:
            return
        history = agent.budget.history
        for event in events:
            if isinstance(event, ContextMessage):
                history.append(Message(role=event.role, content=event.content))
        agent.lease.defer(*events)

    async def _run_tools(self, calls: Sequence[ToolCall]) -> None:
        agent = self._agent
        tracer, lease, budget = agent.spec.tracer, agent.lease, agent.budget

        tripped: list[GuardTrip] = []

        async def run(call: ToolCall) -> None:
            try:
                if tracer is None:
                    result = _storable_result(await run_tool(agent, call))
                else:
                    with tracer.tool_call(agent, call) as done:
                        result = _storable_result(await run_tool(agent, call))
                        done(result)
            except GuardTrip as trip:  # the batch's other calls finish; the turn then ends
                tripped.append(trip)
                return
            # Durable as soon as it exists: a crash while a sibling still runs keeps it.
            await lease.append(result, hold=True)
            budget.history.append(event_to_message(result))  # type: ignore[arg-type]
            if result.images:
                budget.holds_images = True

        await run_in_batches(agent, calls, run)
        if tripped:
            raise tripped[0]
