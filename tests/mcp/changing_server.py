"""A small stdio MCP server, built on the ``mcp`` SDK, whose tool list changes while it runs.

Run as ``python changing_server.py [--starts FILE] [--slow-start SECONDS]``:

- ``add_tool(name)`` registers a new tool ``name`` (it answers ``"NAME ran"``) and sends
  ``notifications/tools/list_changed``, as a server does when what it offers changes;
- ``ping()`` answers ``pong`` (annotated read-only; plain text, no structured content);
- ``shout(text)`` answers TEXT in capitals the way the SDK answers a tool that returns ``str``:
  the text, and the same value as structured content ``{"result": TEXT}``;
- ``report(city)`` answers a short text and, apart from it, structured content (which no text
  block repeats);
- ``refuse(reason)`` fails: an ``isError`` result whose text is ``reason``;
- ``--starts FILE`` appends the process id to FILE when the server starts, so a test counts the
  processes that were started for it;
- ``--slow-start SECONDS`` waits that long before it reads its first message (a server slow to
  start: a big runtime, a cold cache).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

server = MCPServer("changing")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def ping() -> str:
    """Answer pong."""
    return "pong"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def shout(text: str) -> str:
    """TEXT in capitals."""
    return text.upper()


@server.tool(structured_output=False)
async def add_tool(name: str, ctx: Context) -> str:
    """Offer a new tool called NAME from now on."""

    def added() -> str:
        return f"{name} ran"

    server.add_tool(
        added,
        name=name,
        description=f"the tool {name}, added while running",
        structured_output=False,
    )
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def report(city: str) -> CallToolResult:
    """The weather in CITY, as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=f"weather for {city} follows")],
        structured_content={"city": city, "temperature": 21, "sky": "clear"},
    )


@server.tool(structured_output=False)
def refuse(reason: str) -> str:
    """Fail with REASON."""
    raise ToolError(reason)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=Path)
    parser.add_argument("--slow-start", type=float, default=0.0)
    options = parser.parse_args()
    if options.starts is not None:
        with options.starts.open("a", encoding="utf-8") as starts:
            starts.write(f"{os.getpid()}\n")
    if options.slow_start:
        time.sleep(options.slow_start)
    server.run("stdio")


if __name__ == "__main__":
    main()
