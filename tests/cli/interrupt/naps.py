"""A local plugin for the Ctrl-C tests: tools that take their time.

Each tool prints ``[NAME CALL_ID started]`` on standard output when it starts (the test waits
for that line before it sends SIGINT) and touches ``finished-CALL_ID`` in the current directory
if it ever returns (the test checks that it did not).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio

import tether
from tether.agents import Tool, ToolContext

#: Long enough that a test never sees a tool finish on its own.
NAP = 30.0


def _started(name: str, context: ToolContext) -> None:
    # One write of the whole line: print() writes the text and the newline apart, so two
    # tools starting in two threads at once could run their lines together.
    sys.stdout.write(f"[{name} {context.call_id} started]\n")
    sys.stdout.flush()


def _finished(context: ToolContext) -> str:
    Path(f"finished-{context.call_id}").touch()
    return "rested"


def _nap(arguments: dict[str, Any], context: ToolContext) -> str:
    """A synchronous tool that sleeps: it holds its thread and cannot be cancelled."""
    _started("nap", context)
    time.sleep(NAP)
    return _finished(context)


def _snooze(arguments: dict[str, Any], context: ToolContext) -> str:
    _started("snooze", context)
    time.sleep(NAP)
    return _finished(context)


async def _stubborn(arguments: dict[str, Any], context: ToolContext) -> str:
    """An async tool that ignores cancellation: only a second Ctrl-C gets past it."""
    _started("stubborn", context)
    with anyio.CancelScope(shield=True):
        await anyio.sleep(NAP)
    return _finished(context)


@tether.hookimpl
def tether_tools() -> list[Tool]:
    return [
        Tool("nap", "Sleep in a thread.", _nap),
        Tool("snooze", "Sleep in a thread, beside other safe calls.", _snooze, safe=True),
        Tool("stubborn", "Sleep and ignore cancellation.", _stubborn),
    ]
