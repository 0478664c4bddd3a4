"""Streaming overhead (issue 17): what tether adds per delta between a model and a listener.

    uv run python benchmarks/streaming.py [--deltas 100000] [--runs 7]

A ``FunctionModel`` streams N text deltas and then its answer. *Bare* is the model's own
stream iterated directly (the async generator, the ``FunctionModel`` wrapper, a listener that
counts); *agent* is a turn of an ``Agent`` on a ``MemoryStore`` with one delta listener (the
same counting function), which also pays one turn's fixed cost (about a millisecond, spread
over N deltas). The figure is (agent - bare) / N, the median over ``--runs`` runs, in CPU
time (``time.process_time()``); the target is at most 2 µs per delta. The store is checked to
hold the same number of events whatever N is (no store write per delta).
"""

from __future__ import annotations

import argparse
import statistics
import time

import anyio
from deadlines import scenario

from tether.agents import Agent, new_header
from tether.models import FunctionModel, ModelDelta, ModelRequest, ModelResponse
from tether.store import MemoryStore


def model_of(count: int) -> FunctionModel:
    piece = ModelDelta("text", "x")

    async def stream(request: ModelRequest):
        for _ in range(count):
            yield piece
        yield ModelResponse(text="done")

    return FunctionModel(stream)


async def bare(count: int) -> float:
    model = model_of(count)
    heard = [0]

    def listen(delta: ModelDelta) -> None:
        heard[0] += 1

    request = ModelRequest()
    start = time.process_time()
    async for item in model.stream(request):
        if isinstance(item, ModelDelta):
            listen(item)
    took = time.process_time() - start
    assert heard[0] == count
    return took


async def agent_turn(count: int) -> tuple[float, int]:
    store = MemoryStore()
    header = new_header(agent=None)
    await store.create(header)
    agent = Agent(header=header, store=store, model=model_of(count))
    heard = [0]

    def listen(delta: ModelDelta) -> None:
        heard[0] += 1

    agent.listen_deltas(listen)
    async with agent:
        start = time.process_time()
        await agent.run("go")
        took = time.process_time() - start
    assert heard[0] == count
    return took, len(await store.events(header.id))


async def main(deltas: int, runs: int) -> None:
    await agent_turn(100)  # warm up
    await bare(100)
    per_delta: list[float] = []
    stored: set[int] = set()
    for _ in range(runs):
        took, events = await agent_turn(deltas)
        base = await bare(deltas)
        per_delta.append((took - base) / deltas)
        stored.add(events)
        _, small = await agent_turn(1)
        stored.add(small)
    median = statistics.median(per_delta) * 1e6
    verdict = "ok" if median <= 2.0 else "OVER"
    print(f"streaming overhead per delta ({deltas} deltas, median of {runs} runs, CPU)")
    print(f"  tether adds      {median:.3f} µs per delta  (target 2 µs) {verdict}")
    print(f"  events stored    {sorted(stored)} (one turn, whatever the number of deltas)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    with scenario(f"streaming {options.deltas} deltas"):
        anyio.run(main, options.deltas, options.runs)
