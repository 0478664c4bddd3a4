"""What a guardrail costs each item it checks (issue 44: an allow-all one at most 5 µs).

    uv run python benchmarks/bench_guardrails.py [--quick]

Agents on one memory store (the cost is the turn loop's, not a store's), each on its own
session, entered once; their turns are taken in rounds, one turn of each per round, each round
starting with the next one, so the machine's drift falls on all alike. A turn is
``await agent.run("hi")``: the model calls one tool, reads its result and answers, so each
turn has four items a guardrail of every kind checks (the message, the call's arguments, the
tool's result, the answer):

* ``none``: no guardrail;
* ``allow``: an allow-all guardrail on every kind that answers at once (a plain function);
* ``pii``: the shipped ``pii`` redactor (input, tool and child results) and ``no-secrets``
  (tool calls) on the same short, clean texts;
* ``awaited``: an allow-all ``input`` check that awaits (as a model judge would): it runs
  alongside the turn's first request, in a task of its own.

The figures are medians of CPU time (``time.process_time``) per turn; a guardrail's cost per
item is the difference from ``none`` divided by the items it checked. Exits 1 when the
allow-all guardrail costs more than the budget per item.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
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
#: Seconds the whole benchmark may take (scaled by TETHER_TEST_TIME_SCALE) before it fails.
DEADLINE = 600.0
#: Items a turn here gives a guardrail of every kind: message, call, result, answer.
ITEMS = 4

PROFILE = """
[tether]
plugins = ["bench"]

[agent.none]
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


async def rounds(turns: int, warmup: int) -> dict[str, float]:
    """Per agent, the median CPU µs of ``turns`` turns after ``warmup`` rounds."""
    samples: dict[str, list[float]] = {"none": [], "allow": [], "pii": [], "awaited": []}
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as folder:
        (Path(folder) / "tether.toml").write_text(PROFILE, encoding="utf-8")
        kernel = load_kernel(
            Path(folder) / "tether.toml", plugins={"bench": Bench()}, entry_points=False
        )
        async with Runtime.open(kernel, MemoryStore()) as runtime:
            model = FunctionModel(answer)
            agents: dict[str, Agent] = {
                name: await runtime.compose(agent=name, model=model) for name in samples
            }
            async with (
                runtime.hold(agents["none"]),
                runtime.hold(agents["allow"]),
                runtime.hold(agents["pii"]),
                runtime.hold(agents["awaited"]),
            ):
                order = list(agents.items())
                for n in range(warmup + turns):
                    order.append(order.pop(0))
                    for name, agent in order:
                        cpu = time.process_time()
                        stop = await agent.run("how many files are in src?")
                        lap = time.process_time() - cpu
                        if stop != "completed":
                            raise SystemExit(f"{name}: the turn ended {stop}")
                        if n >= warmup:
                            samples[name].append(lap)
                    model.requests.clear()
    return {name: statistics.median(laps) * 1e6 for name, laps in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns (a smoke run)")
    args = parser.parse_args()
    turns, warmup = (300, 50) if args.quick else (3000, 300)
    with scenario("guardrails on every item", DEADLINE):
        gc.collect()
        figures = anyio.run(rounds, turns, warmup)
    base = figures["none"]
    allow = (figures["allow"] - base) / ITEMS
    pii = (figures["pii"] - base) / ITEMS
    awaited = figures["awaited"] - base
    verdict = allow <= BUDGET_US
    print(json.dumps({"turns": turns, "cpu_us": figures}))
    print(json.dumps({"allow_us_per_item": allow, "pii_us_per_item": pii, "awaited_us": awaited}))
    print(
        f"turn {base:.1f} µs CPU without guardrails; an allow-all guardrail on every kind "
        f"{allow:+.2f} µs per item (budget {BUDGET_US:.0f} µs): "
        + ("ok" if verdict else "OVER BUDGET")
    )
    print(
        f"pii and no-secrets on short clean texts {pii:+.2f} µs per item; an awaited input "
        f"check alongside the first request {awaited:+.1f} µs per turn"
    )
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
