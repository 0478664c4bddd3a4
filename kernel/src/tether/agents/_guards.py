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
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from ..contracts import GUARD_KINDS, GuardKind, Guardrail, GuardSubject, GuardVerdict
from ..errors import ErrorCode, GuardrailError
from ..models import Message, ModelDelta
from ..store import DescriptorEvent, Event, GuardEvent, UserMessage
from ._delegation import GUARDRAILS_DESCRIPTOR

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ._agent import Agent

__all__ = (
    "NO_GUARDS",
    "REMOTE_ROUTES",
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

#: The routes whose children's results are ``remote_result`` (a provider's ``route``).
REMOTE_ROUTES = frozenset({"acp", "a2a"})

#: A remote agent's ``guardrails`` setting (its provider's ``guardrails_policy``) that lets
#: guardrails passed down meet it: ``forward`` (a tether: sent by name and applied there) or
#: ``exempt`` (it runs unchecked inside).
ROUTE_POLICIES = frozenset({"forward", "exempt"})

#: Guardrail names: what the profile names them by.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


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


class Outcome:
    """What the checks of one piece of content made of it: the text to use and the ``guard``
    events to store (none when everything allowed it)."""

    __slots__ = ("content", "events")

    def __init__(self, content: str, events: tuple[GuardEvent, ...]) -> None:
        self.content = content
        self.events = events

    @property
    def changed(self) -> bool:
        return bool(self.events)


class Guards:
    """The guardrails of one agent, by the kind of content each checks."""

    __slots__ = ("_by_kind", "names", "streaming")

    def __init__(self, guardrails: Iterable[Guardrail]) -> None:
        rails = tuple(guardrails)
        self.names = tuple(g.name for g in rails)
        self._by_kind: dict[str, tuple[Guardrail, ...]] = {}
        for kind in GUARD_KINDS:
            wanted = tuple(g for g in rails if kind in g.kinds)
            if wanted:
                self._by_kind[kind] = wanted
        self.streaming = tuple(
            g for g in self._by_kind.get("output", ()) if getattr(g, "streaming", False)
        )

    def __bool__(self) -> bool:
        return bool(self._by_kind)

    def of(self, kind: GuardKind) -> tuple[Guardrail, ...]:
        return self._by_kind.get(kind, ())


#: An agent without guardrails.
NO_GUARDS = Guards(())


def subject(
    agent: Agent,
    kind: GuardKind,
    content: str,
    *,
    tool: str | None = None,
    route: str | None = None,
    partial: bool = False,
) -> GuardSubject:
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


#: Arguments as JSON, by one encoder made once (``json.dumps`` with options makes one a call).
_encode = json.JSONEncoder(ensure_ascii=False).encode

#: Makes a subject from a tuple of its fields, skipping ``GuardSubject.__new__``'s frame.
_subject = cast(
    "Callable[[type[GuardSubject], tuple[object, ...]], GuardSubject]",
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
) -> Outcome | Awaitable[Outcome]:
    """Ask the agent's guardrails of ``kind`` about ``content``, in order (each sees what the
    one before let through, replacements included). The :class:`Outcome` at once while every
    check answers at once (no coroutine is made); from the first check that returns an
    awaitable on, an awaitable of it. ``GuardTrip`` on a stop (raised by the awaitable, when
    one is returned)."""
    # The path every checked item takes: no helper calls while checks allow at once.
    rails = agent.spec.guards.of(kind)
    header = agent.header
    about = _subject(
        GuardSubject,
        (
            kind,
            content,
            agent.name,
            header.id,
            header.delegation_depth,
            agent.caller,
            tool,
            route,
            False,
        ),
    )
    events = _NONE
    for index, rail in enumerate(rails):
        try:
            answer = rail.check(about)
        except Exception as exc:  # a check that raises never lets content through unchecked
            answer = _failed(rail, exc)
        if answer.__class__ is not GuardVerdict:
            return _finish(agent, rails[index:], _awaitable(answer), about, events, target)
        if answer.action != "allow":  # type: ignore[union-attr]
            about, events = _apply(rail, answer, about, events, target)  # type: ignore[arg-type]
    return Outcome(about.content, events)


async def check(
    agent: Agent,
    kind: GuardKind,
    content: str,
    *,
    target: str | None = None,
    tool: str | None = None,
    route: str | None = None,
) -> Outcome:
    """:func:`begin`, awaited when it must be."""
    outcome = begin(agent, kind, content, target=target, tool=tool, route=route)
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


def pick_guardrails(
    offered: Mapping[str, Guardrail],
    names: Iterable[str],
    where: str,
    remedy: str = 'load the plugin that offers it (tether.guardrails offers "pii" and '
    '"no-secrets"), or fix the name',
) -> tuple[Guardrail, ...]:
    """The guardrails ``names`` names, from those ``offered`` (``GUARDRAIL_INVALID`` for a
    name nobody offers; ``where`` says which key named it, ``remedy`` what to do)."""
    picked: list[Guardrail] = []
    for name in dict.fromkeys(names):
        rail = offered.get(name)
        if rail is None:
            known = ", ".join(sorted(offered)) or "none"
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'{where} names guardrail "{name}", which no loaded plugin offers '
                f"(offered: {known})",
                remedy=remedy,
            )
        picked.append(rail)
    return tuple(picked)


def off_route(
    provider: object, rails: Iterable[Guardrail], *, agent: str | None, plugin: str | None = None
) -> GuardrailError | None:
    """Why ``rails`` (an agent's guardrails, passed down to its children) cannot reach inside
    a child of ``provider``: it is a remote agent (``route`` ``acp`` or ``a2a``) whose entry
    says neither ``forward`` nor ``exempt`` and one of them checks more than
    ``remote_result``. ``None`` when nothing is out of reach. The check at load
    (``build_preset``) and at each remote delegation (``SubagentRuntime``) raise it."""
    route = getattr(provider, "route", None)
    if route not in REMOTE_ROUTES or getattr(provider, "guardrails_policy", None) in ROUTE_POLICIES:
        return None
    for rail in rails:
        kinds = sorted(kind for kind in rail.kinds if kind != "remote_result")
        if not kinds:
            continue
        name = getattr(provider, "name", "?")
        owner = f' (plugin "{plugin}")' if plugin else ""
        return GuardrailError(
            ErrorCode.GUARDRAIL_INVALID,
            f'guardrail "{rail.name}" of agent {agent or "(global)"} checks {", ".join(kinds)} '
            f'in every child below it, and subagent provider "{name}"{owner} is a remote agent '
            f"over {str(route).upper()}, whose content tether cannot check",
            plugin=plugin,
            key=f'[[plugin.{plugin}.agents]] name = "{name}", guardrails' if plugin else None,
            remedy='set guardrails = "forward" on that entry if the remote agent is a tether '
            '(it applies the guardrail to the session it opens), or guardrails = "exempt" to '
            "let it run unchecked inside (its result is still checked as remote_result)",
        )
    return None


def forwarded_guardrails(
    offered: Mapping[str, Guardrail], names: Sequence[str]
) -> tuple[Guardrail, ...]:
    """The guardrails a delegating tether forwarded by name to a session it opens here
    (``tether acp``, ``tether a2a serve``), as this profile offers them to the served agent:
    ``GUARDRAIL_INVALID`` for a name it does not offer, so the session is not opened and the
    delegation fails rather than run unchecked (docs/guardrails.md)."""
    return pick_guardrails(
        offered,
        names,
        'the delegating tether ("tether/guardrails")',
        "offer it in this profile too (a plugin of its own; tether.guardrails, the shipped "
        '"pii" and "no-secrets", loads when the profile turns some guardrail on), or set '
        'guardrails = "exempt" on this agent\'s entry in the delegating profile',
    )


def forwarded_record(rails: Sequence[Guardrail]) -> list[Event]:
    """The setup window of a new session checked by ``rails`` forwarded by a delegating
    tether: a ``guardrails`` descriptor naming them (none when there are none), which
    ``delegation_pins`` reads on every restore."""
    if not rails:
        return []
    return [
        DescriptorEvent(kind=GUARDRAILS_DESCRIPTOR, data={"guardrails": [g.name for g in rails]})
    ]


def offered_guardrails(found: Iterable[tuple[str, Guardrail]]) -> dict[str, Guardrail]:
    """Guardrails by name, as plugins offered them; a name offered by two plugins, or not a
    name, is ``GUARDRAIL_INVALID``."""
    offered: dict[str, Guardrail] = {}
    owners: dict[str, str] = {}
    for plugin, rail in found:
        name = cast("object", rail.name)  # a plugin may break the contract
        if not isinstance(name, str) or not name or not set(name) <= _NAME_CHARS:
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'plugin "{plugin}" offers a guardrail named {name!r:.60}, which is not a name',
                plugin=plugin,
                remedy="name it with letters, digits, '-', '_' or '.'",
            )
        kinds = rail.kinds
        unknown = [k for k in kinds if k not in GUARD_KINDS]
        if unknown or not kinds or isinstance(kinds, str):
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'guardrail "{name}" of plugin "{plugin}" checks {kinds!r:.80}, not kinds of '
                f"content ({', '.join(GUARD_KINDS)})",
                plugin=plugin,
                remedy="set kinds to a set of those kinds",
            )
        if name in offered and offered[name] is not rail:
            raise GuardrailError(
                ErrorCode.GUARDRAIL_INVALID,
                f'guardrail "{name}" is offered by plugin "{owners[name]}" and by plugin '
                f'"{plugin}"',
                plugin=plugin,
                remedy="load one of them, or rename one guardrail",
            )
        offered[name], owners[name] = rail, plugin
    return offered


def arguments_text(arguments: Mapping[str, Any]) -> str:
    """A call's arguments as a ``tool_call`` guardrail reads them (JSON)."""
    return _encode(arguments)


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


def named_guardrails(runtime: Runtime | None, names: Sequence[str]) -> tuple[Guardrail, ...]:
    """The guardrails ``names`` names, as any agent's scope of ``runtime``'s profile offers
    them (a child's log names those its parent passed down); ``GUARDRAIL_INVALID`` for a name
    no loaded plugin offers any more, so a child is never run unchecked."""
    found: dict[str, Guardrail] = {}
    if runtime is not None:
        for agent in (None, *runtime.kernel.agents):
            offered = runtime.preset(agent).offered_guardrails
            found.update((n, offered[n]) for n in names if n in offered and n not in found)
            if len(found) == len(names):
                break
    return pick_guardrails(found, names, "the session's delegation record")
