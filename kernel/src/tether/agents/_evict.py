"""Oversized tool results, kept in the workspace: the model reads a preview and pages the rest.

A tool result longer than the agent's ``limits.tool_result_max_chars`` (80,000 characters by
default, about 20,000 tokens; 0: never) is written whole to
``<workspace>/.tether/results/<call id>.txt`` (atomically, by the workspace's confinement), and
the result the model reads, and the session's log keeps, is a short preview instead: the size,
the file's path relative to the workspace and how to read more (``read_file`` with ``offset``
and ``limit``, ``search_files``), then the first and last lines. deepagents does the same
(``/large_tool_results/<id>``, the first lines as a sample); tether shows the last lines too,
because a command's verdict (a test run's summary, a traceback) is usually at the end.

The log holds the preview, never the full text, so restoring a session, replaying it and
compacting it read what the model read; the file stays with the workspace (and goes with it).
When the file cannot be written (a full disk, a workspace folder swapped for a link), the
result is cut to the limit with a note saying so, so that the log stays bounded anyway.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

import anyio.to_thread

from ..errors import TetherError
from ..ground import PathRefused, write_confined

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("PREVIEW_HEAD_LINES", "PREVIEW_TAIL_LINES", "RESULTS_FOLDER", "evict")

#: Where evicted results go, relative to the workspace.
RESULTS_FOLDER = ".tether/results"
#: Lines of the preview from the start and from the end of the result.
PREVIEW_HEAD_LINES = 10
PREVIEW_TAIL_LINES = 5
#: A preview line longer than this is cut (a one-line JSON document would be the whole result).
PREVIEW_LINE_CHARS = 300
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def result_name(call_id: str) -> str:
    """The file name for a call's result: the id where it is a safe name, else the safe part
    and a hash of the id (model-made ids may hold anything, ``/`` and ``..`` included)."""
    safe = _UNSAFE.sub("_", call_id)[:80].lstrip(".")
    if safe != call_id or not safe:
        safe = f"{safe}-{hashlib.sha256(call_id.encode('utf-8', 'replace')).hexdigest()[:12]}"
    return f"{safe}.txt"


def _line(text: str) -> str:
    if len(text) <= PREVIEW_LINE_CHARS:
        return text
    return f"{text[:PREVIEW_LINE_CHARS]}... [{len(text) - PREVIEW_LINE_CHARS:,} more characters]"


def preview(content: str, relative: str, limit: int) -> str:
    """What the model reads instead of ``content``, saved in full at ``relative``."""
    lines = content.splitlines()
    head = lines[:PREVIEW_HEAD_LINES]
    tail = lines[max(PREVIEW_HEAD_LINES, len(lines) - PREVIEW_TAIL_LINES) :]
    hidden = len(lines) - len(head) - len(tail)
    parts = [
        f"[this result is {len(content):,} characters in {len(lines):,} lines, more than the "
        f"{limit:,} a tool result may have: it was saved in full to {relative} in the "
        f'workspace. Read it with read_file (path "{relative}", offset = the first line, '
        "limit = how many lines), or search it with search_files; read only the parts you "
        "need.]",
        f"First {len(head)} lines:",
        *map(_line, head),
    ]
    if tail:
        if hidden:
            parts.append(f"[... {hidden:,} lines not shown ...]")
        parts += [f"Last {len(tail)} lines (from line {len(lines) - len(tail) + 1:,}):"]
        parts += map(_line, tail)
    return "\n".join(parts)


async def evict(agent: Agent, call_id: str, content: str) -> str:
    """``content``, or its preview when it is over the agent's limit (saved in full in the
    workspace, see the module)."""
    limit = agent.spec.limits.tool_result_max_chars
    if limit <= 0 or len(content) <= limit:
        return content
    root = agent.workspace.root
    relative = f"{RESULTS_FOLDER}/{result_name(call_id)}"
    data = content.encode("utf-8", "replace")
    try:
        await anyio.to_thread.run_sync(write_confined, root, relative, data)
    except (OSError, PathRefused, TetherError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return (
            f"{content[:limit]}\n[cut: this result is {len(content):,} characters, more than "
            f"the {limit:,} a tool result may have, and it could not be saved to {relative} in "
            f"the workspace ({why})]"
        )
    return preview(content, relative, limit)
