"""A log checker: the promises a session log keeps, whatever crashed while it was written."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..store import (
    AssistantMessage,
    Event,
    InboxAccepted,
    InboxDiscarded,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

__all__ = ("log_problems", "tree_problems")


def log_problems(events: Sequence[Event], *, settled: bool = True) -> list[str]:
    """What is wrong with one session's log, as sentences (empty: nothing).

    Checked: every turn starts once and ends once, in order, and nothing of a turn follows
    its end; every tool call has exactly one result, after its call and within its turn; every
    accepted message is claimed at most once (exactly once or discarded when ``settled``, that
    is, after the session was recovered and ran until quiet); no message id is accepted twice.
    """
    problems: list[str] = []
    open_turn: int | None = None
    last_turn = 0
    calls: dict[str, int] = {}  # call id -> position of its call
    results: Counter[str] = Counter()
    accepted: Counter[str] = Counter()
    claims: Counter[str] = Counter()
    discarded: set[str] = set()
    for seq, event in enumerate(events, start=1):
        match event:
            case TurnStarted(turn=turn):
                if open_turn is not None:
                    problems.append(
                        f"event {seq}: turn {turn} starts while turn {open_turn} is open"
                    )
                if turn <= last_turn:
                    problems.append(f"event {seq}: turn {turn} starts after turn {last_turn}")
                open_turn, last_turn = turn, max(turn, last_turn)
            case TurnEnded(turn=turn):
                if open_turn != turn:
                    problems.append(f"event {seq}: turn {turn} ends but is not open")
                open_turn = None
            case AssistantMessage(tool_calls=tool_calls):
                if open_turn is None:
                    problems.append(f"event {seq}: an assistant message outside a turn")
                for call in tool_calls:
                    if call.id in calls:
                        problems.append(f"event {seq}: tool call {call.id} is made twice")
                    calls[call.id] = seq
            case ToolResult(tool_call_id=call_id):
                results[call_id] += 1
                if call_id not in calls:
                    problems.append(f"event {seq}: a result for unknown tool call {call_id}")
                if open_turn is None:
                    problems.append(f"event {seq}: the result of {call_id} is outside a turn")
            case InboxAccepted(message_id=message_id):
                accepted[message_id] += 1
            case UserMessage(message_id=message_id):
                claims[message_id] += 1
            case InboxDiscarded(message_id=message_id):
                discarded.add(message_id)
            case _:
                pass
    if open_turn is not None:
        problems.append(f"turn {open_turn} never ends")
    for call_id in calls:
        if results[call_id] != 1:
            problems.append(f"tool call {call_id} has {results[call_id]} results, not 1")
    for message_id, count in accepted.items():
        if count > 1:
            problems.append(f"message {message_id} is accepted {count} times")
        runs = claims[message_id]
        if runs > 1:
            problems.append(f"message {message_id} runs {runs} times")
        elif settled and runs == 0 and message_id not in discarded:
            problems.append(f"message {message_id} was accepted and never ran")
    return problems


async def tree_problems(store: Any, root: str, *, settled: bool = True) -> dict[str, list[str]]:
    """:func:`log_problems` of ``root`` and of every session below it, by session id (only
    sessions with problems are listed)."""
    found: dict[str, list[str]] = {}
    stack, seen = [root], {root}
    while stack:
        session_id = stack.pop()
        events = [stored.event for stored in await store.events(session_id)]
        problems = log_problems(events, settled=settled)
        if problems:
            found[session_id] = problems
        for header in await store.sessions(parent=session_id):
            if header.id not in seen:
                seen.add(header.id)
                stack.append(header.id)
    return found
