"""Delegation figures of issue 5, as medians.

    uv run python benchmarks/subagents.py [--quick]

* a delegation round trip: the parent calls the ``subagent`` tool (spawn provider), the child
  answers in one step, the parent answers; ``FunctionModel``; SQLite and in-memory stores
  (budgets 1 ms and 0.5 ms);
* 1,000 background one-shot children started at once, 50 ms model latency per child request:
  wall time until every child has ended, and resident memory added (budgets 1.0 s, 200 MB);
  then 2,000 (budget: at most 2.2x the time of 1,000);
* a fork child's first request against the parent's request prefix: the share of the parent's
  prefix bytes (system blocks, tool schemas, messages through its last completed turn) that the
  child's first request starts with (target 100 %).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from tether import load_kernel
from tether.agents import AgentLimits, compose_agent
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.store import MemoryStore, SessionStore, SQLiteStore
from tether.testing import write_profile


def _profile(folder: Path, provider: str = "spawn") -> Path:
    return write_profile(
        folder,
        f"""
        [tether]
        plugins = ["spawn", "fork", "subagent"]
        [plugin.subagent]
        provider = "{provider}"
        [agent.main]
        """,
        name=f"{provider}.toml",
    )


def _delegate(background: bool = False, count: int = 1) -> ModelResponse:
    calls = tuple(
        ToolCall(
            id=f"d{n}",
            name="subagent",
            arguments={"description": "a small task", "prompt": f"task {n}"}
            | ({"run_in_background": True} if background else {}),
        )
        for n in range(count)
    )
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


async def round_trips(folder: Path, store: SessionStore, runs: int) -> float:
    kernel = load_kernel(_profile(folder), entry_points=True)

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.session_label is not None:
            return "child answer"  # the child
        last = request.messages[-1]
        return "parent answer" if last.role == "tool" else _delegate()

    samples = []
    for _ in range(runs):
        agent = await compose_agent(kernel, store, model=FunctionModel(answer))
        async with agent:
            start = time.perf_counter()
            await agent.run("go")
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _rss_mb() -> float:
    import os

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def background(folder: Path, count: int, latency: float) -> tuple[float, float]:
    kernel = load_kernel(_profile(folder), entry_points=True)
    ended = anyio.Event()
    finished = 0

    async def answer(request: ModelRequest) -> ModelResponse | str:
        if request.session_label is not None:
            await anyio.sleep(latency)
            return "child answer"
        if len(request.messages) == 1:
            return _delegate(background=True, count=count)
        return "noted"

    def on_event(event: object) -> None:
        nonlocal finished
        if getattr(event, "kind", None) == "end":
            finished += 1
            if finished == count:
                ended.set()

    kernel.subagents.on_event(on_event)
    limits = AgentLimits(max_steps=10_000)
    agent = await compose_agent(kernel, MemoryStore(), model=FunctionModel(answer), limits=limits)
    before = _rss_mb()
    async with agent:
        start = time.perf_counter()
        await agent.followup("start them all")
        await ended.wait()
        wall = time.perf_counter() - start
        memory = _rss_mb() - before
        await agent.when_idle()
    return wall, memory


async def fork_prefix(folder: Path) -> float:
    kernel = load_kernel(_profile(folder, "fork"), entry_points=True)
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> ModelResponse | str:
        requests.append(request)
        if request.session_label is not None:
            return "child answer"
        last = request.messages[-1]
        if last.role == "user" and last.content == "now delegate":
            return _delegate()
        return "parent answer"

    agent = await compose_agent(kernel, MemoryStore(), model=FunctionModel(answer))
    async with agent:
        await agent.run("first question")
        await agent.run("second question")
        await agent.run("now delegate")
    parent = next(r for r in requests if r.messages[-1].content == "now delegate")
    child = next(r for r in requests if r.session_label is not None)
    completed = len(parent.messages) - 1  # the delegating turn's own message is not inherited

    def blob(request: ModelRequest, messages: int) -> bytes:
        head = {
            "system": list(request.system),
            "tools": [t.model_dump() for t in request.tools],
        }
        body = [m.model_dump() for m in request.messages[:messages]]
        return json.dumps(head).encode() + b"".join(json.dumps(m).encode() for m in body)

    prefix = blob(parent, completed)
    child_bytes = blob(child, len(child.messages))
    shared = 0
    for a, b in zip(prefix, child_bytes, strict=False):
        if a != b:
            break
        shared += 1
    return shared / len(prefix)


async def main(quick: bool) -> None:
    runs = 100 if quick else 500
    with tempfile.TemporaryDirectory(prefix="tether-subagents-") as tmp:
        folder = Path(tmp)
        sqlite = SQLiteStore(folder / "s.db")
        print(f"delegation round trip, spawn (median of {runs})")
        for name, store, budget in (("memory", MemoryStore(), 0.5), ("sqlite", sqlite, 1.0)):
            ms = await round_trips(folder, store, runs) * 1e3
            verdict = "ok" if ms <= budget else "OVER"
            print(f"  {name:<7} {ms:7.3f} ms  (budget {budget} ms)  {verdict}")
        await sqlite.aclose()
        print("background one-shot children, 50 ms model latency")
        counts = (200, 400) if quick else (1000, 2000)
        walls = {}
        for count in counts:
            wall, memory = await background(folder, count, 0.05)
            walls[count] = wall
            print(f"  {count:>5} children  {wall:6.3f} s  +{memory:6.1f} MB resident")
        ratio = walls[counts[1]] / walls[counts[0]]
        print(f"  time ratio {counts[1]}/{counts[0]}: {ratio:.2f} (budget 2.2)")
        ratio = await fork_prefix(folder)
        print(f"fork child's first request reuses {ratio:.1%} of the parent's prefix bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Delegation figures of issue 5 (medians).")
    parser.add_argument("--quick", action="store_true")
    anyio.run(main, parser.parse_args().quick)
