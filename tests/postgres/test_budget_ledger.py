"""The PostgreSQL store's budget ledger: the conformance suite on a real server, then a claim
from another host, judged by its expiry on the server's clock."""

from __future__ import annotations

import psycopg
import pytest

from tether.contracts import Budget, Spend
from tether.testing.ledger_conformance import BudgetLedgerConformance
from tether_postgres import PostgresStore

pytestmark = pytest.mark.anyio


class TestPostgresLedger(BudgetLedgerConformance):
    @pytest.fixture
    async def store(self, postgres_url):
        store = PostgresStore(postgres_url)
        yield store
        await store.aclose()

    @pytest.fixture
    def reopen(self, postgres_url):
        return lambda: PostgresStore(postgres_url)

    @pytest.fixture
    def store_factory(self, postgres_url):
        return "tether_postgres:PostgresStore", postgres_url


def foreign_claim(url: str, holder: str, *, exclusive: bool, expires_in: float) -> None:
    """A claim of a process on another host, written behind the stores' backs; its expiry is
    ``expires_in`` seconds from now on the server's clock."""
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "INSERT INTO tether_budget_claims VALUES (%s, 'f0reign', 'elsewhere.example', 4242, "
            "NULL, extract(epoch from now()) + %s, %s, '{\"requests\":3}') "
            "ON CONFLICT (holder, token) DO UPDATE SET expires_at = excluded.expires_at",
            (holder, expires_in, exclusive),
        )


async def test_a_claim_from_another_host_lives_until_it_expires(postgres_url):
    store = PostgresStore(postgres_url)
    try:
        await store.budget_claim("root")
        await store.budget_release("root", Spend(requests=1))
        foreign_claim(postgres_url, "root", exclusive=False, expires_in=60)
        assert not (await store.budget_claim("root")).exclusive
        answer = await store.budget_reserve("root", Spend(requests=1), Budget(requests=5))
        assert answer.used == Spend(requests=5)  # 1 settled + its 3 reserved + this 1
        foreign_claim(postgres_url, "root", exclusive=False, expires_in=-1)
        answer = await store.budget_reserve("root", Spend(requests=1), Budget(requests=5))
        assert answer.claim is not None
        assert answer.claim.exclusive
        assert answer.claim.spent == Spend(requests=1)  # it was not exclusive: still known
    finally:
        await store.aclose()


async def test_an_expired_exclusive_claim_from_another_host_forgets_the_spend(postgres_url):
    store = PostgresStore(postgres_url)
    try:
        await store.budget_claim("root")
        await store.budget_release("root", Spend(requests=1))
        foreign_claim(postgres_url, "root", exclusive=True, expires_in=-1)
        claim = await store.budget_claim("root")
        assert claim.exclusive
        assert claim.spent is None
    finally:
        await store.aclose()


async def test_renew_pushes_the_claims_with_the_leases(postgres_url):
    store = PostgresStore(postgres_url, lease_ttl=100)
    try:
        await store.budget_claim("root")
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute("UPDATE tether_budget_claims SET expires_at = 0")
            await store.renew()
            ((left,),) = db.execute(
                "SELECT expires_at - extract(epoch from now()) FROM tether_budget_claims"
            ).fetchall()
        assert left > 90
        assert (await store.budget_contended())[1] > 90
    finally:
        await store.aclose()
