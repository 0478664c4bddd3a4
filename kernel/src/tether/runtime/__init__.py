"""The runtime: the live half of tether (open agents, permission host, skills, subagents).

See :class:`Runtime`. The kernel (:mod:`tether.loading`) is what a profile loads to and never
changes; a runtime is what one process does with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ._collector import RUNTIME_THRESHOLDS, tuned_collector
    from ._follow import INTERRUPT_GRACE, FollowedSession
    from ._hold import COMPACT_GESTURE, HeldSession
    from ._hosts import (
        FOLLOW_POLL,
        SessionHost,
        follow_turn,
        profile_session_host,
        relayed_deltas,
        turn_began,
    )
    from ._runtime import Runtime, compose_agent
    from ._send import SentMessage

__all__ = (
    "COMPACT_GESTURE",
    "FOLLOW_POLL",
    "INTERRUPT_GRACE",
    "RUNTIME_THRESHOLDS",
    "FollowedSession",
    "HeldSession",
    "Runtime",
    "SentMessage",
    "SessionHost",
    "compose_agent",
    "follow_turn",
    "profile_session_host",
    "relayed_deltas",
    "tuned_collector",
    "turn_began",
)

# Imported when first used: a local `tether run` follows no host and sends no person's message,
# and `tether check` builds a runtime without the session hosts' streams (docs/startup.md).
_LAZY = {
    "COMPACT_GESTURE": "_hold",
    "FOLLOW_POLL": "_hosts",
    "INTERRUPT_GRACE": "_follow",
    "RUNTIME_THRESHOLDS": "_collector",
    "FollowedSession": "_follow",
    "HeldSession": "_hold",
    "Runtime": "_runtime",
    "SentMessage": "_send",
    "SessionHost": "_hosts",
    "compose_agent": "_runtime",
    "follow_turn": "_hosts",
    "profile_session_host": "_hosts",
    "relayed_deltas": "_hosts",
    "tuned_collector": "_collector",
    "turn_began": "_hosts",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
