"""The SQLite store's budget ledger: the conformance suite, then what only SQLite has (a claim
from another host judged by its expiry, ledger commits at NORMAL in a FULL store)."""

from __future__ import annotations

import socket
import sqlite3
import time

import pytest

from tether.contracts import Budget, Spend
from tether.store import SQLiteStore
from tether.testing.ledger_conformance import BudgetLedgerConformance

pytestmark = pytest.mark.anyio


class TestSQLiteLedger(BudgetLedgerConformance):
    @pytest.fixture
    async def store(self, tmp_path):
        store = SQLiteStore(tmp_path / "sessions.db")
        yield store
        await store.aclose()

    @pytest.fixture
    def reopen(self, tmp_path):
        return lambda: SQLiteStore(tmp_path / "sessions.db")

    @pytest.fixture
    def store_factory(self, tmp_path):
        return "tether.store:SQLiteStore", str(tmp_path / "sessions.db")


class TestSQLiteLedgerAtFull(TestSQLiteLedger):
    """The same, in a store whose commits are fsynced (its ledger's are not)."""

    @pytest.fixture
    async def store(self, tmp_path):
        store = SQLiteStore(tmp_path / "sessions.db", synchronous="FULL")
        yield store
        await store.aclose()


def foreign_claim(path, holder: str, *, exclusive: bool, expires_in: float) -> None:
    """A claim of a process on another host, written behind the stores' backs."""
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO budget_claims VALUES (?, 'f0reign', 'elsewhere.example', 4242, NULL, ?, ?, "
        "'{\"requests\":3}')",
        (holder, time.time() + expires_in, int(exclusive)),
    )
    db.commit()
    db.close()


async def test_a_claim_from_another_host_lives_until_it_expires(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    try:
        await store.budget_claim("root")
        await store.budget_release("root", Spend(requests=1))
        foreign_claim(path, "root", exclusive=False, expires_in=60)
        claim = await store.budget_claim("root")
        assert not claim.exclusive  # the other host's claim has not expired
        answer = await store.budget_reserve("root", Spend(requests=1), Budget(requests=5))
        assert answer.used == Spend(requests=5)  # 1 settled + its 3 reserved + this 1
        db = sqlite3.connect(path)
        db.execute(
            "UPDATE budget_claims SET expires_at = ? WHERE token = 'f0reign'", (time.time() - 1,)
        )
        db.commit()
        db.close()
        answer = await store.budget_reserve("root", Spend(requests=1), Budget(requests=5))
        assert answer.claim is not None
        assert answer.claim.exclusive
        assert answer.claim.spent == Spend(requests=1)  # it was not exclusive: still known
    finally:
        await store.aclose()


async def test_an_expired_exclusive_claim_from_another_host_forgets_the_spend(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    try:
        await store.budget_claim("root")
        await store.budget_release("root", Spend(requests=1))
        foreign_claim(path, "root", exclusive=True, expires_in=-1)
        claim = await store.budget_claim("root")
        assert claim.exclusive
        assert claim.spent is None
    finally:
        await store.aclose()


async def test_renew_pushes_the_claims_and_the_leases_in_one_go(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path, lease_ttl=100)
    try:
        await store.budget_claim("root")
        db = sqlite3.connect(path)
        db.execute("UPDATE budget_claims SET expires_at = 0")
        db.commit()
        await store.renew()
        ((expires_at,),) = db.execute("SELECT expires_at FROM budget_claims").fetchall()
        db.close()
        assert expires_at > time.time() + 90
        assert (await store.budget_contended())[1] > 90
    finally:
        await store.aclose()


async def test_the_ledger_tables_are_checked_on_open(tmp_path):
    path = tmp_path / "s.db"
    await SQLiteStore(path).aclose()
    assert socket.gethostname()  # the claims name this host
    db = sqlite3.connect(path)
    names = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert {"budget_ledger", "budget_claims"} <= names
