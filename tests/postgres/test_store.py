"""tether-postgres passes the store conformance suite on a real PostgreSQL server."""

from __future__ import annotations

import pytest

from tether.testing.store_conformance import SessionStoreConformance
from tether_postgres import PostgresStore


class TestPostgresStore(SessionStoreConformance):
    @pytest.fixture
    async def store(self, postgres_url):
        store = PostgresStore(postgres_url)
        yield store
        await store.aclose()

    @pytest.fixture
    def reopen(self, postgres_url):
        return lambda: PostgresStore(postgres_url)
