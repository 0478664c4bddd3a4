"""MCP figures of issue 15, as medians of CPU time and wall time.

    uv run python benchmarks/mcp_tools.py [--quick]

* **call**: one warm MCP tool call over stdio (``benchmarks/mcp_tools_server.py``, a Python
  server whose tool answers at once), three ways:
  - through tether: the agent's tool (``Tool.argument_errors`` then ``Tool.call``: the SDK's
    request, the answer rendered as text);
  - the SDK's ``Client.call_tool`` alone, on the same server (what any client pays);
  - the CPU time of this (the client) process per call through tether: everything tether and
    the SDK spend, none of the server's (it is another process).
  Target: tether's overhead above the server's own time at most 1 ms. The verdict uses the
  client process's CPU per call, which bounds it from above (the server's own time is not in
  it); the wall-time difference with the SDK alone is what tether adds to a bare SDK client.
* **compose**: ``Runtime.compose`` of an agent that sees 3 warm servers with 100 tools in all
  (34 + 33 + 33), on a memory store, against the same compose with no server. Target: 5 ms.

CPU time is ``time.process_time()``, wall time ``time.perf_counter()``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from tether import load_kernel
from tether.agents import ToolContext
from tether.models import FunctionModel
from tether.runtime import Runtime
from tether.store import MemoryStore

SERVER = Path(__file__).with_name("mcp_tools_server.py")
CALL_TARGET_MS = 1.0
COMPOSE_TARGET_MS = 5.0


def profile(folder: Path, servers: list[tuple[str, int]]) -> Path:
    entries = "\n".join(
        textwrap.dedent(
            f"""
            [[plugin.mcp.servers]]
            name = "{name}"
            command = {sys.executable!r}
            args = [{str(SERVER)!r}, "{count}", "{name}"]
            """
        ).replace("'", '"')
        for name, count in servers
    )
    path = folder / "tether.toml"
    path.write_text(
        f'[tether]\nplugins = ["mcp"]\nstore = "memory"\n{entries}\n[agent.main]\n'
        'model = "function:x"\n',
        encoding="utf-8",
    )
    return path


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def call_figures(rounds: int) -> dict[str, float]:
    model = FunctionModel(lambda request: "ok")
    with tempfile.TemporaryDirectory(prefix="tether-bench-mcp-") as folder:
        kernel = load_kernel(profile(Path(folder), [("bench", 1)]))
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            agent = await runtime.compose(agent="main", model=model)
            tool = agent.tools.get("bench__bench_0")
            assert tool is not None
            context = ToolContext(agent, "call")
            arguments = {"text": "hello"}
            for _ in range(50):  # warm: the server's imports, the SDK's first requests
                await tool.call(arguments, context)
            wall: list[float] = []
            cpu: list[float] = []
            for _ in range(rounds):
                c0, w0 = time.process_time(), time.perf_counter()
                assert not tool.argument_errors(arguments)
                result = await tool.call(arguments, context)
                w1, c1 = time.perf_counter(), time.process_time()
                assert result == "hello"
                wall.append(w1 - w0)
                cpu.append(c1 - c0)
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), "1", "bench"])
    async with Client(params, mode="legacy") as client:
        for _ in range(50):
            await client.call_tool("bench_0", {"text": "hello"})
        sdk: list[float] = []
        sdk_cpu: list[float] = []
        for _ in range(rounds):
            c0, w0 = time.process_time(), time.perf_counter()
            await client.call_tool("bench_0", {"text": "hello"})
            w1, c1 = time.perf_counter(), time.process_time()
            sdk.append(w1 - w0)
            sdk_cpu.append(c1 - c0)
    return {
        "tether_wall_ms": median_ms(wall),
        "tether_cpu_ms": median_ms(cpu),
        "sdk_wall_ms": median_ms(sdk),
        "sdk_cpu_ms": median_ms(sdk_cpu),
    }


async def compose_figures(rounds: int) -> dict[str, float]:
    model = FunctionModel(lambda request: "ok")
    results: dict[str, float] = {}
    layouts = {"none": [], "three": [("alpha", 34), ("beta", 33), ("gamma", 33)]}
    for label, servers in layouts.items():
        with tempfile.TemporaryDirectory(prefix="tether-bench-mcp-") as folder:
            kernel = load_kernel(profile(Path(folder), servers))
            async with Runtime.open(kernel, MemoryStore()) as runtime:
                first = await runtime.compose(agent="main", model=model)  # starts the servers
                assert len(first.tools) == sum(count for _, count in servers)
                for _ in range(20):
                    await runtime.compose(agent="main", model=model)
                wall: list[float] = []
                cpu: list[float] = []
                for _ in range(rounds):
                    c0, w0 = time.process_time(), time.perf_counter()
                    await runtime.compose(agent="main", model=model)
                    w1, c1 = time.perf_counter(), time.process_time()
                    wall.append(w1 - w0)
                    cpu.append(c1 - c0)
        results[f"{label}_wall_ms"] = median_ms(wall)
        results[f"{label}_cpu_ms"] = median_ms(cpu)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP figures of issue 15")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    args = parser.parse_args()
    rounds = 50 if args.quick else 500
    call = anyio.run(call_figures, rounds)
    overhead = call["tether_wall_ms"] - call["sdk_wall_ms"]
    verdict = "met" if call["tether_cpu_ms"] <= CALL_TARGET_MS else "NOT met"
    print(f"MCP tool call, stdio, warm (median of {rounds}):")
    print(
        f"  through tether:   {call['tether_wall_ms']:.3f} ms wall, "
        f"{call['tether_cpu_ms']:.3f} ms CPU of the client process"
    )
    print(f"  SDK client alone: {call['sdk_wall_ms']:.3f} ms wall, {call['sdk_cpu_ms']:.3f} ms CPU")
    print(
        f"  tether above the bare SDK client: {overhead:+.3f} ms wall, "
        f"{call['tether_cpu_ms'] - call['sdk_cpu_ms']:+.3f} ms CPU"
    )
    print(
        f"  overhead above the server's own time (client CPU per call): "
        f"{call['tether_cpu_ms']:.3f} ms, target {CALL_TARGET_MS} ms: {verdict}"
    )
    compose = anyio.run(compose_figures, rounds)
    verdict = "met" if compose["three_wall_ms"] <= COMPOSE_TARGET_MS else "NOT met"
    print(f"compose an agent (median of {rounds}):")
    print(
        f"  no MCP server:                    {compose['none_wall_ms']:.3f} ms wall, "
        f"{compose['none_cpu_ms']:.3f} ms CPU"
    )
    print(
        f"  3 warm servers, 100 tools:        {compose['three_wall_ms']:.3f} ms wall, "
        f"{compose['three_cpu_ms']:.3f} ms CPU, target {COMPOSE_TARGET_MS} ms: {verdict}"
    )


if __name__ == "__main__":
    main()
