"""Budget ledger figures (issue 41), as medians of wall time per call.

    uv run python benchmarks/budget_ledger.py [--quick] [--calls 2000]
    uv run python benchmarks/budget_ledger.py --server postgresql://postgres@127.0.0.1:5432

* ``budget_reserve`` on the shared path: two store objects (two owners) share one holder, and
  one of them reserves a request's need while settling the one before (``settle=(reserved,
  actual)``), as every model request of a shared budget does: one store transaction each;
* ``budget_contended``: what a process spending exclusively polls about every quarter second,
  with one exclusive claim and nobody else claiming (the usual answer: nothing).

Stores: ``sqlite`` (``synchronous=NORMAL``, the default), ``sqlite-full`` (``FULL``; its ledger
transactions run at ``NORMAL``), ``sqlite-full-strict`` (the same with the ledger's commits at
``FULL`` too: what the switch saves), ``postgres`` (the ledger's commits do not wait for the
WAL flush: ``synchronous_commit=off`` for their transaction) and ``postgres-strict`` (the same
with the server's default ``synchronous_commit=on``: what that saves). PostgreSQL figures use
a database of their own on ``--server`` (default ``$TETHER_BENCH_POSTGRES``, else
``$TETHER_TEST_POSTGRES``, else ``postgresql://postgres@127.0.0.1:5432``), dropped at the end.
Wall time is ``time.perf_counter()`` around each awaited call; the figure is the median (and
the 90th percentile) over ``--calls`` calls after 50 unmeasured ones.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import psycopg

from tether.contracts import Budget, BudgetLedger, Spend
from tether.store import SessionStore, SQLiteStore

SERVER = os.environ.get(
    "TETHER_BENCH_POSTGRES",
    os.environ.get("TETHER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432"),
)
STORES = ("sqlite", "sqlite-full", "sqlite-full-strict", "postgres", "postgres-strict")
WARMUP = 50
HOLDER = "root"
NEED = Spend(input_tokens=20_000, output_tokens=4_000, cost=0.05, requests=1)
ACTUAL = Spend(input_tokens=12_000, output_tokens=800, cost=0.02, requests=1)


@contextlib.contextmanager
def database(server: str) -> Iterator[str]:
    """A new database on ``server`` (dropped afterwards): its URL."""
    name = f"tether_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
        try:
            yield f"{server}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


@contextlib.asynccontextmanager
async def two_owners(
    kind: str, folder: Path, url: str | None
) -> AsyncIterator[tuple[SessionStore, SessionStore]]:
    """Two store objects on one storage of ``kind``."""
    if kind.startswith("sqlite"):
        path = folder / f"{kind}.db"
        synchronous = "NORMAL" if kind == "sqlite" else "FULL"
        stores: list[SessionStore] = [SQLiteStore(path, synchronous=synchronous) for _ in range(2)]
        if kind == "sqlite-full-strict":
            for store in stores:
                assert isinstance(store, SQLiteStore)
                store.ledger.relaxed = False
    else:
        assert url is not None
        from tether_postgres import PostgresStore

        if kind == "postgres-strict":  # the benchmark's own switch: the same write, flushed
            module = importlib.import_module("tether_postgres._store")
            write = str(getattr(module, "_LEDGER_WRITE"))  # noqa: B009
            setattr(module, "_LEDGER_WRITE", write.replace("'off'", "'on'"))  # noqa: B010
        stores = [PostgresStore(url), PostgresStore(url)]
    try:
        yield stores[0], stores[1]
    finally:
        for store in stores:
            await store.aclose()


async def timed(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    for _ in range(WARMUP):
        await call()
    times: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return times


async def figures(kind: str, calls: int, folder: Path, url: str | None) -> dict[str, list[float]]:
    async with two_owners(kind, folder, url) as (first, second):
        a, b = first, second
        assert isinstance(a, BudgetLedger)
        assert isinstance(b, BudgetLedger)
        await a.budget_claim(HOLDER)
        await b.budget_claim(HOLDER)
        await a.budget_share(HOLDER, Spend(), Spend())
        budget = Budget(requests=10 * (calls + WARMUP) + 10)
        state: dict[str, Spend | None] = {"reserved": None}

        async def reserve() -> None:
            held = state["reserved"]
            settle = None if held is None else (held, ACTUAL)
            answer = await b.budget_reserve(HOLDER, NEED, budget, settle=settle)
            assert answer.granted, answer
            state["reserved"] = NEED

        reserving = await timed(reserve, calls)
        await b.budget_release(HOLDER, None)
        # Alone now: exclusive again, and nobody else claims it.
        await a.budget_reserve(HOLDER, Spend(), budget)
        holders, _ = await a.budget_contended()
        assert holders == [], holders
        polling = await timed(a.budget_contended, calls)
    return {"reserve": reserving, "contended": polling}


def _figure(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9)]
    return f"median {statistics.median(times) * 1e6:8.1f} µs   p90 {p90 * 1e6:8.1f} µs"


async def run(stores: list[str], calls: int, server: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for kind in stores:
            if kind.startswith("postgres"):
                with database(server) as url:
                    result = await figures(kind, calls, Path(folder), url)
            else:
                result = await figures(kind, calls, Path(folder), None)
            print(f"{kind:<19} budget_reserve (shared)  {_figure(result['reserve'])}")
            print(f"{'':<19} budget_contended         {_figure(result['contended'])}")
            sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 calls per figure")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--server", default=SERVER)
    parser.add_argument("--stores", default=",".join(STORES))
    args = parser.parse_args()
    calls = 300 if args.quick else args.calls
    stores = [s for s in args.stores.split(",") if s]
    for kind in stores:
        if kind not in STORES:
            parser.error(f"unknown store {kind!r} (known: {', '.join(STORES)})")
    # postgres-strict rewrites the ledger's statement for the rest of the process: last.
    stores.sort(key=lambda kind: kind == "postgres-strict")
    anyio.run(run, stores, calls, args.server)


if __name__ == "__main__":
    main()
