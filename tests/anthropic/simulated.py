"""A stand-in for Anthropic's prompt cache, as its documentation describes it, and a message
rendered as the Messages API streams it: what the local server answers when a test runs a
whole session instead of playing recorded answers one by one.

The cache (https://docs.claude.com/en/docs/build-with-claude/prompt-caching): a request's
prefix is its tools, then ``system``, then the blocks of ``messages``, in order. Only a block
marked ``cache_control`` writes an entry: the prefix up to and including it. For each mark the
API looks for an entry at that block and at most 20 blocks before it; the longest entry found
is read (``cache_read_input_tokens``), the prefix from there to the last mark is written
(``cache_creation_input_tokens``), and what follows the last mark is ``input_tokens``. The marks
themselves are not part of the prefix. Tokens here are the bytes of a block's JSON over four.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

#: How many blocks before a mark the API looks for an entry.
LOOKBACK = 20


def unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key != "cache_control"}


def prefix_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The request as the cache sees it: ``(where, block)`` for each tool, system block and
    message block, in order (``where``: ``tools``, ``system`` or the message's role)."""
    found: list[tuple[str, dict[str, Any]]] = [("tools", t) for t in body.get("tools", [])]
    found += [("system", block) for block in body.get("system", [])]
    for message in body["messages"]:
        found += [(message["role"], block) for block in message["content"]]
    return found


def tokens(block: dict[str, Any]) -> int:
    return (len(json.dumps(unmarked(block), sort_keys=True).encode()) + 3) // 4


@dataclass
class PromptCache:
    """Entries by the digest of the prefix they end; what each request read and wrote."""

    entries: set[str] = field(default_factory=set[str])

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = prefix_blocks(body)
        digests: list[str] = []
        running = hashlib.sha256()
        for where, block in blocks:
            running.update(json.dumps([where, unmarked(block)], sort_keys=True).encode())
            digests.append(running.copy().hexdigest())
        sizes = [tokens(block) for _, block in blocks]
        marks = [i for i, (_, block) in enumerate(blocks) if "cache_control" in block]
        assert len(marks) <= 4, "the API refuses more than four cache_control blocks"
        read = -1  # the last block of the longest entry found
        for mark in marks:
            for at in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if digests[at] in self.entries:
                    read = max(read, at)
                    break
        last = marks[-1] if marks else -1
        for mark in marks:
            if mark > read:
                self.entries.add(digests[mark])
        return {
            "cache_read_input_tokens": sum(sizes[: read + 1]),
            "cache_creation_input_tokens": sum(sizes[read + 1 : last + 1]) if last > read else 0,
            "input_tokens": sum(sizes[max(read, last) + 1 :]),
        }


def sse(events: list[dict[str, Any]]) -> bytes:
    """Events as the API sends them: ``event: TYPE`` and one ``data:`` line each."""
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events
    ).encode()


def message_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole ``message`` as the stream of events that carries it (text and tool input in
    two pieces each, a ping in the middle)."""
    usage = dict(message["usage"])
    output = usage.pop("output_tokens", 0)
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            text = block["text"]
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
        else:
            arguments = json.dumps(block["input"])
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            for piece in (arguments[:3], arguments[3:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": output},
        }
    )
    events.append({"type": "message_stop"})
    return events
