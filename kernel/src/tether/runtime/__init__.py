"""The runtime: the live half of tether (open agents, permission host, skills, subagents,
plugins' per-runtime state).

See :class:`Runtime`. The kernel (:mod:`tether.loading`) is what a profile loads to and never
changes; a runtime is what one process does with it, and :func:`profile_store` opens the
session store its profile names.

The names below are imported on first use (a module ``__getattr__``): a command that only opens
the store (``tether sessions list``) imports no agent, and a plugin module that declares a
:class:`StateKey` at import, while the profile loads, does not import the runtime itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import SessionHost
    from ._branch import (
        BRANCH_DESCRIPTOR,
        branch_origin,
        branch_session,
        completed_turns,
        rewind_session,
    )
    from ._collector import RUNTIME_THRESHOLDS, tuned_collector
    from ._follow import INTERRUPT_GRACE, FollowedSession
    from ._hold import COMPACT_GESTURE, HeldSession
    from ._hosts import (
        FOLLOW_POLL,
        follow_turn,
        profile_session_host,
        relayed_deltas,
        turn_began,
    )
    from ._runtime import Runtime, compose_agent
    from ._send import SentMessage, follow_message
    from ._state import ClosableState, StateKey
    from ._stores import profile_store
    from ._tools import ToolCatalog

__all__ = (
    "BRANCH_DESCRIPTOR",
    "COMPACT_GESTURE",
    "FOLLOW_POLL",
    "INTERRUPT_GRACE",
    "RUNTIME_THRESHOLDS",
    "ClosableState",
    "FollowedSession",
    "HeldSession",
    "Runtime",
    "SentMessage",
    "SessionHost",
    "StateKey",
    "ToolCatalog",
    "branch_origin",
    "branch_session",
    "completed_turns",
    "compose_agent",
    "follow_message",
    "follow_turn",
    "profile_session_host",
    "profile_store",
    "relayed_deltas",
    "rewind_session",
    "tuned_collector",
    "turn_began",
)

# A value starting with a dot is a module beside this package (the contracts room).
_LAZY = {
    "BRANCH_DESCRIPTOR": "_branch",
    "branch_origin": "_branch",
    "branch_session": "_branch",
    "completed_turns": "_branch",
    "rewind_session": "_branch",
    "RUNTIME_THRESHOLDS": "_collector",
    "tuned_collector": "_collector",
    "INTERRUPT_GRACE": "_follow",
    "FollowedSession": "_follow",
    "COMPACT_GESTURE": "_hold",
    "HeldSession": "_hold",
    "FOLLOW_POLL": "_hosts",
    "SessionHost": ".contracts",
    "follow_turn": "_hosts",
    "profile_session_host": "_hosts",
    "relayed_deltas": "_hosts",
    "turn_began": "_hosts",
    "Runtime": "_runtime",
    "compose_agent": "_runtime",
    "SentMessage": "_send",
    "follow_message": "_send",
    "ClosableState": "_state",
    "StateKey": "_state",
    "profile_store": "_stores",
    "ToolCatalog": "_tools",
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
