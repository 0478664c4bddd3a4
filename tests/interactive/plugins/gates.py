"""A local plugin for the interactive tests: a tool that waits until the test lets it go, and
one that needs the person's approval.

``wait`` prints ``[wait started]`` and returns once a file named ``go`` exists in the current
directory (the test makes it after the steer was accepted), or after ``WAIT`` seconds.
``launch`` needs approval and answers ``launched``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

import tether
from tether.agents import Tool, ToolContext

#: Longer than any test waits: a tool that is never let go is interrupted, or fails the test.
WAIT = 60.0


async def _wait(arguments: dict[str, Any], context: ToolContext) -> str:
    sys.stdout.write("[wait started]\n")
    sys.stdout.flush()
    with anyio.move_on_after(WAIT):
        while not Path("go").exists():
            await anyio.sleep(0.05)
    return "let go"


@tether.hookimpl
def tether_tools() -> list[Tool]:
    return [
        Tool("wait", "Wait until the test lets go.", _wait),
        Tool("launch", "Launch, once approved.", lambda a, c: "launched", needs_approval=True),
    ]
