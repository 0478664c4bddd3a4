"""What a guardrail costs each item it checks (issue 44: an allow-all one at most 5 µs).

    uv run python benchmarks/bench_guardrails.py [--quick]

Agents on one memory store (the cost is the turn loop's, not a store's), each on its own
session, entered once; their turns are taken in rounds, one turn of each per round, in an order
shuffled each round, so the machine's drift falls on all alike and no agent always follows the
same one (the one after the awaited check would pay for its task's leftovers). A turn is
``await agent.run("hi")``: the model calls one tool, reads its result and answers, so each
turn has four items a guardrail of every kind checks (the message, the call's arguments, the
tool's result, the answer):

* ``none``: no guardrail, and ``control``: none either (the difference of the two is the
  measurement's own noise, printed next to the figures);
* ``allow``: an allow-all guardrail on every kind that answers at once (a plain function);
* ``pii``: the shipped ``pii`` redactor (input, tool and child results) and ``no-secrets``
  (tool calls) on the same short, clean texts;
* ``awaited``: an allow-all ``input`` check that awaits (as a model judge would): it runs
  alongside the turn's first request, in a task of its own.

Two ways:

* **warm**: turns back to back (3,000 rounds after 300 of warm-up): the code's own cost;
* **paced**: 600 rounds with turns 20 ms apart, idle in between as between a real model's
  turns, when the caches have cooled: what a user's turn pays. Its noise (the control's
  difference) is of the budget's order on a shared two-core machine, from one run to the next
  (a turn idle 20 ms may find its caches anywhere from warm to taken by other work), so it is
  reported, not judged.

The figures are medians of CPU time (``time.process_time``) per turn; a guardrail's cost per
item is the difference from ``none`` divided by the items it checked. Exits 1 when the
allow-all guardrail costs more than the budget per item, warm. ``valgrind --tool=callgrind``
on a run of each agent gives the same cost in instructions, which no load moves (docs/
guardrails.md, "What it costs").
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from deadlines import scenario

from tether import hookimpl, load_kernel
from tether.agents import Agent, Tool
from tether.contracts import GUARD_KINDS, GuardSubject, GuardVerdict
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import MemoryStore

#: The issue's budget for an allow-all guardrail, in µs per checked item.
BUDGET_US = 5.0
#: Seconds each way may take (scaled by TETHER_TEST_TIME_SCALE) before it fails.
DEADLINE = 600.0
#: Items a turn here gives a guardrail of every kind: message, call, result, answer.
ITEMS = 4

PROFILE = """
[tether]
plugins = ["bench"]

[agent.none]
[agent.control]
[agent.allow]
guardrails = ["allow-all"]
[agent.pii]
guardrails = ["pii", "no-secrets"]
[agent.awaited]
guardrails = ["judge"]
"""


class AllowAll:
    name = "allow-all"
    kinds = frozenset(GUARD_KINDS)

    def check(self, subject: GuardSubject) -> GuardVerdict:
        return GuardVerdict.allow()


class Judge:
    """Allows, after awaiting (a model's judgement, without the model)."""

    name = "judge"
    kinds = frozenset({"input"})

    def check(self, subject: GuardSubject) -> Awaitable[GuardVerdict]:
        return self._judge()

    async def _judge(self) -> GuardVerdict:
        await anyio.sleep(0)
        return GuardVerdict.allow()


class Bench:
    @hookimpl
    def tether_guardrails(self) -> list[Any]:
        return [AllowAll(), Judge()]

    @hookimpl
    def tether_tools(self) -> list[Tool]:
        return [Tool("look", "Look.", lambda args, ctx: "found 3 files", {"type": "object"})]


CALL = ModelResponse(tool_calls=(ToolCall(id="c1", name="look", arguments={"path": "src"}),))


def answer(request: ModelRequest) -> ModelResponse | str:
    return "there are 3 files" if request.messages[-1].role == "tool" else CALL


AGENTS = ("none", "control", "allow", "pii", "awaited")


async def rounds(turns: int, warmup: int, gap: float) -> dict[str, float]:
    """Per agent, the median CPU µs of ``turns`` turns after ``warmup`` rounds, ``gap``
    seconds apart (idle, as between a real model's turns; not counted)."""
    samples: dict[str, list[float]] = {name: [] for name in AGENTS}
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as folder:
        (Path(folder) / "tether.toml").write_text(PROFILE, encoding="utf-8")
        kernel = load_kernel(
            Path(folder) / "tether.toml", plugins={"bench": Bench()}, entry_points=False
        )
        async with Runtime.open(kernel, MemoryStore()) as runtime, AsyncExitStack() as stack:
            model = FunctionModel(answer)
            agents: dict[str, Agent] = {}
            for name in AGENTS:
                agents[name] = await runtime.compose(agent=name, model=model)
                await stack.enter_async_context(runtime.hold(agents[name]))
            order = list(agents.items())
            shuffle = random.Random(44).shuffle
            for n in range(warmup + turns):
                shuffle(order)  # no agent always follows the same one (and pays for its leftovers)
                for name, agent in order:
                    cpu = time.process_time()
                    stop = await agent.run("how many files are in src?")
                    lap = time.process_time() - cpu
                    if stop != "completed":
                        raise SystemExit(f"{name}: the turn ended {stop}")
                    if n >= warmup:
                        samples[name].append(lap)
                    if gap:
                        await anyio.sleep(gap)
                model.requests.clear()
    return {name: statistics.median(laps) * 1e6 for name, laps in samples.items()}


def figures(way: str, turns: int, warmup: int, gap: float) -> dict[str, float]:
    """One way's figures: per item for the allow-all and the shipped ones, per turn for the
    awaited check, and the noise (the control's difference, per item)."""
    with scenario(f"guardrails on every item, {way}", DEADLINE):
        gc.collect()
        cpu = anyio.run(rounds, turns, warmup, gap)
    base = cpu["none"]
    return {
        "turn_us": base,
        "allow_us_per_item": (cpu["allow"] - base) / ITEMS,
        "pii_us_per_item": (cpu["pii"] - base) / ITEMS,
        "awaited_us_per_turn": cpu["awaited"] - base,
        "noise_us_per_item": (cpu["control"] - base) / ITEMS,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns (a smoke run)")
    args = parser.parse_args()
    ways = {
        "warm": (300, 50, 0.0) if args.quick else (3000, 300, 0.0),
        "paced": (40, 5, 0.02) if args.quick else (600, 20, 0.02),
    }
    ok = True
    for way, (turns, warmup, gap) in ways.items():
        got = figures(way, turns, warmup, gap)
        allow, noise = got["allow_us_per_item"], got["noise_us_per_item"]
        within = allow <= BUDGET_US
        if way == "warm":
            ok = within
        print(json.dumps({"way": way, "turns": turns, "gap_s": gap, **got}))
        print(
            f"{way}: turn {got['turn_us']:.1f} µs CPU without guardrails; an allow-all "
            f"guardrail on every kind {allow:+.2f} µs per item (budget {BUDGET_US:.0f} µs, "
            f"noise {noise:+.2f}): "
            + ("ok" if within else "OVER BUDGET")
            + ("" if way == "warm" else " (reported, not judged)")
            + f"; pii and no-secrets {got['pii_us_per_item']:+.2f} µs per item; an awaited "
            f"input check {got['awaited_us_per_turn']:+.1f} µs per turn"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
