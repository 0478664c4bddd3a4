"""Crash repair: the turn a log opened and never closed, and the events that close it.

A process that stops mid-turn (SIGKILL, power loss) leaves a ``turn/start`` without its
``turn/end``, perhaps with tool calls that have no result. Whoever next takes the session's
lease closes that turn exactly once: each open call is answered as interrupted (the tool may or
may not have run) and the turn ends ``aborted``, so the history is one a model API accepts.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..store import Event, ToolResult, TurnEnded
from ..store.replay import OpenTurn, fold

__all__ = ("INTERRUPTED_CALL", "OpenTurn", "closing_events", "find_open_turn")

#: The result an open call gets when its turn is closed after the process stopped.
INTERRUPTED_CALL = (
    "error: interrupted: the process stopped before this tool finished; it may or may not have run"
)
#: Why a turn closed on restore ended (its ``turn/end.error``).
INTERRUPTED_TURN = "the process stopped during this turn; closed when the session was restored"


def find_open_turn(log: Sequence[Event]) -> OpenTurn | None:
    """The log's open turn, if its last turn never ended (``fold(log).open_turn``)."""
    return fold(log).open_turn


def closing_events(open_turn: OpenTurn) -> list[Event]:
    """What closes ``open_turn``: an interrupted result per open call, then ``turn/end``."""
    events: list[Event] = [
        ToolResult(tool_call_id=call.id, name=call.name, content=INTERRUPTED_CALL, is_error=True)
        for call in open_turn.calls
    ]
    events.append(TurnEnded(turn=open_turn.turn, stop_reason="aborted", error=INTERRUPTED_TURN))
    return events
