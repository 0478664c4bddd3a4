"""The conformance suite for a store's optional ``BudgetLedger``: subclass it and provide fixtures.

::

    from tether.testing.ledger_conformance import BudgetLedgerConformance

    class TestMyLedger(BudgetLedgerConformance):
        @pytest.fixture
        async def store(self, tmp_path):
            store = MyStore(tmp_path / "db")
            yield store
            await store.aclose()

        # Required: a second store object on the same storage, standing for another process.
        @pytest.fixture
        def reopen(self, tmp_path):
            return lambda: MyStore(tmp_path / "db")

        # Optional: how a real process opens the same storage ("module:callable", one string
        # argument), for the tests with a process that is killed (skipped without it).
        @pytest.fixture
        def store_factory(self, tmp_path):
            return "my_package:MyStore", str(tmp_path / "db")

The killed process runs this module (``python -m tether.testing.ledger_conformance FACTORY
ARG``): it opens the store with ``FACTORY(ARG)`` and answers ledger calls read as JSON lines on
its stdin. The tests run under anyio's pytest plugin (``pytest.mark.anyio``).
"""

from __future__ import annotations

import importlib
import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import pytest

from ..contracts import Budget, BudgetLedger, LimitKind, Spend, within
from ..store import SessionHeader, SessionStore
from ._timing import scaled

__all__ = ("BudgetLedgerConformance", "Claimant")

#: Seconds a killed process's helper waits for one answer (generous: a busy 2-core machine).
_ANSWER_TIMEOUT = 60.0


def _ledger(store: SessionStore) -> BudgetLedger:
    assert isinstance(store, BudgetLedger), "the store does not implement BudgetLedger"
    return store


@asynccontextmanager
async def _second(reopen: Callable[[], SessionStore] | None) -> AsyncGenerator[BudgetLedger]:
    """Another store object on the same storage (another owner), closed afterwards."""
    if reopen is None:
        pytest.skip("no reopen fixture: a ledger is shared between store objects")
    other = reopen()
    try:
        yield _ledger(other)
    finally:
        await other.aclose()


class Claimant:
    """A real process spending under holders through its own store (``python -m
    tether.testing.ledger_conformance FACTORY ARG``); :meth:`kill` is ``SIGKILL``."""

    def __init__(self, factory: str, argument: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, factory, argument],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.process.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    async def call(self, *command: object) -> Any:
        """Send one command (``claim HOLDER``, ``share HOLDER SPENT RESERVED``, ``reserve
        HOLDER NEED BUDGET``; spends and budgets as their ``as_data()``) and read its answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        timeout = scaled(_ANSWER_TIMEOUT)
        line = await anyio.to_thread.run_sync(lambda: self._lines.get(timeout=timeout))
        if line is None:
            self.process.wait()
            assert self.process.stderr is not None
            pytest.fail(f"claimant {self.pid} ended: {self.process.stderr.read()}")
        return json.loads(line)

    async def kill(self) -> None:
        """``SIGKILL``, then reap it: its claims belong to a dead process."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(lambda: self.process.wait(timeout=scaled(60)))
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.anyio
class BudgetLedgerConformance:
    """Behaviours every ``BudgetLedger`` must have; one test per behaviour."""

    HOLDER = "root"

    @pytest.fixture
    def reopen(self) -> Callable[[], SessionStore] | None:
        """Override to return a factory for a second store on the same storage."""
        return None

    @pytest.fixture
    def store_factory(self) -> tuple[str, str] | None:
        """Override to return ``("module:callable", argument)``: how a real process opens a
        store on the same storage (for the tests that kill one)."""
        return None

    @pytest.fixture
    async def claimant(
        self, store_factory: tuple[str, str] | None
    ) -> AsyncGenerator[Callable[[], Claimant]]:
        if store_factory is None:
            pytest.skip("no store_factory fixture: no process to kill")
        started: list[Claimant] = []

        def start() -> Claimant:
            one = Claimant(*store_factory)
            started.append(one)
            return one

        try:
            yield start
        finally:
            for one in started:
                await one.kill()

    async def _shared(
        self, store: SessionStore, other: BudgetLedger, spent: Spend | None = None
    ) -> BudgetLedger:
        """``store`` claims first and shares ``spent``; ``other`` claims second."""
        mine = _ledger(store)
        assert (await mine.budget_claim(self.HOLDER)).exclusive
        assert not (await other.budget_claim(self.HOLDER)).exclusive
        await mine.budget_share(self.HOLDER, spent or Spend(), Spend())
        return mine

    # -- claims -----------------------------------------------------------------------------

    async def test_is_a_budget_ledger(self, store: SessionStore) -> None:
        assert isinstance(store, BudgetLedger)

    async def test_the_first_claim_is_exclusive_and_knows_no_spend(
        self, store: SessionStore
    ) -> None:
        ledger = _ledger(store)
        claim = await ledger.budget_claim(self.HOLDER)
        assert claim.exclusive
        assert claim.spent is None
        assert claim.valid_for > 0
        again = await ledger.budget_claim(self.HOLDER)  # idempotent
        assert again.exclusive
        assert again.spent is None
        assert await ledger.budget_contended() == ([], pytest.approx(claim.valid_for, abs=5))

    async def test_holders_are_separate(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        async with _second(reopen) as other:
            assert (await _ledger(store).budget_claim("a")).exclusive
            assert (await other.budget_claim("b")).exclusive
            assert (await _ledger(store).budget_contended())[0] == []

    async def test_a_second_owner_is_not_exclusive_and_contends_the_first(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        async with _second(reopen) as other:
            first = _ledger(store)
            assert (await first.budget_claim(self.HOLDER)).exclusive
            second = await other.budget_claim(self.HOLDER)
            assert not second.exclusive
            assert second.spent is None
            holders, valid_for = await first.budget_contended()
            assert holders == [self.HOLDER]
            assert valid_for > 0
            assert (await other.budget_contended())[0] == []  # it is not exclusive
            # Still exclusive until it shares; once shared, nothing is contended any more.
            assert (await first.budget_claim(self.HOLDER)).exclusive
            await first.budget_share(self.HOLDER, Spend(output_tokens=7), Spend())
            assert (await first.budget_contended())[0] == []
            claim = await other.budget_claim(self.HOLDER)
            assert not claim.exclusive
            assert claim.spent == Spend(output_tokens=7)

    async def test_renew_keeps_the_claims_valid(self, store: SessionStore) -> None:
        ledger = _ledger(store)
        ttl = (await ledger.budget_claim(self.HOLDER)).valid_for
        await anyio.sleep(1.0)
        _, before = await ledger.budget_contended()
        assert before <= ttl - 0.9  # its claims run out as time passes...
        await store.renew()  # ...until the owner renews its leases, which renews them too
        _, after = await ledger.budget_contended()
        assert after > before
        assert after <= ttl + 1

    # -- sharing, reserving, settling -------------------------------------------------------

    async def test_share_then_reserve_and_settle(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        budget = Budget(output_tokens=200)
        async with _second(reopen) as other:
            first = _ledger(store)
            assert (await first.budget_claim(self.HOLDER)).exclusive
            assert not (await other.budget_claim(self.HOLDER)).exclusive
            # The exclusive one counted 100 and has a request in flight that reserved 50.
            await first.budget_share(self.HOLDER, Spend(output_tokens=100), Spend(output_tokens=50))
            need = Spend(output_tokens=30)
            answer = await other.budget_reserve(self.HOLDER, need, budget)
            assert answer.granted
            assert answer.claim is None
            assert answer.used == Spend(output_tokens=180)
            # 100 + 50 + 30 + 30 > 200; without the other's 50 it would fit: worth waiting.
            refused = await other.budget_reserve(self.HOLDER, need, budget)
            assert not refused.granted
            assert refused.waiting
            assert refused.used == Spend(output_tokens=180)
            # The other's request used 40 of its 50; "only settle" with an empty need.
            settled = await first.budget_reserve(
                self.HOLDER,
                Spend(),
                budget,
                settle=(Spend(output_tokens=50), Spend(output_tokens=40)),
            )
            assert settled.granted
            assert settled.used == Spend(output_tokens=170)
            answer = await other.budget_reserve(self.HOLDER, need, budget)
            assert answer.granted
            assert answer.used == Spend(output_tokens=200)
            # 140 settled: only the other's 60 reserved stand in the way of 1, not of 61.
            refused = await first.budget_reserve(self.HOLDER, Spend(output_tokens=1), budget)
            assert not refused.granted
            assert refused.waiting
            refused = await first.budget_reserve(self.HOLDER, Spend(output_tokens=61), budget)
            assert not refused.granted
            assert not refused.waiting
            # Settling with a new need in the same call: 30 reserved, 10 used; 1 more fits.
            answer = await other.budget_reserve(
                self.HOLDER,
                Spend(output_tokens=1),
                budget,
                settle=(Spend(output_tokens=30), Spend(output_tokens=10)),
            )
            assert answer.granted
            assert answer.used == Spend(output_tokens=181)

    @pytest.mark.parametrize(
        ("kind", "limit", "spent", "fits", "passes"),
        [
            (
                "input_tokens",
                1000,
                Spend(input_tokens=600),
                Spend(input_tokens=400),
                Spend(input_tokens=401),
            ),
            (
                "output_tokens",
                500,
                Spend(output_tokens=1),
                Spend(output_tokens=499),
                Spend(output_tokens=500),
            ),
            ("cost", 1.0, Spend(cost=0.5), Spend(cost=0.5), Spend(cost=0.625)),
            ("requests", 3, Spend(requests=2), Spend(requests=1), Spend(requests=2)),
            ("children", 2, Spend(children=1), Spend(children=1), Spend(children=2)),
        ],
    )
    async def test_a_reserve_is_refused_exactly_past_each_limit(
        self,
        store: SessionStore,
        reopen: Callable[[], SessionStore] | None,
        kind: LimitKind,
        limit: float,
        spent: Spend,
        fits: Spend,
        passes: Spend,
    ) -> None:
        budget = Budget(**{kind: limit})  # pyright: ignore[reportArgumentType]
        async with _second(reopen) as other:
            await self._shared(store, other, spent)
            assert within(budget, spent, passes) == kind
            refused = await other.budget_reserve(self.HOLDER, passes, budget)
            assert not refused.granted
            assert not refused.waiting  # nobody holds a reservation: waiting would not help
            assert refused.used == spent
            assert within(budget, spent, fits) is None
            answer = await other.budget_reserve(self.HOLDER, fits, budget)
            assert answer.granted
            assert answer.used == spent + fits
            # At the limit now: the smallest further need of that kind is refused...
            one = Spend(**{kind: 0.125 if kind == "cost" else 1})  # pyright: ignore[reportArgumentType]
            refused = await _ledger(store).budget_reserve(self.HOLDER, one, budget)
            assert not refused.granted
            assert refused.waiting  # the other's reservation, settled cheaper, would make room
            # ...and other kinds, which this budget does not limit, still pass.
            free = Spend(cached_input_tokens=5) if kind != "input_tokens" else Spend(requests=1)
            assert (await _ledger(store).budget_reserve(self.HOLDER, free, budget)).granted

    async def test_a_reserve_waits_while_another_owner_is_exclusive(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        budget = Budget(requests=10)
        async with _second(reopen) as other:
            first = _ledger(store)
            assert (await first.budget_claim(self.HOLDER)).exclusive
            assert not (await other.budget_claim(self.HOLDER)).exclusive
            answer = await other.budget_reserve(self.HOLDER, Spend(requests=1), budget)
            assert not answer.granted
            assert answer.waiting
            assert answer.claim is None
            await first.budget_share(self.HOLDER, Spend(requests=4), Spend(requests=1))
            answer = await other.budget_reserve(self.HOLDER, Spend(requests=1), budget)
            assert answer.granted
            assert answer.used == Spend(requests=6)

    async def test_an_owner_that_reserves_before_sharing_waits_for_its_own_share(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        async with _second(reopen) as other:
            first = _ledger(store)
            assert (await first.budget_claim(self.HOLDER)).exclusive
            await other.budget_claim(self.HOLDER)
            answer = await first.budget_reserve(self.HOLDER, Spend(requests=1), Budget(requests=5))
            assert not answer.granted
            assert answer.waiting
            assert (await first.budget_contended())[0] == [self.HOLDER]

    # -- releasing and going back to exclusive ----------------------------------------------

    async def test_release_with_spent_is_what_the_next_claimant_reads(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        async with _second(reopen) as other:
            first = _ledger(store)
            assert (await first.budget_claim(self.HOLDER)).exclusive
            await first.budget_release(self.HOLDER, Spend(input_tokens=10, cost=0.25))
            claim = await other.budget_claim(self.HOLDER)
            assert claim.exclusive
            assert claim.spent == Spend(input_tokens=10, cost=0.25)
            await first.budget_release(self.HOLDER, None)  # released already: nothing

    async def test_releasing_a_shared_claim_drops_its_reservations(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        budget = Budget(requests=3)
        async with _second(reopen) as other:
            first = await self._shared(store, other, Spend(requests=1))
            assert (await first.budget_reserve(self.HOLDER, Spend(requests=2), budget)).granted
            # A shared claim's release ignores a spent it passes (it was not exclusive).
            await first.budget_release(self.HOLDER, Spend(requests=99))
            answer = await other.budget_reserve(self.HOLDER, Spend(requests=1), budget)
            assert answer.granted  # alone now: exclusive again, the settled spend known
            assert answer.claim is not None
            assert answer.claim.exclusive
            assert answer.claim.spent == Spend(requests=1)

    async def test_the_last_sharer_gets_the_holder_back_exclusively(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        budget = Budget(output_tokens=100)
        async with _second(reopen) as other:
            first = await self._shared(store, other, Spend(output_tokens=10))
            assert (
                await first.budget_reserve(self.HOLDER, Spend(output_tokens=20), budget)
            ).granted
            assert (
                await other.budget_reserve(self.HOLDER, Spend(output_tokens=30), budget)
            ).granted
            await other.budget_release(self.HOLDER, None)
            answer = await first.budget_reserve(
                self.HOLDER,
                Spend(output_tokens=5),
                budget,
                settle=(Spend(output_tokens=20), Spend(output_tokens=15)),
            )
            assert answer.granted
            assert answer.claim is not None
            assert answer.claim.exclusive
            assert answer.claim.spent == Spend(output_tokens=25)  # settled only
            assert answer.claim.valid_for > 0
            assert answer.used == Spend(output_tokens=25)
            assert (await first.budget_contended())[0] == []
            # Exclusive: nothing of this owner stays reserved in the ledger.
            second = await other.budget_claim(self.HOLDER)
            assert not second.exclusive
            await first.budget_share(self.HOLDER, Spend(output_tokens=25), Spend())
            answer = await other.budget_reserve(self.HOLDER, Spend(output_tokens=75), budget)
            assert answer.granted
            assert answer.used == Spend(output_tokens=100)

    async def test_a_claim_alone_again_is_exclusive(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        async with _second(reopen) as other:
            first = await self._shared(store, other, Spend(requests=3))
            await other.budget_release(self.HOLDER, None)
            claim = await first.budget_claim(self.HOLDER)
            assert claim.exclusive
            assert claim.spent == Spend(requests=3)

    async def test_closing_an_exclusive_owner_forgets_the_spend(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        if reopen is None:
            pytest.skip("no reopen fixture: a ledger is shared between store objects")
        first = reopen()
        await _ledger(first).budget_claim(self.HOLDER)
        await _ledger(first).budget_release(self.HOLDER, Spend(requests=2))
        assert (await _ledger(first).budget_claim(self.HOLDER)).spent == Spend(requests=2)
        await first.aclose()  # exclusive, never released: what it counted in memory is lost
        claim = await _ledger(store).budget_claim(self.HOLDER)
        assert claim.exclusive
        assert claim.spent is None

    async def test_closing_a_sharing_owner_gives_its_claim_back(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        if reopen is None:
            pytest.skip("no reopen fixture: a ledger is shared between store objects")
        other = reopen()
        try:
            first = await self._shared(store, _ledger(other), Spend(requests=2))
        finally:
            await other.aclose()
        answer = await first.budget_reserve(self.HOLDER, Spend(requests=1), Budget(requests=9))
        assert answer.claim is not None
        assert answer.claim.exclusive
        assert answer.claim.spent == Spend(requests=2)

    async def test_deleting_a_holder_session_forgets_its_ledger(self, store: SessionStore) -> None:
        ledger = _ledger(store)
        await store.create(SessionHeader(id="h1", created_at=1.0))
        await ledger.budget_claim("h1")
        await ledger.budget_release("h1", Spend(requests=4))
        assert (await ledger.budget_claim("h1")).spent == Spend(requests=4)
        await store.delete("h1")
        claim = await ledger.budget_claim("h1")
        assert claim.exclusive
        assert claim.spent is None

    # -- dead owners (a real process, killed) -----------------------------------------------

    async def test_a_dead_exclusive_owner_leaves_the_spend_unknown(
        self, store: SessionStore, claimant: Callable[[], Claimant]
    ) -> None:
        ledger = _ledger(store)
        await ledger.budget_claim(self.HOLDER)
        await ledger.budget_release(self.HOLDER, Spend(requests=5))
        process = claimant()
        answer = await process.call("claim", self.HOLDER)
        assert answer == {"exclusive": True, "spent": {"requests": 5}}
        claim = await ledger.budget_claim(self.HOLDER)  # the process lives: not exclusive
        assert not claim.exclusive
        assert (await ledger.budget_reserve(self.HOLDER, Spend(requests=1), Budget())).waiting
        await process.kill()
        answer = await ledger.budget_reserve(self.HOLDER, Spend(requests=1), Budget())
        assert answer.granted
        assert answer.claim is not None
        assert answer.claim.exclusive
        assert answer.claim.spent is None  # it counted in memory and died: count the logs

    async def test_a_dead_sharing_owners_claim_and_reservations_are_dropped(
        self, store: SessionStore, claimant: Callable[[], Claimant]
    ) -> None:
        ledger = _ledger(store)
        budget = Budget(requests=10)
        assert (await ledger.budget_claim(self.HOLDER)).exclusive
        process = claimant()
        assert (await process.call("claim", self.HOLDER))["exclusive"] is False
        await ledger.budget_share(self.HOLDER, Spend(requests=2), Spend())
        answer = await process.call("reserve", self.HOLDER, {"requests": 7}, budget.as_data())
        assert answer["granted"] is True
        refused = await ledger.budget_reserve(self.HOLDER, Spend(requests=2), budget)
        assert not refused.granted
        assert refused.waiting
        await process.kill()
        claim = await ledger.budget_claim(self.HOLDER)
        assert claim.exclusive
        assert claim.spent == Spend(requests=2)  # it shared: the ledger still knows
        assert (await ledger.budget_contended())[0] == []

    async def test_a_dead_exclusive_owner_among_sharers_asks_for_a_recount(
        self,
        store: SessionStore,
        reopen: Callable[[], SessionStore] | None,
        claimant: Callable[[], Claimant],
    ) -> None:
        budget = Budget(requests=10)
        process = claimant()
        assert (await process.call("claim", self.HOLDER))["exclusive"] is True
        async with _second(reopen) as other:
            ledger = _ledger(store)
            assert not (await ledger.budget_claim(self.HOLDER)).exclusive
            assert not (await other.budget_claim(self.HOLDER)).exclusive
            await process.kill()  # before it shared what it counted
            answer = await ledger.budget_reserve(self.HOLDER, Spend(requests=1), budget)
            assert not answer.granted
            assert not answer.waiting
            assert answer.claim is not None  # recount: spent unknown, not exclusive
            assert not answer.claim.exclusive
            assert answer.claim.spent is None
            # The caller counts the logs and writes what it counted; then reserving works.
            await ledger.budget_share(self.HOLDER, Spend(requests=6), Spend())
            answer = await other.budget_reserve(self.HOLDER, Spend(requests=4), budget)
            assert answer.granted
            assert answer.used == Spend(requests=10)
            assert not (await ledger.budget_reserve(self.HOLDER, Spend(requests=1), budget)).granted

    # -- two owners at once -----------------------------------------------------------------

    async def test_concurrent_reserves_of_two_owners_never_pass_the_limit(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        limit, tries = 25, 40
        budget = Budget(requests=limit, output_tokens=limit * 100)
        async with _second(reopen) as other:
            first = await self._shared(store, other)
            granted: list[int] = []
            used: list[Spend] = []

            async def reserve(ledger: BudgetLedger, n: int) -> None:
                need = Spend(requests=1, output_tokens=100)
                answer = await ledger.budget_reserve(self.HOLDER, need, budget)
                if answer.granted:
                    granted.append(n)
                used.append(answer.used)

            with anyio.fail_after(scaled(120)):
                async with anyio.create_task_group() as group:
                    for n in range(tries):
                        group.start_soon(reserve, first, n)
                        group.start_soon(reserve, other, tries + n)
            assert len(granted) == limit  # every refusal came at the limit, none past it
            assert all(u.requests <= limit and u.output_tokens <= limit * 100 for u in used)

    async def test_concurrent_reserves_of_two_processes_never_pass_the_limit(
        self, store: SessionStore, claimant: Callable[[], Claimant]
    ) -> None:
        limit, tries = 30, 25
        budget = Budget(requests=limit)
        ledger = _ledger(store)
        assert (await ledger.budget_claim(self.HOLDER)).exclusive
        processes = [claimant(), claimant()]
        for process in processes:
            assert (await process.call("claim", self.HOLDER))["exclusive"] is False
        await ledger.budget_share(self.HOLDER, Spend(), Spend())
        counts: list[int] = []

        async def burst(process: Claimant) -> None:
            answer = await process.call(
                "burst", self.HOLDER, {"requests": 1}, budget.as_data(), tries
            )
            counts.append(answer["granted"])

        with anyio.fail_after(scaled(120)):
            async with anyio.create_task_group() as group:
                for process in processes:
                    group.start_soon(burst, process)
        assert sum(counts) == limit  # 50 tries for 30 requests: exactly 30 granted, together
        refused = await ledger.budget_reserve(self.HOLDER, Spend(requests=1), budget)
        assert not refused.granted
        assert refused.used == Spend(requests=limit)


async def _burst(ledger: BudgetLedger, holder: str, need: Spend, budget: Budget, count: int) -> int:
    """``count`` reserves of ``need`` at once; how many were granted."""
    granted: list[bool] = []

    async def one() -> None:
        granted.append((await ledger.budget_reserve(holder, need, budget)).granted)

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(one)
    return sum(granted)


def _main() -> None:
    """A claimant process: ``FACTORY ARG``; one JSON command per stdin line, one answer each."""
    factory, argument = sys.argv[1:3]
    module, _, name = factory.partition(":")
    make = cast(Callable[[str], SessionStore], getattr(importlib.import_module(module), name))

    async def serve() -> None:
        store = make(argument)
        ledger = _ledger(store)
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            command, holder, *rest = json.loads(line)
            answer: dict[str, Any] = {}
            if command == "claim":
                claim = await ledger.budget_claim(holder)
                spent = claim.spent
                answer = {"exclusive": claim.exclusive, "spent": spent and spent.as_data()}
            elif command == "share":
                await ledger.budget_share(
                    holder, Spend.from_data(rest[0]), Spend.from_data(rest[1])
                )
            elif command == "reserve":
                got = await ledger.budget_reserve(
                    holder, Spend.from_data(rest[0]), Budget.from_data(rest[1])
                )
                answer = {"granted": got.granted, "waiting": got.waiting}
            elif command == "burst":  # many reserves at once: how many were granted
                need, budget = Spend.from_data(rest[0]), Budget.from_data(rest[1])
                answer = {"granted": await _burst(ledger, holder, need, budget, rest[2])}
            print(json.dumps(answer), flush=True)
        await store.aclose()

    anyio.run(serve)


if __name__ == "__main__":
    _main()
