"""What budget checks add (issue 41): per model request and per child start, medians.

    uv run python benchmarks/budget_checks.py [--quick]

* **check path, per request**: what a step of an agent under budgets does that one under none
  does not: the need of the request (:meth:`Spending.need`), the charge to every account of its
  chain (:func:`charge_now`, in memory: the accounts are exclusive), what the answer spent
  (:meth:`Spending.spent`), the settle (:func:`settle`) and the look for warnings
  (:meth:`Spending.notices`); for a chain of one holder (a root budget) and of two (a
  delegation's own budget under the root's). Measured in a loop of real objects (accounts
  opened on a real SQLite store, whose ledger the process claims exclusively), CPU time per
  iteration, median of ``--rounds`` rounds.
* **check path, per child start**: one child counted under every account of the chain, in
  all and as working (:func:`start_child_now`), its count as working until it leaves
  (:meth:`Accounts.child_counted`, :meth:`Accounts.child_left`), and the child's budget within
  what is left (:func:`child_budget`, none asked: the usual).
* **end to end, per request**: a real agent (memory store, an instant function model) taking
  turns with a budget against one taking turns without, interleaved in rounds: the
  difference of their medians (CPU time per turn of one request), to show the check path is
  what the turn pays.
* **while shared**: the keeper's poll (``budget_contended``, one SQLite read every quarter
  second) costs CPU per second of an exclusive account; while another process spends under
  the same holder, each request costs a ledger transaction instead (``benchmarks/
  budget_ledger.py``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from tether.agents import Agent
from tether.agents._spending import Spending, child_budget
from tether.budgets._accounts import (
    Accounts,
    Charge,
    settle,
    start_child_now,
)
from tether.contracts import Budget, Price, Spend
from tether.models import FunctionModel, ModelResponse, Usage
from tether.store import MemoryStore, SQLiteStore

PRICE = Price(input=1.0, output=10.0, cached_input=0.1)
USAGE = Usage(input_tokens=12_000, output_tokens=300, cached_input_tokens=10_000)
RESPONSE = ModelResponse(text="ok", usage=USAGE)
ROOT = Budget(input_tokens=10**13, output_tokens=10**12, cost=10**9, requests=10**9, children=10**9)
OWN = Budget(output_tokens=10**8, requests=10**8, wall_seconds=10**6)
#: What a user of Claude Code or Codex sets most: output tokens, requests and time.
TYPICAL = Budget(output_tokens=10**12, requests=10**12, wall_seconds=10**9)


async def check_path(
    rounds: int, loops: int, depth: int, root_budget: Budget = ROOT
) -> tuple[float, float]:
    """Per request and per child start (µs of CPU), medians over ``rounds``."""
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "sessions.db")
        try:
            accounts = Accounts.of(store)
            started = time.time()
            root = await accounts.open("root", root_budget, started, Spend(), None, new=True)
            chain = (root,)
            if depth > 1:
                own = await accounts.open("child", OWN, started, Spend(), None, new=True)
                chain = (root, own)
            spending = Spending(accounts, "child", chain, chain[-1], PRICE)
            per_request: list[float] = []
            per_child: list[float] = []
            for _ in range(rounds):
                begin = time.process_time()
                for _ in range(loops):
                    done, _need, _room = spending.begin(12_000, None)
                    assert isinstance(done, Charge)
                    if not spending.end(done, RESPONSE):
                        await settle(done, spending.spent(RESPONSE))
                    spending.notices()
                per_request.append((time.process_time() - begin) / loops * 1e6)
                begin = time.process_time()
                for index in range(loops):
                    assert start_child_now(chain) is True
                    child_budget(None, chain)
                    accounts.child_counted(f"c{index}", chain)
                    accounts.child_left(f"c{index}")
                per_child.append((time.process_time() - begin) / loops * 1e6)
            for account in chain:
                await accounts.close(account)
        finally:
            await store.aclose()
    return statistics.median(per_request), statistics.median(per_child)


async def end_to_end(rounds: int, turns: int) -> tuple[float, float]:
    """CPU µs per one-request turn: under a budget, and under none (medians of rounds)."""
    model = FunctionModel(lambda request: RESPONSE, name="bench:model")

    async def timed(budget: Budget | None) -> float:
        store = MemoryStore()
        from tether.agents import new_header

        header = await store.create(new_header())
        agent = Agent(header=header, store=store, model=model, budget=budget, new_session=True)
        async with agent:
            await agent.run("warm up")
            begin = time.process_time()
            for _ in range(turns):
                await agent.run("go")
            return (time.process_time() - begin) / turns * 1e6

    with_budget: list[float] = []
    without: list[float] = []
    for _ in range(rounds):
        without.append(await timed(None))
        with_budget.append(await timed(Budget(output_tokens=10**9, requests=10**9)))
    return statistics.median(with_budget), statistics.median(without)


async def poll_cost(polls: int) -> float:
    """CPU µs of one keeper poll of an exclusive account on SQLite."""
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "sessions.db")
        try:
            accounts = Accounts.of(store)
            account = await accounts.open("root", ROOT, time.time(), Spend(), None, new=True)
            begin = time.process_time()
            for _ in range(polls):
                await accounts.poll()
            cost = (time.process_time() - begin) / polls * 1e6
            await accounts.close(account)
            return cost
        finally:
            await store.aclose()


async def main(quick: bool) -> None:
    rounds, loops = (5, 2_000) if quick else (15, 20_000)
    for name, budget in (("output, requests, time", TYPICAL), ("all five and cost", ROOT)):
        for depth in (1, 2):
            request, child = await check_path(rounds, loops, depth, budget)
            print(
                f"check path, {name}, chain of {depth}: {request:.2f} µs per request, "
                f"{child:.2f} µs per child start"
            )
    budgeted, plain = await end_to_end(5 if quick else 15, 200 if quick else 1_000)
    print(
        f"end to end (memory store, one-request turns): {budgeted:.1f} µs with a budget, "
        f"{plain:.1f} µs without: {budgeted - plain:+.1f} µs per request"
    )
    poll = await poll_cost(200 if quick else 2_000)
    print(
        f"keeper's poll (SQLite, exclusive account): {poll:.1f} µs each, "
        f"{poll * 4:.0f} µs per second"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="What budget checks add (issue 41).")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    anyio.run(main, parser.parse_args().quick)
