"""Guardrails at work: an agent's content checked where it passes (docs/guardrails.md).

An agent holds the guardrails that apply to its session (``agent.spec.guardrails``: its own,
``[tether] guardrails`` for a root, and what its parent passed down), sorted here by the kind
of content each wants (:class:`Guards`). The turn loop asks :func:`check` at each place
content passes:

* ``input``: a turn's message as the turn takes it, and steers and injected context at the
  step that takes them. A check that answers at once runs before the model request; one that
  awaits (a model) runs alongside the turn's first request (:func:`alongside`), which is
  cancelled and asked again with the replacement when the check replaces the message, or
  cancelled when it stops the turn;
* ``output``: the text of each answer, before it is stored; a ``streaming`` guardrail also
  while it streams (:class:`StreamWatch`);
* ``tool_call``: a call's arguments before the tool runs (a replacement is the call's result:
  the tool does not run); ``tool_result``: what the tool returned, before it is stored;
* ``child_result`` / ``remote_result``: a child's result as it comes back to its parent.

A replacement is what is stored and what the model sees; a ``guard`` event after it says it
was replaced. A stop raises :class:`GuardTrip`: the turn ends ``error`` with
``GUARDRAIL_TRIPPED`` after the trip's ``guard`` event. Content nothing wants costs one
dictionary lookup; an allowing check that answers at once, one call.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

import anyio
from pydantic_core import to_json

from ..contracts import GuardKind, Guardrail, GuardSubject, GuardVerdict
from ..models import Message, ModelDelta
from ..store import Event, GuardEvent, UserMessage
from ._guard_names import (
    NO_GUARDS,
    REMOTE_ROUTES,
    ROUTE_POLICIES,
    Guards,
    forwarded_guardrails,
    forwarded_record,
    named_guardrails,
    off_route,
    offered_guardrails,
    pick_guardrails,
)

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = (
    "NO_GUARDS",
    "REMOTE_ROUTES",
    "ROUTE_POLICIES",
    "GuardTrip",
    "Guards",
    "Outcome",
    "StreamWatch",
    "alongside",
    "arguments_text",
    "begin",
    "check",
    "close_unawaited",
    "forwarded_guardrails",
    "forwarded_record",
    "guard_claims",
    "named_guardrails",
    "off_route",
    "offered_guardrails",
    "pick_guardrails",
    "reclaim",
    "trip_text",
)

log = logging.getLogger("tether.agents")

T = TypeVar("T")


class GuardTrip(Exception):
    """A guardrail stopped the turn: ``event`` is its ``guard`` record (with any replacement
    records before it in ``events``)."""

    def __init__(self, events: Sequence[GuardEvent]) -> None:
        self.events = tuple(events)
        self.event = self.events[-1]
        super().__init__(trip_text(self.event))


def trip_text(event: GuardEvent) -> str:
    """The turn's error for a trip: which guardrail, on what, why."""
    what = {
        "input": "the message",
        "output": "the answer",
        "tool_call": "a tool call",
        "tool_result": "a tool result",
        "child_result": "a subagent's result",
        "remote_result": "a remote agent's result",
    }[event.kind]
    reason = f": {event.reason}" if event.reason else ""
    return f'guardrail "{event.guardrail}" stopped the turn on {what}{reason} [GUARDRAIL_TRIPPED]'


class Outcome(NamedTuple):
    """What the checks of one piece of content made of it: the text to use and the ``guard``
    events to store (none when everything allowed it: ``events`` is empty)."""

    content: str
    events: tuple[GuardEvent, ...]

    @property
    def changed(self) -> bool:
        return bool(self.events)


def subject(
    agent: Agent,
    kind: GuardKind,
    content: str,
    *,
    tool: str | None = None,
    route: str | None = None,
    partial: bool = False,
) -> GuardSubject:
    """What a guardrail is asked about ``content`` (a streaming answer's). :func:`begin` spells
    the same fields inline: a call here costs every checked item a tenth more (callgrind)."""
    header = agent.header
    return GuardSubject(
        kind,
        content,
        agent.name,
        header.id,
        header.delegation_depth,
        agent.caller,
        tool,
        route,
        partial,
    )


#: Make a subject and an outcome from a tuple of their fields, skipping the named tuples'
#: ``__new__`` frames (the path every checked item takes makes one of each).
_subject = cast(
    "Callable[[type[GuardSubject], tuple[object, ...]], GuardSubject]",
    tuple.__new__,  # pyright: ignore[reportUnknownMemberType]
)
_outcome = cast(
    "Callable[[type[Outcome], tuple[object, ...]], Outcome]",
    tuple.__new__,  # pyright: ignore[reportUnknownMemberType]
)

#: An outcome's events when nothing was changed (shared: never mutated).
_NONE: tuple[GuardEvent, ...] = ()


def begin(
    agent: Agent,
    kind: GuardKind,
    content: str,
    *,
    target: str | None = None,
    tool: str | None = None,
    route: str | None = None,
) -> Outcome | Awaitable[Outcome] | None:
    """Ask the agent's guardrails of ``kind`` about ``content``, in order (each sees what the
    one before let through, replacements included). ``None`` when every check allowed it at
    once (``content`` goes on as it is, nothing is stored); the :class:`Outcome` at once when
    one replaced it and every check answered at once; from the first check that returns an
    awaitable on, an awaitable of the outcome (no coroutine is made before). ``GuardTrip`` on
    a stop (raised by the awaitable, when one is returned)."""
    # The path every checked item takes: no helper calls, nothing made but the subject while
    # checks allow at once (an outcome, a tuple subclass, would cost a fifth more).
    rails = agent.spec.guards.of(kind)
    header = agent.header
    about = _subject(
        GuardSubject,
        (
            kind,
            content,
            header.agent,
            header.id,
            header.delegation_depth,
            agent.caller,
            tool,
            route,
            False,
        ),
    )
    events = _NONE
    for rail in rails:
        try:
            answer = rail.check(about)
        except Exception as exc:  # a check that raises never lets content through unchecked
            answer = _failed(rail, exc)
        if answer.__class__ is not GuardVerdict:
            rest = rails[next(i for i, r in enumerate(rails) if r is rail) :]
            return _finish(agent, rest, _awaitable(answer), about, events, target)
        if answer.action != "allow":  # type: ignore[union-attr]
            about, events = _apply(rail, answer, about, events, target)  # type: ignore[arg-type]
    return _outcome(Outcome, (about.content, events)) if events else None


async def check(
    agent: Agent,
    kind: GuardKind,
    content: str,
    *,
    target: str | None = None,
    tool: str | None = None,
    route: str | None = None,
) -> Outcome:
    """:func:`begin`, awaited when it must be, always an :class:`Outcome`."""
    outcome = begin(agent, kind, content, target=target, tool=tool, route=route)
    if outcome is None:
        return _outcome(Outcome, (content, _NONE))
    if isinstance(outcome, Outcome):
        return outcome
    return await outcome


async def _finish(
    agent: Agent,
    rails: Sequence[Guardrail],
    answer: GuardVerdict | Awaitable[GuardVerdict],
    about: GuardSubject,
    events: tuple[GuardEvent, ...],
    target: str | None,
) -> Outcome:
    """The checks from the first that awaits on (``answer`` is its answer)."""
    for index, rail in enumerate(rails):
        if index:
            answer = _answer(rail, about)
        verdict = await _verdict(rail, answer)
        if verdict.action != "allow":
            about, events = _apply(rail, verdict, about, events, target)
    return Outcome(about.content, events)


def _apply(
    rail: Guardrail,
    verdict: GuardVerdict,
    about: GuardSubject,
    events: tuple[GuardEvent, ...],
    target: str | None,
) -> tuple[GuardSubject, tuple[GuardEvent, ...]]:
    """A verdict other than allow: the content the next check sees and the records so far;
    ``GuardTrip`` on a stop (or an answer that is neither)."""
    if verdict.action == "replace":
        record = GuardEvent(guardrail=rail.name, kind=about.kind, action="replace", target=target)
        return about._replace(content=verdict.text), (*events, record)
    reason = verdict.text if verdict.action == "stop" else f"it answered {verdict.action!r}"
    stop = GuardEvent(
        guardrail=rail.name, kind=about.kind, action="stop", reason=reason, target=target
    )
    raise GuardTrip([*events, stop])


async def alongside(
    checking: Awaitable[Outcome], request: Callable[[], Awaitable[T]]
) -> tuple[Outcome | GuardTrip, T | None]:
    """Await ``checking`` and run ``request()`` together: the check's outcome (or its trip),
    and the request's answer; ``None`` for the answer when the check changed the content or
    tripped, which cancels the request."""
    answer: T | None = None
    outcome: Outcome | GuardTrip | None = None
    async with anyio.create_task_group() as group:

        async def ask() -> None:
            nonlocal answer
            answer = await request()

        group.start_soon(ask)
        try:
            outcome = await checking
        except GuardTrip as trip:
            outcome = trip
        if isinstance(outcome, GuardTrip) or outcome.changed:
            group.cancel_scope.cancel()
    assert outcome is not None
    if isinstance(outcome, GuardTrip) or outcome.changed:
        return outcome, None
    return outcome, answer


class StreamWatch:
    """The ``streaming`` output guardrails of an agent, asked about an answer while it
    streams: after each piece of text, with the text so far. A stop raises
    :class:`GuardTrip` from the listener, which cuts the request; the text so far is kept."""

    __slots__ = ("_agent", "_rails", "text")

    def __init__(self, agent: Agent, rails: tuple[Guardrail, ...]) -> None:
        self._agent = agent
        self._rails = rails
        self.text = ""

    def wrap(self, hear: Callable[[ModelDelta], None]) -> Callable[[ModelDelta], None]:
        """``hear`` (the stream's listener), then the watch, for each piece."""

        def watched(delta: ModelDelta) -> None:
            hear(delta)
            if delta.kind == "text":
                self.hear(delta.text)
            elif delta.kind == "retry":
                self.text = ""  # what came before the retry is not the answer

        return watched

    def hear(self, piece: str) -> None:
        self.text += piece
        for rail in self._rails:
            answer = _answer(rail, subject(self._agent, "output", self.text, partial=True))
            if not isinstance(answer, GuardVerdict):
                close_unawaited(answer)
                continue  # a streaming check must answer at once; its final check awaits
            if answer.action == "stop":
                event = GuardEvent(
                    guardrail=rail.name, kind="output", action="stop", reason=answer.text
                )
                raise GuardTrip([event])


def arguments_text(arguments: Mapping[str, Any]) -> str:
    """A call's arguments as a ``tool_call`` guardrail reads them: compact JSON, non-ASCII
    text as it is (pydantic's encoder: a fifth of ``json.dumps``' time on a small call)."""
    return to_json(arguments).decode()


def _answer(rail: Guardrail, about: GuardSubject) -> GuardVerdict | Awaitable[GuardVerdict]:
    try:
        answer = cast("object", rail.check(about))  # a plugin may break the contract
    except Exception as exc:  # a check that raises never lets content through unchecked
        return _failed(rail, exc)
    if isinstance(answer, GuardVerdict):
        return answer
    return _awaitable(answer)


def _failed(rail: Guardrail, exc: Exception) -> GuardVerdict:
    log.exception("guardrail %s failed", rail.name, exc_info=exc)
    return GuardVerdict.stop(f"the check failed: {type(exc).__name__}: {exc}")


def _awaitable(answer: object) -> GuardVerdict | Awaitable[GuardVerdict]:
    """What a check answered that is not a verdict made here: a verdict of a subclass, an
    awaitable of one, or (breaking the contract) anything else, which stops the turn."""
    if isinstance(answer, GuardVerdict) or inspect.isawaitable(answer):
        return cast("GuardVerdict | Awaitable[GuardVerdict]", answer)
    return GuardVerdict.stop(f"the check answered {type(answer).__name__}, not a GuardVerdict")


async def _verdict(rail: Guardrail, answer: GuardVerdict | Awaitable[GuardVerdict]) -> GuardVerdict:
    if isinstance(answer, GuardVerdict):
        return answer
    try:
        verdict = cast("object", await answer)  # a plugin may break the contract
    except Exception as exc:
        log.exception("guardrail %s failed", rail.name)
        return GuardVerdict.stop(f"the check failed: {type(exc).__name__}: {exc}")
    if not isinstance(verdict, GuardVerdict):
        return GuardVerdict.stop(f"the check answered {type(verdict).__name__}, not a GuardVerdict")
    return verdict


def close_unawaited(answer: Awaitable[Any]) -> None:
    """Drop an awaitable a check returned and that will not be awaited (no warning)."""
    if inspect.iscoroutine(answer):
        cast("Any", answer).close()


async def guard_claims(agent: Agent, events: list[Event], history: list[Message]) -> list[Event]:
    """The claims a step takes (steers, injected context: ``take_step_messages``, which put
    one history entry per claim at the end of ``history``) checked as ``input``: a
    replacement is what is stored and sent, its record after it. On a trip the claims are
    kept as they came (the messages were taken) and the turn ends."""
    first = len(history) - sum(isinstance(e, UserMessage) for e in events)
    checked: list[Event] = []
    at = first
    for event in events:
        if not isinstance(event, UserMessage):
            checked.append(event)
            continue
        index, at = at, at + 1
        if event.source.kind == "notice":  # a child's result: checked as it came back
            checked.append(event)
            continue
        try:
            outcome = await check(agent, "input", event.content, target=event.message_id)
        except GuardTrip:
            agent.lease.defer(*events)
            raise
        if outcome.changed:
            event = event.model_copy(update={"content": outcome.content})
            history[index] = Message(role="user", content=outcome.content)
        checked.append(event)
        checked.extend(outcome.events)
    return checked


def reclaim(agent: Agent, message_id: str, outcome: Outcome) -> None:
    """A turn's message replaced after its claim was deferred (a check that awaited): the
    deferred claim and its history entry take the replacement, its records follow."""
    lease, history = agent.lease, agent.budget.history
    old: UserMessage | None = None
    unsaved = list(lease.unsaved)
    for index, event in enumerate(unsaved):
        if isinstance(event, UserMessage) and event.message_id == message_id:
            old = event
            unsaved[index] = event.model_copy(update={"content": outcome.content})
    lease.unsaved = tuple(unsaved)
    if old is not None:
        for index in range(len(history) - 1, -1, -1):
            entry = history[index]
            if entry.role == "user" and entry.content == old.content:
                history[index] = Message(role="user", content=outcome.content)
                break
    lease.defer(*outcome.events)
