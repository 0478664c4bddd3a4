"""Prompt-cache breakpoints that follow tether's request layout.

Anthropic caches a request's prefix (tools, then ``system``, then ``messages``) only up to the
blocks marked ``cache_control``, and looks up earlier entries at most 20 blocks before each
mark. tether's requests are built for a prefix cache: the tools and base prompt are the same
bytes for the whole session, and the history only grows, but for one reset per compaction
(docs/turn-loop.md, docs/compaction.md). So every request gets, within the API's limit of four:

1. one mark on the last ``system`` block (on the last tool when there is no base prompt): the
   tools and the base prompt, read by every request of the session, compactions included;
2. one on the last block of the message before the last answer: where the previous request
   ended, which it wrote, so this request reads it however many blocks the step added (a step
   with many tool calls adds more than the 20 blocks the API looks back);
3. one on the last block of the history: written now, read by the next request.

Thinking blocks cannot carry a mark; the mark goes on the last block that can.
"""

from __future__ import annotations

from typing import Any

__all__ = ("EPHEMERAL", "MAX_BREAKPOINTS", "place_breakpoints")

#: What each breakpoint says: the API's five-minute cache.
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
#: The most blocks one request may mark (the API's limit).
MAX_BREAKPOINTS = 4
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def place_breakpoints(body: dict[str, Any]) -> int:
    """Mark ``body`` (a Messages API request, built fresh: its blocks are changed in place)
    as the module says; the number of marks placed (at most three)."""
    placed = 0
    system: list[dict[str, Any]] = body.get("system") or []
    tools: list[dict[str, Any]] = body.get("tools") or []
    if system:
        system[-1]["cache_control"] = EPHEMERAL
        placed += 1
    elif tools:
        tools[-1]["cache_control"] = EPHEMERAL
        placed += 1
    messages: list[dict[str, Any]] = body.get("messages") or []
    answers = [i for i, message in enumerate(messages) if message["role"] == "assistant"]
    if answers and answers[-1] > 0 and _mark(messages[answers[-1] - 1]):
        placed += 1
    if messages and _mark(messages[-1]):
        placed += 1
    return placed


def _mark(message: dict[str, Any]) -> bool:
    blocks: list[dict[str, Any]] = message["content"]
    for block in reversed(blocks):
        if block.get("type") not in _UNMARKABLE:
            if "cache_control" in block:
                return False
            block["cache_control"] = EPHEMERAL
            return True
    return False
