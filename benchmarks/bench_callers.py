"""What a caller on every message costs a turn (issue 42: at most 2 µs per turn).

    uv run python benchmarks/bench_callers.py [--quick] [--store memory|sqlite]

Three agents on one store, each on its own session, entered once; their turns are taken in
rounds, one turn of each per round, each round starting with the next one, so the machine's
drift and the store's periodic work (a WAL checkpoint) fall on all three alike:

* ``none``: ``await agent.run("hi")``, no caller anywhere (what tether did before callers);
* ``caller``: ``await agent.run("hi", caller=ALICE)``: the caller (an id, a name, two claims)
  kept with the message, stored twice (its acceptance and its claim) and made the agent's
  current caller;
* ``gated``: the same on an agent whose profile gate (``[agent.NAME] callers``) admits it,
  asked for each message.

A turn is ``await agent.run(prompt)`` on an idle agent (``FunctionModel``, one step). The
figures are medians of CPU time (``time.process_time``) and wall time per turn; the cost of a
caller is the difference of the medians. The verdict uses CPU time, the steadier one on a busy
machine. The verdict adds the turn loop's share (the memory store's difference) and what a
durable store writes more (the caller's JSON once per turn, :func:`stored_caller_us`), since
the difference of two SQLite turns swings by more than the budget on a busy machine (it is
printed too). Exits 1 when the caller costs more than the budget (the gate's figure is
reported beside it: a gate is a profile's choice, not the cost of knowing who asks).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import anyio
from deadlines import scenario

from tether import load_kernel
from tether.agents import Agent
from tether.contracts import Caller
from tether.models import FunctionModel, ModelRequest
from tether.runtime import Runtime
from tether.store import (
    InboxAccepted,
    MemoryStore,
    MessageSource,
    SessionStore,
    SQLiteStore,
    dump_event,
)

#: The issue's budget for a caller on every message, in µs per turn.
BUDGET_US = 2.0
#: Seconds the whole benchmark may take (scaled by TETHER_TEST_TIME_SCALE) before it fails.
DEADLINE = 600.0

ALICE = Caller(id="os:alice", name="Alice", via="cli", claims={"team": "billing", "seats": 5})

PROFILE = """
[agent.open]
[agent.gated]
callers = { allow = ["os:root"], claims = { team = "billing" } }
"""


def answer(request: ModelRequest) -> str:
    return "ok"


async def rounds(store: SessionStore, turns: int, warmup: int) -> dict[str, Any]:
    """Per figure, the medians of ``turns`` turns after ``warmup`` rounds."""
    samples: dict[str, list[tuple[float, float]]] = {"none": [], "caller": [], "gated": []}
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as folder:
        (Path(folder) / "tether.toml").write_text(PROFILE, encoding="utf-8")
        kernel = load_kernel(Path(folder) / "tether.toml", entry_points=False)
        async with Runtime.open(kernel, store) as runtime:
            model = FunctionModel(answer)
            agents: dict[str, Agent] = {
                "none": await runtime.compose(agent="open", model=model),
                "caller": await runtime.compose(agent="open", model=model, caller=ALICE),
                "gated": await runtime.compose(agent="gated", model=model, caller=ALICE),
            }
            callers: dict[str, Caller | None] = {"none": None, "caller": ALICE, "gated": ALICE}
            async with (
                runtime.hold(agents["none"]),
                runtime.hold(agents["caller"]),
                runtime.hold(agents["gated"]),
            ):
                order = list(agents.items())
                for n in range(warmup + turns):
                    # Each round starts with the next figure: none keeps a place in the round
                    # (after a checkpoint, before one) that the others do not.
                    order.append(order.pop(0))
                    for name, agent in order:
                        cpu, wall = time.process_time(), time.perf_counter()
                        await agent.run("hi", caller=callers[name])
                        lap = (time.process_time() - cpu, time.perf_counter() - wall)
                        if n >= warmup:
                            samples[name].append(lap)
                    model.requests.clear()
            for name, agent in agents.items():
                assert agent.caller == callers[name], f"{name}: the caller was not taken"
    return {
        name: {
            "cpu_us": statistics.median(s[0] for s in laps) * 1e6,
            "wall_us": statistics.median(s[1] for s in laps) * 1e6,
        }
        for name, laps in samples.items()
    }


def stored_caller_us() -> float:
    """What a durable store pays for the caller of one turn: its message's acceptance written
    with the caller against without (the claim names it only when who asks changes), the
    median of 21 side-by-side timings, in µs. Steadier than the difference of two SQLite
    turns, whose fsyncs vary by more than the whole budget on a busy machine."""
    plain = InboxAccepted(message_id="msg_0123456789abcdef", content="hi", source=MessageSource())
    named = plain.model_copy(update={"source": MessageSource(caller=ALICE)})
    runs = 5000
    differences: list[float] = []
    for _ in range(21):  # side by side, so a busy moment falls on both
        without = timeit.timeit(lambda: dump_event(plain), number=runs)
        with_caller = timeit.timeit(lambda: dump_event(named), number=runs)
        differences.append((with_caller - without) / runs)
    return statistics.median(differences) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns (a smoke run)")
    parser.add_argument("--store", choices=("memory", "sqlite"), default=None)
    args = parser.parse_args()
    turns, warmup = (300, 50) if args.quick else (3000, 300)
    stores = (args.store,) if args.store else ("memory", "sqlite")
    failed = False
    results: dict[str, dict[str, float]] = {}
    with scenario("callers on every message", DEADLINE):
        for store_name in stores:
            with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
                store: SessionStore = (
                    MemoryStore() if store_name == "memory" else SQLiteStore(Path(tmp) / "s.db")
                )
                gc.collect()
                try:
                    figures = anyio.run(rounds, store, turns, warmup)
                finally:
                    anyio.run(store.aclose)
            base = figures["none"]["cpu_us"]
            costs = {name: figures[name]["cpu_us"] - base for name in ("caller", "gated")}
            results[store_name] = costs
            print(json.dumps({"store": store_name, "turns": turns, **figures}))
            print(
                f"{store_name}: turn {base:.1f} µs CPU without a caller; a caller on each "
                f"message {costs['caller']:+.2f} µs; with a profile gate asked too "
                f"{costs['gated']:+.2f} µs"
            )
        # The budget is the caller's (a gate is a profile's choice, reported beside it): the
        # kernel's share, measured on the memory store, plus what a durable store writes more.
        stored = stored_caller_us()
        kernel = results["memory"]["caller"] if "memory" in results else 0.0
        verdict = kernel + stored <= BUDGET_US
        failed = not verdict
        print(json.dumps({"kernel_us": kernel, "stored_us": stored}))
        print(
            f"a caller on every message: {kernel:+.2f} µs in the turn loop, {stored:+.2f} µs "
            f"written by a durable store, {kernel + stored:.2f} µs per turn (budget "
            f"{BUDGET_US:.0f} µs): {'ok' if verdict else 'OVER BUDGET'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
