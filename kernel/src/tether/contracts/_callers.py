"""The caller contract: who is asking (docs/callers.md).

A **caller** is the principal a message comes from: the OS user of ``tether run``, the
authenticated client of ``tether a2a serve``, the person behind an ACP editor, the submitter of
a cluster task, the agent that delegated. It is recorded durably: the session header keeps the
caller that created the session (its *initiator*), and every accepted message keeps its sender's
caller in its :class:`~tether.store.MessageSource`. The agent's *current* caller is that of the
last message it took; dynamic instructions, skill providers, declared subagents and tool sources
see it through their contexts, so one profile can give different callers different context.

A plugin may refuse a caller: the ``tether_caller_gates`` hook returns :class:`CallerGate`
objects, each asked to :meth:`~CallerGate.admit` every new session and every message accepted
for a session (``CALLER_REFUSED`` when one answers with a reason).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

__all__ = ("Admission", "AdmissionKind", "Caller", "CallerGate", "CallerRule", "CallerVia")

CallerVia = Literal["cli", "env", "acp", "a2a", "cluster", "subagent", "api"]
"""The surface that vouched for a caller: the command line (the OS user, ``--caller``), the
environment (``TETHER_CALLER``), an ACP client, an A2A client the server authenticated, a cluster
submitter, a parent agent, or a program using the Python API."""

AdmissionKind = Literal["session", "followup", "steer", "inject"]
"""What a caller asks a gate to admit: a new session (or one taken up again), or a message."""

#: An id: a scheme-like prefix and a name, printable, no spaces (``os:alice``, ``a2a:billing``).
_CALLER_ID = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")


class Caller(BaseModel):
    """A principal: who a session or a message comes from.

    ``id`` is stable and unique within its surface, prefixed with it by convention
    (``os:alice``, ``a2a:billing-bot``, ``acp:ed@example.com``); ``name`` is for people;
    ``claims`` are what the surface vouches for about the caller (eve's session ``auth``
    attributes: ``{"team": "billing", "plan": "enterprise"}``), JSON values. Two callers are
    the same when all three are equal.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str | None = Field(default=None, exclude_if=lambda value: value is None)
    via: CallerVia = "api"
    claims: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda value: not value)

    @field_validator("id")
    @classmethod
    def _printable_id(cls, value: str) -> str:
        if not _CALLER_ID.match(value):
            raise ValueError(
                "a caller id is 1 to 200 printable characters without spaces (os:alice)"
            )
        return value

    def __hash__(self) -> int:  # claims is a dict: hash what identifies the caller
        return hash((self.id, self.via))

    def claim(self, name: str, default: Any = None) -> Any:
        """The claim ``name``, or ``default`` when the caller does not carry it."""
        return self.claims.get(name, default)


@dataclass(frozen=True, slots=True)
class Admission:
    """What a :class:`CallerGate` is asked: may ``caller`` do ``kind`` on ``session_id``, a
    session of the agent preset ``agent`` (``None``: the profile's default agent)?
    ``caller`` is ``None`` when the surface knows nobody (a program that named no caller)."""

    session_id: str
    agent: str | None
    caller: Caller | None
    kind: AdmissionKind


@runtime_checkable
class CallerGate(Protocol):
    """Decides whether a caller may start or continue a session (``tether_caller_gates``).

    ``admit`` returns ``None`` to let the caller in, or a reason the caller is refused (one
    sentence for the caller: what it may not do and why); the kernel then raises
    ``CALLER_REFUSED`` with it and nothing is written. It runs in the event loop for every new
    session and every accepted message: keep it to a lookup (no I/O)."""

    name: str
    """Names the gate in a refusal (``refused by gate "teams"``)."""

    def admit(self, admission: Admission) -> str | None: ...


#: A claim's value in a rule: one JSON scalar, or a list of them (any of which matches).
ClaimValue = str | int | float | bool
_MISSING = object()
#: An id pattern: a caller id in which ``*`` stands for any run of characters.
_PATTERN = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")


class _Matcher:
    """A rule made fast to ask: the ids without a wildcard as a set, the patterns as one
    expression, and per claim the ``(type, value)`` pairs it accepts (so ``true`` never
    stands for ``1``)."""

    __slots__ = ("ids", "wanted", "wild")

    def __init__(
        self, allow: tuple[str, ...], claims: dict[str, ClaimValue | tuple[ClaimValue, ...]]
    ) -> None:
        self.ids = frozenset(p for p in allow if "*" not in p)
        wild = [fnmatch.translate(p) for p in allow if "*" in p]
        self.wild = re.compile("|".join(wild)) if wild else None
        self.wanted = tuple(
            (name, frozenset((v.__class__, v) for v in (w if isinstance(w, tuple) else (w,))))
            for name, w in claims.items()
        )

    def admits(self, caller: Caller) -> bool:
        identity = caller.id
        if identity in self.ids:
            return True
        wild = self.wild
        if wild is not None and wild.match(identity):
            return True
        wanted = self.wanted
        if not wanted:
            return False
        held = caller.claims
        for name, accepted in wanted:
            value: object = held.get(name, _MISSING)
            if value.__class__ is list or value.__class__ is tuple:
                items = cast("list[object] | tuple[object, ...]", value)
                if not any((item.__class__, item) in accepted for item in items):
                    return False
            elif (value.__class__, value) not in accepted:
                return False
        return True


class CallerRule(BaseModel):
    """Which callers something is for: a profile's gate on an agent's sessions (``[agent.NAME]
    callers``) and the condition of a declared subagent (``[agent.NAME] when``), the same
    syntax both times (docs/callers.md)::

        callers = { allow = ["os:alice", "team:*"], claims = { team = "billing" } }

    A caller matches when its id matches one of ``allow`` (``*`` stands for any run of
    characters: ``"*"`` is every caller) **or** it carries every claim of ``claims`` (a
    claim matches when equal, or when the caller's claim is a list holding it; a list in the
    rule matches any of its values). No caller (``None``: the surface knew nobody) never
    matches. A rule names at least one of the two.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] = ()
    """Caller id patterns (``os:alice``, ``a2a:*``, ``*``)."""
    claims: dict[str, ClaimValue | tuple[ClaimValue, ...]] = Field(default_factory=dict)
    """Claims a caller must all carry (``{ team = "billing", plan = ["pro", "enterprise"] }``)."""

    @field_validator("allow")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            if not _PATTERN.match(pattern):
                raise ValueError(
                    f"{pattern!r} is not a caller id pattern: 1 to 200 printable characters "
                    "without spaces, * for any run of them (os:alice, team:*)"
                )
        return value

    # Worked out once (a gate asks on every message): see _Matcher.
    _matcher: _Matcher = PrivateAttr()

    @model_validator(mode="after")
    def _names_someone(self) -> CallerRule:
        if not self.allow and not self.claims:
            raise ValueError(
                'a callers rule admits nobody: give allow = ["ID", ...] or claims = { ... }'
            )
        self._matcher = _Matcher(self.allow, self.claims)
        return self

    def admits(self, caller: Caller | None) -> bool:
        """Whether ``caller`` matches the rule (see the class docstring)."""
        # Read where pydantic keeps it: a private attribute's own lookup costs microseconds.
        private = cast("dict[str, _Matcher]", self.__pydantic_private__)
        return caller is not None and private["_matcher"].admits(caller)

    def describe(self) -> str:
        """Who the rule admits, for a refusal: ``only callers os:alice, team:* or with claim
        team = "billing" may``."""
        parts: list[str] = []
        if self.allow:
            parts.append(f"callers {', '.join(self.allow)}")
        if self.claims:
            claims = " and ".join(
                f"{name} = {_shown(wanted)}" for name, wanted in self.claims.items()
            )
            noun = "claims" if len(self.claims) > 1 else "claim"
            parts.append(
                f"callers with {noun} {claims}" if not self.allow else f"with {noun} {claims}"
            )
        return "only " + " or ".join(parts) + " may"


def _shown(value: ClaimValue | tuple[ClaimValue, ...]) -> str:
    if isinstance(value, tuple):
        return "one of [" + ", ".join(_shown(v) for v in value) + "]"
    return (
        f'"{value}"'
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )
