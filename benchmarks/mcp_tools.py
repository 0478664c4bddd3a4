"""MCP figures of issue 15, as medians of CPU time and wall time.

    uv run python benchmarks/mcp_tools.py [--quick]

* **call**: one warm MCP tool call over stdio (``benchmarks/mcp_tools_server.py``, a Python
  server whose tool answers at once), three ways:
  - through tether: the agent's tool (``Tool.argument_errors`` then ``Tool.call``: the SDK's
    request, the answer rendered as text);
  - the SDK's ``Client.call_tool`` alone, on a second process of the same server (what any
    client pays), call for call in turn with tether's, so a busy moment weighs on both;
  - the CPU time of this (the client) process per call through tether: everything tether and
    the SDK spend, none of the server's (it is another process).
  Target: an overhead above the server's own time of at most 1 ms. Two verdicts: tether's
  own overhead (the median of the paired differences with the SDK alone), and all of the
  client side (the client process's CPU per call through tether, tether and the SDK: the
  server's own time is not in it).
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
from deadlines import scenario
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
    """Both ways at once, call for call in turn (tether, then the SDK alone, each on a server
    process of its own), so a busy moment of the machine weighs on both alike."""
    model = FunctionModel(lambda request: "ok")
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), "1", "bench"])
    wall: list[float] = []
    cpu: list[float] = []
    sdk: list[float] = []
    sdk_cpu: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tether-bench-mcp-") as folder:
        kernel = load_kernel(profile(Path(folder), [("bench", 1)]))
        async with (
            Runtime.open(kernel, MemoryStore()) as runtime,
            Client(params, mode="legacy") as client,
        ):
            agent = await runtime.compose(agent="main", model=model)
            tool = agent.tools.get("bench__bench_0")
            assert tool is not None
            context = ToolContext(agent, "call")
            arguments = {"text": "hello"}
            for _ in range(50):  # warm: the servers' imports, the SDK's first requests
                await tool.call(arguments, context)
                await client.call_tool("bench_0", arguments)
            for _ in range(rounds):
                c0, w0 = time.process_time(), time.perf_counter()
                assert not tool.argument_errors(arguments)
                result = await tool.call(arguments, context)
                w1, c1 = time.perf_counter(), time.process_time()
                assert result == "hello"
                wall.append(w1 - w0)
                cpu.append(c1 - c0)
                c0, w0 = time.process_time(), time.perf_counter()
                await client.call_tool("bench_0", arguments)
                w1, c1 = time.perf_counter(), time.process_time()
                sdk.append(w1 - w0)
                sdk_cpu.append(c1 - c0)
    return {
        "tether_wall_ms": median_ms(wall),
        "tether_cpu_ms": median_ms(cpu),
        "sdk_wall_ms": median_ms(sdk),
        "sdk_cpu_ms": median_ms(sdk_cpu),
        "delta_cpu_ms": median_ms([a - b for a, b in zip(cpu, sdk_cpu, strict=True)]),
        "delta_wall_ms": median_ms([a - b for a, b in zip(wall, sdk, strict=True)]),
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
    with scenario("MCP tool calls"):
        call = anyio.run(call_figures, rounds)
    own = "met" if call["delta_cpu_ms"] <= CALL_TARGET_MS else "NOT met"
    whole = "met" if call["tether_cpu_ms"] <= CALL_TARGET_MS else "NOT met"
    print(f"MCP tool call, stdio, warm (median of {rounds}):")
    print(
        f"  through tether:   {call['tether_wall_ms']:.3f} ms wall, "
        f"{call['tether_cpu_ms']:.3f} ms CPU of the client process"
    )
    print(f"  SDK client alone: {call['sdk_wall_ms']:.3f} ms wall, {call['sdk_cpu_ms']:.3f} ms CPU")
    print(
        "  tether above the bare SDK client (median of paired differences): "
        f"{call['delta_wall_ms']:+.3f} ms wall, {call['delta_cpu_ms']:+.3f} ms CPU"
    )
    print(f"  tether's own overhead, target {CALL_TARGET_MS} ms: {own}")
    print(f"  all of the client side (tether and the SDK), target {CALL_TARGET_MS} ms: {whole}")
    with scenario("composing agents with MCP servers"):
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
