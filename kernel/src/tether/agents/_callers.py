"""Who is asking: admitting a caller, and the sender's caller on a message (docs/callers.md).

A session's gates (:class:`~tether.contracts.CallerGate`: the profile's ``[agent.NAME]
callers`` first, then what plugins offer through ``tether_caller_gates``) are asked before a
new session is created and before every message a caller sends is accepted; the first that
answers with a reason refuses (``CALLER_REFUSED``) and nothing is written. Messages a
session's own children send (notices, task results) come from no caller and are not asked
about.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..contracts import Admission, Caller, CallerGate, CallerRule
from ..errors import CallerError, ErrorCode

if TYPE_CHECKING:
    from ..store import MessageSource

__all__ = ("ADMITTED_KINDS", "ProfileGate", "admit", "admit_caller", "with_caller")

#: The message sources a caller sends from outside (a person, a client): asked about by the
#: gates when no session sent them. What another session sends (a parent's task message, a
#: child's notice or result: ``source.sender``, or kind ``notice``/``subagent``) is not.
ADMITTED_KINDS = frozenset({"user", "followup", "steer", "inject"})


@dataclass
class ProfileGate:
    """The profile's gate on an agent's sessions: ``[agent.NAME] callers``."""

    rule: CallerRule
    agent: str
    name: str = "profile"

    def admit(self, admission: Admission) -> str | None:
        """``None`` when the rule matches the caller; else who it admits."""
        if self.rule.admits(admission.caller):
            return None
        return self.rule.describe()


def admit(gates: Sequence[CallerGate], admission: Admission) -> None:
    """Ask each of ``gates`` in order; the first reason refuses with ``CALLER_REFUSED``. A gate
    that raises refuses too (a gate that cannot decide lets nobody in)."""
    for gate in gates:
        try:
            reason = gate.admit(admission)
        except Exception as exc:
            reason = f"the gate failed: {type(exc).__name__}: {exc}"
        if reason is not None:
            raise refusal(admission, gate.name, reason)


#: The public name (``tether.agents.admit_caller``): what a surface that admits a caller before
#: any session exists (``tether a2a serve``, a cluster's worker) asks the gates with.
admit_caller = admit


def refusal(admission: Admission, gate: str, reason: str) -> CallerError:
    """The ``CALLER_REFUSED`` error for a refused ``admission``."""
    who = f'caller "{admission.caller.id}"' if admission.caller is not None else "no caller"
    if admission.kind == "session":
        what = "may not start a session"
    elif admission.session_id:
        what = f"may not send to session {admission.session_id}"
    else:
        what = "may not send to a new session"
    agent = f' (agent "{admission.agent}")' if admission.agent else ""
    return CallerError(
        ErrorCode.CALLER_REFUSED,
        f'{who} {what}{agent}: {reason} (refused by gate "{gate}")',
        remedy="send as a caller the gate admits, or change the gate ([agent.NAME] callers, "
        "or the plugin that offers it)",
    )


def with_caller(source: MessageSource, caller: Caller | None) -> MessageSource:
    """``source`` sent by ``caller`` (``source`` itself when it names that caller already, or
    when ``caller`` is ``None``)."""
    if caller is None or source.caller is caller:
        return source
    return source.model_copy(update={"caller": caller})
