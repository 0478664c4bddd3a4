"""Turn-loop figures of issue 3, as medians.

    uv run python benchmarks/turns.py [--quick]

* one-step text turn on a fresh agent, ``FunctionModel``, in-memory store   (budget 150 µs)
* the same on the SQLite store (a real file in a temporary folder)          (budget 400 µs)
* turn 1,000 of one long session against turn 1, both stores                (budget 1.5x)
* 1,000 sessions running one turn each concurrently, 50 ms model latency    (budget 1.0 s)

A "turn" is ``await agent.run(prompt)``: the message is durably accepted into the inbox, the
loop claims it, one model request, the answer and ``turn/end`` are stored, the agent is idle.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from tether.agents import Agent, new_header
from tether.models import FunctionModel, ModelRequest
from tether.store import MemoryStore, SessionStore, SQLiteStore


def answer(request: ModelRequest) -> str:
    return "ok"


async def fresh_turns(make_store: Callable[[], SessionStore], runs: int) -> float:
    """Median seconds of one text turn, each on a fresh agent and session."""
    store = make_store()
    model = FunctionModel(answer)
    samples = []
    for _ in range(runs):
        header = await store.create(new_header(agent="main"))
        agent = Agent(header=header, store=store, model=model)
        async with agent:
            start = time.perf_counter()
            await agent.run("hi")
            samples.append(time.perf_counter() - start)
        model.requests.clear()
    await store.aclose()
    return statistics.median(samples)


async def long_session(make_store: Callable[[], SessionStore], turns: int) -> tuple[float, float]:
    """Median seconds of turns 1-20 and of the last 20 of one ``turns``-long session."""
    store = make_store()
    model = FunctionModel(answer)
    header = await store.create(new_header(agent="main"))
    agent = Agent(header=header, store=store, model=model)
    samples = []
    async with agent:
        for _ in range(turns):
            start = time.perf_counter()
            await agent.run("hi")
            samples.append(time.perf_counter() - start)
            model.requests.clear()  # the benchmark's own record, not the agent's
    await store.aclose()
    return statistics.median(samples[:20]), statistics.median(samples[-20:])


async def concurrent_sessions(
    make_store: Callable[[], SessionStore], sessions: int, latency: float
) -> float:
    """Wall seconds for ``sessions`` agents to each run one turn, all at once."""
    store = make_store()

    async def slow(request: ModelRequest) -> str:
        await anyio.sleep(latency)
        return "ok"

    model = FunctionModel(slow)
    agents = [
        Agent(header=await store.create(new_header(agent="main")), store=store, model=model)
        for _ in range(sessions)
    ]

    async def one(agent: Agent) -> None:
        async with agent:
            await agent.run("hi")

    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for agent in agents:
            group.start_soon(one, agent)
    wall = time.perf_counter() - start
    await store.aclose()
    return wall


async def main(quick: bool) -> None:
    folder = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    counter = iter(range(1_000_000))

    def sqlite() -> SessionStore:
        return SQLiteStore(folder / f"s{next(counter)}.db")

    stores: list[tuple[str, Callable[[], SessionStore]]] = [
        ("memory", MemoryStore),
        ("sqlite", sqlite),
    ]
    runs = 300 if quick else 2000
    turns = 300 if quick else 1000
    gc.collect()
    print(f"one-step text turn on a fresh agent (median of {runs})")
    for name, make in stores:
        budget = 150 if name == "memory" else 400
        median = await fresh_turns(make, runs) * 1e6
        print(f"  {name:<7} {median:8.1f} µs  (budget {budget} µs){_verdict(median <= budget)}")
    print(f"turn {turns} of one session against turn 1 (medians of 20 turns each)")
    for name, make in stores:
        first, last = await long_session(make, turns)
        ratio = last / first
        print(
            f"  {name:<7} first {first * 1e6:7.1f} µs  last {last * 1e6:7.1f} µs  "
            f"ratio {ratio:4.2f}  (budget 1.5){_verdict(ratio <= 1.5)}"
        )
    print("1,000 sessions, one turn each, concurrently, 50 ms model latency (median of 3)")
    for name, make in stores:
        walls = [await concurrent_sessions(make, 1000, 0.05) for _ in range(3)]
        wall = statistics.median(walls)
        print(f"  {name:<7} {wall:6.3f} s  (budget 1.0 s){_verdict(wall <= 1.0)}")


def _verdict(ok: bool) -> str:
    return "  ok" if ok else "  OVER"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Turn-loop figures of issue 3 (medians).")
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke check")
    anyio.run(main, parser.parse_args().quick)
