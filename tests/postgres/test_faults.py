"""What goes wrong with a PostgreSQL store says what, where and how to fix it, and loses nothing:
an unreachable server, a missing database, a table another program locks, a newer schema, a
damaged row, text PostgreSQL cannot hold, and two processes creating the tables at once."""

from __future__ import annotations

import socket

import anyio
import psycopg
import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import SessionHeader, TurnStarted, UserMessage
from tether_postgres import SCHEMA_VERSION, PostgresStore, describe

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_an_unreachable_server_is_store_unavailable_naming_it_without_the_password():
    url = f"postgresql://tether:s3cret@127.0.0.1:{free_port()}/sessions"
    store = PostgresStore(url, connect_timeout=5)
    with pytest.raises(StoreError) as info:
        await store.sessions()
    assert info.value.code is ErrorCode.STORE_UNAVAILABLE
    text = str(info.value)
    assert "postgresql://tether@127.0.0.1:" in text
    assert "s3cret" not in text
    assert "check that the PostgreSQL server runs" in text
    await store.aclose()


async def test_a_missing_database_says_so(postgres_database):
    server = postgres_database.rsplit("/", 1)[0]
    store = PostgresStore(f"{server}/no_such_database_here")
    with pytest.raises(StoreError) as info:
        await store.header("s1")
    assert info.value.code is ErrorCode.STORE_UNAVAILABLE
    assert 'database "no_such_database_here" does not exist' in str(info.value)
    await store.aclose()


def test_an_unreadable_connection_string_is_a_spec_error():
    with pytest.raises(StoreError) as info:
        PostgresStore("host=127.0.0.1 port")
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID
    assert info.value.key == "[tether] store"


def test_describe_keeps_user_host_port_and_database_only():
    assert describe("postgresql://u:pw@db.internal:6543/app?sslmode=require") == (
        "postgresql://u@db.internal:6543/app"
    )
    assert describe("host=h dbname=d") == "postgresql://h:5432/d"


async def test_a_table_another_program_locks_is_store_busy_and_nothing_is_written(
    postgres_url,
):
    store = PostgresStore(postgres_url, busy_timeout=0.3)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0), [TurnStarted(turn=1)])
        with psycopg.connect(postgres_url) as locker:
            locker.execute("LOCK TABLE tether_events IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError) as info:
                await store.append("s1", [TurnStarted(turn=2)])
            assert info.value.code is ErrorCode.STORE_BUSY
            assert "stayed locked by another program for 0.3 s" in str(info.value)
            locker.rollback()
        assert [s.seq for s in await store.events("s1")] == [1]
        assert await store.append("s1", [TurnStarted(turn=2)]) == 2  # and it carries on
    finally:
        await store.aclose()


async def test_a_newer_schema_is_refused_not_rewritten(postgres_url):
    store = PostgresStore(postgres_url)
    await store.create(SessionHeader(id="s1", created_at=1.0))
    await store.aclose()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("UPDATE tether_schema SET version = %s", (SCHEMA_VERSION + 1,))
    store = PostgresStore(postgres_url)
    with pytest.raises(StoreError) as info:
        await store.header("s1")
    assert info.value.code is ErrorCode.STORE_SCHEMA_UNSUPPORTED
    assert "upgrade tether-postgres" in str(info.value)
    await store.aclose()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        assert db.execute("SELECT version FROM tether_schema").fetchone() == (SCHEMA_VERSION + 1,)


async def test_dropped_tables_are_store_corrupt(postgres_url):
    store = PostgresStore(postgres_url)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0))
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute("DROP TABLE tether_mailbox")
        with pytest.raises(StoreError) as info:
            await store.mail()
        assert info.value.code is ErrorCode.STORE_CORRUPT
        assert "tether_mailbox" in str(info.value)
    finally:
        await store.aclose()


async def test_a_damaged_event_is_reported_with_its_position(postgres_url):
    store = PostgresStore(postgres_url)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0))
        await store.append("s1", [TurnStarted(turn=1), TurnStarted(turn=2), TurnStarted(turn=3)])
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute("""UPDATE tether_events SET data = '{"type": "martian"}' WHERE seq = 2""")
        with pytest.raises(StoreError) as info:
            await store.events("s1")
        assert info.value.code is ErrorCode.SESSION_CORRUPT
        assert str(info.value).startswith('event 2 of session "s1" cannot be read: ')
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute("DELETE FROM tether_events WHERE seq = 2")
        with pytest.raises(StoreError) as info:
            await store.events("s1")
        assert "event 2 is missing" in str(info.value)  # reported, never skipped
    finally:
        await store.aclose()


async def test_nul_characters_are_kept_in_events_and_replaced_in_headers(postgres_url):
    # PostgreSQL's text holds no NUL; JSON escapes it in the log, and a header keeps U+FFFD.
    store = PostgresStore(postgres_url)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0, label="a\0b"))
        await store.append("s1", [UserMessage(message_id="m1", content="x\0y")])
        assert (await store.header("s1")).label == "a\ufffdb"
        (stored,) = await store.events("s1")
        assert isinstance(stored.event, UserMessage)
        assert stored.event.content == "x\0y"
    finally:
        await store.aclose()


async def test_stores_opening_a_new_database_at_once_create_the_tables_once(postgres_url):
    stores = [PostgresStore(postgres_url) for _ in range(4)]
    try:
        async with anyio.create_task_group() as group:
            for n, store in enumerate(stores):
                group.start_soon(store.create, SessionHeader(id=f"s{n}", created_at=float(n)))
        assert [h.id for h in await stores[0].sessions()] == ["s3", "s2", "s1", "s0"]
        with psycopg.connect(postgres_url, autocommit=True) as db:
            assert db.execute("SELECT version FROM tether_schema").fetchall() == [(SCHEMA_VERSION,)]
    finally:
        for store in stores:
            await store.aclose()


async def test_a_closed_store_refuses_work(postgres_url):
    store = PostgresStore(postgres_url)
    await store.create(SessionHeader(id="s1", created_at=1.0))
    await store.aclose()
    with pytest.raises(StoreError) as info:
        await store.append("s1", [TurnStarted(turn=1)])
    assert info.value.code is ErrorCode.STORE_UNAVAILABLE
    assert "is closed" in str(info.value)
