"""A small stdio MCP server, built on the ``mcp`` SDK, whose tools ask the client for things.

Run as ``python asking_server.py``:

- ``summarize(text)`` asks the client's model (``sampling/createMessage``, a system prompt and
  ``maxTokens`` 50_000) and answers ``model MODEL said: TEXT``;
- ``book(what)`` asks the person for a form (``elicitation/create``: ``seats``, an integer,
  required; ``window``, a boolean) and answers ``ACTION: CONTENT`` as JSON;
- ``where()`` asks for the client's roots (``roots/list``) and answers their URIs, one a line.

A refused request fails the tool with the SDK's error (a JSON-RPC error of ``tools/call``), as
a server does that does not catch it.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel, Field

server = MCPServer("asking")


@server.tool(structured_output=False)
async def summarize(text: str, ctx: Context) -> str:
    """Summarize TEXT with the client's model."""
    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(text=f"Summarize: {text}"))],
        max_tokens=50_000,
        system_prompt="You summarize in one line.",
    )
    content = result.content
    said = content.text if isinstance(content, TextContent) else f"[{content.type}]"
    return f"model {result.model} said: {said}"


class Booking(BaseModel):
    seats: int = Field(description="How many seats")
    window: bool = Field(default=False, description="A window seat?")


@server.tool(structured_output=False)
async def book(what: str, ctx: Context) -> str:
    """Book WHAT, asking the person how many seats."""
    result = await ctx.elicit(f"How many seats for {what}?", Booking)
    data = result.data.model_dump() if result.action == "accept" else None
    return f"{result.action}: {json.dumps(data)}"


@server.tool(structured_output=False)
async def where(ctx: Context) -> str:
    """The client's roots."""
    listed = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in listed.roots) or "no roots"


if __name__ == "__main__":
    server.run("stdio")
