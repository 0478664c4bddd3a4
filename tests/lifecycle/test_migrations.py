"""Stores written before sessions had a caller, a detached flag and a closing time are migrated
in place (SQLite schema 6, PostgreSQL schema 3): their sessions read as open, attached and
without a caller, and can be closed."""

from __future__ import annotations

import sqlite3

import pytest

from tether.store import SQLiteStore
from tether.store._sqlite_schema import MIGRATIONS
from tether_postgres import PostgresStore
from tether_postgres._schema import MIGRATIONS as PG_MIGRATIONS

pytestmark = pytest.mark.anyio


async def test_a_sqlite_file_of_schema_5_reads_as_open_attached_and_callerless(tmp_path):
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(";".join(MIGRATIONS[:5]) + "; PRAGMA user_version = 5;")
    db.execute(
        "INSERT INTO sessions VALUES ('old', 12.5, 'kept', 'main', NULL, 'user', 0, 0, 'a:b')"
    )
    db.commit()
    db.close()
    store = SQLiteStore(path)
    try:
        header = await store.header("old")
        assert (header.label, header.model, header.created_at) == ("kept", "a:b", 12.5)
        assert (header.caller, header.detached, header.closed_at) == (None, False, None)
        assert await store.close_session("old", at=99.0) == ("old",)
        assert (await store.header("old")).closed_at == 99.0
    finally:
        await store.aclose()


async def test_a_postgres_database_of_schema_2_reads_as_open_attached_and_callerless(
    postgres_url,
):
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        for migration in PG_MIGRATIONS[:2]:
            for statement in migration.split(";"):
                if statement.strip():
                    db.execute(statement.encode())
        db.execute("CREATE TABLE tether_schema (version integer NOT NULL)")
        db.execute("INSERT INTO tether_schema VALUES (2)")
        db.execute(
            "INSERT INTO tether_sessions VALUES "
            "('old', 12.5, 'kept', 'main', NULL, 'user', 0, 0, 'a:b')"
        )
    store = PostgresStore(postgres_url)
    try:
        header = await store.header("old")
        assert (header.label, header.model, header.created_at) == ("kept", "a:b", 12.5)
        assert (header.caller, header.detached, header.closed_at) == (None, False, None)
        assert await store.close_session("old", at=99.0) == ("old",)
        assert (await store.header("old")).closed_at == 99.0
    finally:
        await store.aclose()
