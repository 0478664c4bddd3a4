"""An MCP server over stdio with N generated tools, for benchmarks/mcp_tools.py.

    python benchmarks/mcp_tools_server.py N PREFIX

Each tool ``PREFIX_I(text: str, count: int = 1)`` answers its text back at once (read-only).
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations


def main() -> None:
    count, prefix = int(sys.argv[1]), sys.argv[2]
    server = MCPServer(f"bench-{prefix}")

    def make(index: int):
        def tool(text: str, count: int = 1) -> str:
            return text * count

        tool.__name__ = f"{prefix}_{index}"
        return tool

    for index in range(count):
        server.add_tool(
            make(index),
            description=f"Tool {index} of {prefix}: says the text back, count times.",
            annotations=ToolAnnotations(read_only_hint=True),
            structured_output=False,
        )
    server.run("stdio")


if __name__ == "__main__":
    main()
