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

import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ("Admission", "AdmissionKind", "Caller", "CallerGate", "CallerVia")

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
