"""The guardrail contract: checks on *content* (docs/guardrails.md).

Approvals and tool filters decide what may run; a **guardrail** looks at what is said. It is
offered by a plugin (the ``tether_guardrails`` hook), turned on by the profile (``[tether]
guardrails`` for every agent, ``[agent.NAME] guardrails`` for one, and every child below
either), and asked about one kind of content at a time (:data:`GuardKind`): a person's
message, a model's answer, a tool call's arguments, a tool's result, a child's result coming
back up, a remote agent's result. It answers with a :class:`GuardVerdict`: allow it, replace
it (the model sees the replacement instead, and the log records that it was replaced), or stop
(a tripwire: the turn ends ``error`` with ``GUARDRAIL_TRIPPED`` and a ``guard`` event says
which guardrail stopped it and why).

:meth:`Guardrail.check` may answer at once (a plain function: a regular expression, a
lookup; the cheap path, no task is started) or return an awaitable (a model asked to judge):
an awaited check of a person's message runs **alongside** the turn's first model request,
which is cancelled if the check trips or replaces the message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._callers import Caller

__all__ = (
    "GUARD_KINDS",
    "GuardAction",
    "GuardKind",
    "GuardSubject",
    "GuardVerdict",
    "Guardrail",
)

GuardKind = Literal["input", "output", "tool_call", "tool_result", "child_result", "remote_result"]
"""What a guardrail sees: ``input`` a message a person (or a parent) sent, as the turn takes
it (a turn's message, a steer, injected context); ``output`` the text of each answer of the
model; ``tool_call`` a call's arguments (compact JSON) before the tool runs; ``tool_result`` what a
tool returned; ``child_result`` what a subagent run in this process or cluster returned;
``remote_result`` what an agent over ACP or A2A returned."""

#: Every kind, in the order a turn meets them.
GUARD_KINDS: tuple[GuardKind, ...] = (
    "input",
    "output",
    "tool_call",
    "tool_result",
    "child_result",
    "remote_result",
)

GuardAction = Literal["allow", "replace", "stop"]


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """A guardrail's answer: ``allow`` (the default; :meth:`allow` returns one shared
    instance); ``replace`` with ``text``, what the model sees instead (for a tool call: the
    call does not run and its result is ``text``); ``stop`` with ``text`` saying why (the
    turn ends)."""

    action: GuardAction = "allow"
    text: str = ""

    @staticmethod
    def allow() -> GuardVerdict:
        return _ALLOW

    @classmethod
    def replace(cls, text: str) -> GuardVerdict:
        return cls("replace", text)

    @classmethod
    def stop(cls, reason: str) -> GuardVerdict:
        return cls("stop", reason)


_ALLOW = GuardVerdict()


class GuardSubject(NamedTuple):
    """One piece of content to check, with where it is (a named tuple: made for every item
    checked, it must cost next to nothing)."""

    kind: GuardKind
    content: str
    """The text (a tool call's arguments as compact JSON)."""
    agent: str | None
    """The agent whose session it is in (``None``: the global scope's)."""
    session_id: str
    depth: int
    """How deep the session is below its root (0: a root)."""
    caller: Caller | None = None
    """Who the session works for now, where known (docs/callers.md)."""
    tool: str | None = None
    """The tool of a call (``tool_call``) or of a result (``tool_result``)."""
    route: str | None = None
    """How a child's result came back (``child_result``, ``remote_result``): ``local``,
    ``cluster``, ``acp``, ``a2a`` (a subagent provider's ``route``)."""
    partial: bool = False
    """An answer still streaming (``output``, for a guardrail that watches streams)."""


@runtime_checkable
class Guardrail(Protocol):
    """Checks content (``tether_guardrails``).

    ``name`` is what the profile turns it on by (letters, digits, ``-``, ``_``); ``kinds``
    the content it wants. ``check`` runs in the event loop: answer a :class:`GuardVerdict` at
    once, or return an awaitable of one for slow work (a model, a service). It must not
    raise: a check that raises stops the turn (``GUARDRAIL_TRIPPED``, the exception named),
    never lets content through unchecked.

    A guardrail may also set ``streaming = True``: its ``output`` check is then also asked
    about the answer while it streams (``subject.partial``), with the text so far, after
    each piece; a ``stop`` then cuts the stream (the partial answer is kept, marked partial).
    Such a check must answer at once (an awaitable is not awaited while streaming).
    """

    name: str
    kinds: Collection[GuardKind]

    def check(self, subject: GuardSubject) -> GuardVerdict | Awaitable[GuardVerdict]: ...
