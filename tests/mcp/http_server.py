"""A small streamable-HTTP MCP server, built on the ``mcp`` SDK, that wants a bearer token.

Run as ``python http_server.py TOKEN [PORT]``: it listens on 127.0.0.1, on PORT or a port the
system picks, prints ``PORT <n>`` on standard output once it listens, and serves MCP at
``/mcp``. Every HTTP request must carry ``Authorization: Bearer TOKEN``; any other is answered
401 before it reaches MCP. Its tools:

- ``whoami()``: the ``Authorization`` header the request carried (what the client sent);
- ``add(a, b)``: the sum, as text (annotated read-only).
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from starlette.responses import PlainTextResponse

server = MCPServer("guarded")


@server.tool()
def whoami(ctx: Context) -> str:
    """The Authorization header this request carried."""
    headers = ctx.headers or {}
    return f"authorization: {headers.get('authorization', '(none)')}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> str:
    """A plus B."""
    return f"{a} + {b} = {a + b}"


def guarded(token: str) -> Any:
    """The MCP app behind a check of the bearer token."""
    app = server.streamable_http_app()
    expected = f"Bearer {token}".encode()

    async def guard(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            refusal = PlainTextResponse("a valid bearer token is required", status_code=401)
            await refusal(scope, receive, send)
            return
        await app(scope, receive, send)

    return guard


async def serve(token: str, port: int = 0) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    config = uvicorn.Config(guarded(token), log_level="warning", lifespan="on")
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    anyio.run(serve, sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
