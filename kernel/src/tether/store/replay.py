"""One fold of a session's log: everything a reader rebuilds from it, in one pass.

The log is the truth; an agent's memory of it is a fold. :func:`fold` is the only place that
fold is written: restoring an agent, seeding a fork and recovering children after a crash all
read the same :class:`SessionFold`, so they can never disagree about what a log means.

* ``history``: the messages the model's next request starts from;
* ``instructions``: the value of each dynamic instruction slot;
* ``unclaimed``: messages accepted into the inbox that no turn claimed and nobody discarded;
* ``open_turn``: the turn the log opened and never closed (the process stopped mid-turn);
* ``completed``: how many events lead up to the last ``turn/end`` (what a fork copies);
* ``setup``: the descriptors of the setup window (after the fork seed, before the first
  message): what a delegated child's log pins.
* ``compactions``: where the log compacted its history (a ``compaction`` event replaces the
  history so far with its summary and kept messages; docs/compaction.md).

A ``rewind`` event (:class:`RewindEvent`, ``tether sessions rewind``) makes the fold read the
log as if the events between its cut (``keep``) and itself were not there: they still count
for what happened whatever the history says (turn numbers, budget records, messages claimed),
never for what the model sees next (history, instructions, compactions, setup, caller).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..contracts import Caller
from ..models import Message, ToolCall, Usage
from ._events import (
    AssistantMessage,
    CompactionEvent,
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    InstructionEvent,
    MessageSource,
    RewindEvent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    compacted_view,
)

__all__ = (
    "OpenTurn",
    "PendingMessage",
    "SessionFold",
    "event_to_message",
    "fold",
    "live_positions",
    "render_instruction",
    "rewound_by",
)


def render_instruction(slug: str, content: str) -> str:
    """The message text of a dynamic instruction's value."""
    return f'<instruction slug="{slug}">\n{content}\n</instruction>'


def event_to_message(event: Event) -> Message | None:
    """The message a logged event contributes to the model's history, if any."""
    match event:
        case UserMessage(content=content):
            return Message(role="user", content=content)
        case AssistantMessage(content=content, tool_calls=calls):
            return Message(role="assistant", content=content, tool_calls=calls)
        case ToolResult(
            tool_call_id=call_id, name=name, content=content, is_error=is_error, images=images
        ):
            return Message(
                role="tool",
                content=content,
                tool_call_id=call_id,
                name=name,
                is_error=is_error,
                images=images,
            )
        case InstructionEvent(slug=slug, role=role, content=content):
            return Message(role=role, content=render_instruction(slug, content))
        case ContextMessage(role=role, content=content):
            return Message(role=role, content=content)
        case _:
            return None


@dataclass(frozen=True)
class OpenTurn:
    """A turn the log opened and never closed, and its calls that have no result."""

    turn: int
    calls: tuple[ToolCall, ...]
    claim: UserMessage | None = None
    """The message the turn runs (its claim), when the log holds it."""
    steps: int = 0
    """The model steps the turn stored (its answers)."""
    usage: Usage = field(default_factory=Usage)
    """What those steps' answers used, summed."""


@dataclass(frozen=True)
class PendingMessage:
    """A message accepted into the inbox and not claimed (nor discarded) yet."""

    message_id: str
    content: str
    source: MessageSource
    delivery: Literal["turn", "step", "context"]
    trace: dict[str, str] | None = None
    """The trace context the sender carried (``InboxAccepted.trace``)."""


@dataclass
class SessionFold:
    """What a log says, folded once; see the module docstring."""

    length: int = 0
    """How many events the log holds."""
    turns: int = 0
    """The number of the last turn the log opened."""
    history: list[Message] = field(default_factory=lambda: list[Message]())
    instructions: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    unclaimed: list[PendingMessage] = field(default_factory=lambda: list[PendingMessage]())
    open_turn: OpenTurn | None = None
    completed: int = 0
    """How many events lead up to (and include) the last ``turn/end``, or a ``compaction``
    stored after it, between turns."""
    setup: dict[str, DescriptorEvent] = field(default_factory=lambda: dict[str, DescriptorEvent]())
    """The first descriptor of each kind in the setup window."""
    compactions: list[int] = field(default_factory=lambda: list[int]())
    """The log positions (0-based) of its ``compaction`` events, in order."""
    last_compaction: CompactionEvent | None = None
    earlier_answers: int = 0
    """Answers of the session no longer in ``history`` (replaced by a compaction summary)."""
    delegation_note: Message | None = None
    """A delegated child's delegation note (the ``delegation`` context message of its setup
    window): what it was told about its task, which a compaction restates."""
    budget: DescriptorEvent | None = None
    """The last ``budget`` record of the log (the budget the session holds, docs/budgets.md)."""
    caller: Caller | None = None
    """The caller of the last message the log shows taken that named one (the agent's
    current caller, docs/callers.md)."""
    counted: tuple[int, int] | None = None
    """``(n, tokens)``: the provider counted ``tokens`` for the first ``n`` messages of
    ``history`` (the input and output of the last answer that reported usage), if no
    compaction came since."""

    @property
    def waiting(self) -> bool:
        """Whether an unclaimed message would start (or join) a turn (not mere context)."""
        return any(m.delivery != "context" for m in self.unclaimed)


def rewound(log: Sequence[Event]) -> set[int]:
    """The positions (0-based) of the events of ``log`` a later ``rewind`` took out of the
    history (empty for a log without one: the common case costs one pass of type checks)."""
    if not any(isinstance(event, RewindEvent) for event in log):
        return set()
    marks = [(i, e.keep if isinstance(e, RewindEvent) else None) for i, e in enumerate(log)]
    return rewound_by(marks)


def rewound_by(marks: Iterable[tuple[int, int | None]]) -> set[int]:
    """:func:`rewound` from ``(position, keep)`` pairs, in log order: a ``rewind`` event's
    ``keep``, ``None`` for any other event. Any subsequence of a log's events that holds its
    rewinds answers for those events (a log's outline, read without parsing it)."""
    live: list[int] = []
    gone: set[int] = set()
    for index, keep in marks:
        if keep is not None:
            while live and live[-1] >= keep:
                gone.add(live.pop())
        live.append(index)
    return gone


def live_positions(log: Sequence[Event]) -> list[int]:
    """The positions (0-based) of the events of ``log`` that count for the history: all of
    them but those a ``rewind`` took out, in order."""
    gone = rewound(log)
    return [index for index in range(len(log)) if index not in gone]


def fold(log: Sequence[Event], *, seed_length: int = 0) -> SessionFold:
    """Fold ``log`` (a session's events, in order) once. ``seed_length`` is the header's:
    events before it were copied from a parent (a fork seed), so the setup window starts
    after them."""
    result = SessionFold(length=len(log))
    history = result.history
    accepted: dict[str, PendingMessage] = {}
    claimed: set[str] = set()
    open_turn: int | None = None
    open_claim: UserMessage | None = None
    opened_by: str | None = None
    open_calls: dict[str, ToolCall] = {}
    open_steps = 0
    open_usage = Usage()
    in_setup = True
    gone = rewound(log)
    for index, event in enumerate(log):
        if index in gone:
            _count_rewound(result, event, accepted, claimed)
            continue
        message = event_to_message(event)
        if message is not None:
            history.append(message)
        if in_setup and index >= seed_length:
            if isinstance(event, UserMessage | InboxAccepted | TurnStarted):
                in_setup = False
            elif isinstance(event, DescriptorEvent):
                result.setup.setdefault(event.kind, event)
            elif isinstance(event, ContextMessage) and event.origin == "delegation":
                result.delegation_note = result.delegation_note or message
        match event:
            case InboxAccepted(message_id=mid, content=content, source=source, delivery=how):
                accepted[mid] = PendingMessage(mid, content, source, how, event.trace)
            case UserMessage(message_id=mid) if mid == opened_by and open_claim is None:
                claimed.add(mid)
                open_claim = event
                if event.source.caller is not None:
                    result.caller = event.source.caller
            case UserMessage(message_id=mid, source=source):
                claimed.add(mid)
                if source.caller is not None:
                    result.caller = source.caller
            case InboxDiscarded(message_id=mid):
                claimed.add(mid)
            case TurnStarted(turn=turn, message_id=mid):
                result.turns = turn
                open_turn = turn
                opened_by, open_claim = mid, None
                open_steps, open_usage = 0, Usage()
            case TurnEnded():
                open_turn = None
                open_calls = {}
                result.completed = index + 1
            case AssistantMessage(tool_calls=calls, usage=usage):
                open_calls = {call.id: call for call in calls}
                if open_turn is not None:
                    open_steps += 1
                    open_usage = open_usage + usage
                if usage.input_tokens:
                    result.counted = (len(history), usage.input_tokens + usage.output_tokens)
            case CompactionEvent():
                if open_turn is None:
                    result.completed = index + 1  # between turns: a fork starts from it
                history[:] = compacted_view(event)
                result.compactions.append(index)
                result.last_compaction = event
                result.earlier_answers = event.earlier_answers
                result.counted = None
            case ToolResult(tool_call_id=call_id):
                open_calls.pop(call_id, None)
            case InstructionEvent(slug=slug, content=content):
                result.instructions[slug] = content
            case DescriptorEvent(kind="budget"):
                result.budget = event
            case RewindEvent():
                # Between turns (a rewind is refused while one is open): a fork starts from
                # it, and what the inbox held goes with the turns it undid.
                result.completed = index + 1
                claimed.update(accepted)
            case _:
                pass
    result.unclaimed = [item for mid, item in accepted.items() if mid not in claimed]
    if open_turn is not None:
        result.open_turn = OpenTurn(
            open_turn, tuple(open_calls.values()), open_claim, open_steps, open_usage
        )
    return result


def _count_rewound(
    result: SessionFold, event: Event, accepted: dict[str, PendingMessage], claimed: set[str]
) -> None:
    """What an event a rewind took out of the history still counts for: the turn numbers
    (never reused), the budget (what was spent stays spent) and the messages it claimed or
    accepted (a message runs once, whatever became of its turn)."""
    match event:
        case TurnStarted(turn=turn):
            result.turns = max(result.turns, turn)
        case DescriptorEvent(kind="budget"):
            result.budget = event
        case InboxAccepted(message_id=mid, content=content, source=source, delivery=how):
            accepted[mid] = PendingMessage(mid, content, source, how, event.trace)
        case UserMessage(message_id=mid) | InboxDiscarded(message_id=mid):
            claimed.add(mid)
        case _:
            pass
