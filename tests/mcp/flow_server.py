"""A small stdio MCP server, built on the ``mcp`` SDK, that reports progress and logs.

Run as ``python flow_server.py``. Its tools:

- ``steady(steps, every)``: works ``steps`` times ``every`` seconds, reporting progress
  (``notifications/progress``, ``i/steps`` with the message ``step i``) after each;
- ``quiet(seconds)``: works ``seconds`` without a word;
- ``chatty()``: sends four log messages (``notifications/message``), at debug, notice,
  warning and error, from the logger ``flow.work``, then answers ``said``.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("flow")


@server.tool(structured_output=False)
async def steady(steps: int, every: float, ctx: Context) -> str:
    """Work STEPS times EVERY seconds, reporting progress after each."""
    for step in range(1, steps + 1):
        await anyio.sleep(every)
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done after {steps} steps"


@server.tool(structured_output=False)
async def quiet(seconds: float) -> str:
    """Work SECONDS without a word."""
    await anyio.sleep(seconds)
    return "done quietly"


@server.tool(structured_output=False)
async def chatty(ctx: Context) -> str:
    """Log four messages, then answer."""
    for level in ("debug", "notice", "warning", "error"):
        await ctx.log(level, f"a {level} message", logger_name="flow.work")  # pyright: ignore[reportDeprecated]
    return "said"


if __name__ == "__main__":
    server.run("stdio")
