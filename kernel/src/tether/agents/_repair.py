"""Crash repair: the turn a log opened and never closed, and the events that close it.

A process that stops mid-turn (SIGKILL, power loss) leaves a ``turn/start`` without its
``turn/end``, perhaps with tool calls that have no result. Whoever next takes the session's
lease closes that turn exactly once: each open call is answered as interrupted (the tool may or
may not have run) and the turn ends ``aborted``, so the history is one a model API accepts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..models import ToolCall
from ..store import AssistantMessage, Event, ToolResult, TurnEnded, TurnStarted

__all__ = ("INTERRUPTED_CALL", "OpenTurn", "closing_events", "find_open_turn")

#: The result an open call gets when its turn is closed after the process stopped.
INTERRUPTED_CALL = (
    "error: interrupted: the process stopped before this tool finished; it may or may not have run"
)
#: Why a turn closed on restore ended (its ``turn/end.error``).
INTERRUPTED_TURN = "the process stopped during this turn; closed when the session was restored"


@dataclass(frozen=True)
class OpenTurn:
    """A turn the log opened and never closed, and its calls that have no result."""

    turn: int
    calls: tuple[ToolCall, ...]


def find_open_turn(log: Iterable[Event]) -> OpenTurn | None:
    """The log's open turn, if its last turn never ended."""
    open_turn: int | None = None
    open_calls: dict[str, ToolCall] = {}
    for event in log:
        match event:
            case TurnStarted(turn=turn):
                open_turn = turn
            case TurnEnded():
                open_turn = None
                open_calls = {}
            case AssistantMessage(tool_calls=calls):
                open_calls = {call.id: call for call in calls}
            case ToolResult(tool_call_id=call_id):
                open_calls.pop(call_id, None)
            case _:
                pass
    if open_turn is None:
        return None
    return OpenTurn(open_turn, tuple(open_calls.values()))


def closing_events(open_turn: OpenTurn) -> list[Event]:
    """What closes ``open_turn``: an interrupted result per open call, then ``turn/end``."""
    events: list[Event] = [
        ToolResult(tool_call_id=call.id, name=call.name, content=INTERRUPTED_CALL, is_error=True)
        for call in open_turn.calls
    ]
    events.append(TurnEnded(turn=open_turn.turn, stop_reason="aborted", error=INTERRUPTED_TURN))
    return events
