"""Both shipped stores pass the conformance suite; SQLite-specific behaviours below it."""

from __future__ import annotations

import sqlite3

import anyio
import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import (
    SCHEMA_VERSION,
    MemoryStore,
    SessionHeader,
    SQLiteStore,
    TurnStarted,
    UserMessage,
    open_store,
)
from tether.testing.store_conformance import SessionStoreConformance


class TestMemoryStore(SessionStoreConformance):
    @pytest.fixture
    def store(self):
        return MemoryStore()


class TestSQLiteStore(SessionStoreConformance):
    @pytest.fixture
    async def store(self, tmp_path):
        store = SQLiteStore(tmp_path / "sessions.db")
        yield store
        await store.aclose()

    @pytest.fixture
    def reopen(self, tmp_path):
        return lambda: SQLiteStore(tmp_path / "sessions.db")


pytestmark = pytest.mark.anyio


async def test_sqlite_uses_wal_and_records_the_schema_version(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    await store.aclose()
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    db.close()


async def test_a_newer_schema_is_refused_not_rewritten(tmp_path):
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError) as info:
        SQLiteStore(path)
    assert info.value.code is ErrorCode.STORE_SCHEMA_UNSUPPORTED
    assert "upgrade tether" in str(info.value)


async def test_a_corrupt_event_is_reported_with_its_position(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    await store.create(SessionHeader(id="s1", created_at=1.0))
    await store.append("s1", [TurnStarted(turn=1), TurnStarted(turn=2)])
    db = sqlite3.connect(path)
    db.execute('UPDATE events SET data = \'{"type": "martian"}\' WHERE seq = 2')
    db.commit()
    db.close()
    with pytest.raises(StoreError) as info:
        await store.events("s1")
    assert info.value.code is ErrorCode.SESSION_CORRUPT
    assert str(info.value).startswith('event 2 of session "s1" cannot be read: ')
    await store.aclose()


async def test_a_missing_event_is_reported_not_skipped(tmp_path):
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    await store.create(SessionHeader(id="s1", created_at=1.0))
    await store.append("s1", [TurnStarted(turn=n) for n in (1, 2, 3)])
    db = sqlite3.connect(path)
    db.execute("DELETE FROM events WHERE seq = 2")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match=r"event 2 is missing") as info:
        await store.events("s1")
    assert info.value.code is ErrorCode.SESSION_CORRUPT
    await store.aclose()


async def test_many_sessions_append_concurrently_in_one_process(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")

    async def session(n: int) -> None:
        await store.create(SessionHeader(id=f"s{n}", created_at=float(n)))
        for turn in range(20):
            await store.append(f"s{n}", [UserMessage(message_id=f"{n}-{turn}", content="x")])
            await anyio.sleep(0)

    async with anyio.create_task_group() as group:
        for n in range(50):
            group.start_soon(session, n)
    for n in range(50):
        assert [s.seq for s in await store.events(f"s{n}")] == list(range(1, 21))
    await store.aclose()


async def test_an_append_is_visible_to_another_connection_once_it_returns(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    await store.create(SessionHeader(id="s1", created_at=1.0))
    await store.append("s1", [TurnStarted(turn=1)])
    other = sqlite3.connect(tmp_path / "s.db")
    assert other.execute("SELECT count(*) FROM events").fetchone() == (1,)
    other.close()
    await store.aclose()


def test_open_store_specs(tmp_path):
    assert isinstance(open_store("memory"), MemoryStore)
    store = open_store("sqlite:db/s.db", base=tmp_path)
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "db" / "s.db"
    anyio.run(store.aclose)
    with pytest.raises(StoreError) as info:
        open_store("postgres://x")
    assert info.value.code is ErrorCode.STORE_SPEC_INVALID


async def test_a_writer_that_ignores_leases_conflicts_without_writing(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    await store.create(SessionHeader(id="s1", created_at=1.0))
    await store.append("s1", [TurnStarted(turn=1)])
    other = sqlite3.connect(tmp_path / "s.db")  # another program: it knows nothing of leases
    other.execute(
        "INSERT INTO events VALUES ('s1', 2, 'turn/start', ?)",
        (TurnStarted(turn=7).model_dump_json(),),
    )
    other.commit()
    other.close()
    with pytest.raises(StoreError) as info:
        await store.append("s1", [TurnStarted(turn=2)])
    assert info.value.code is ErrorCode.SESSION_CONFLICT
    assert [s.event for s in await store.events("s1")] == [TurnStarted(turn=1), TurnStarted(turn=7)]
    assert await store.append("s1", [TurnStarted(turn=3)]) == 3  # re-reads where the log is
    await store.aclose()


async def test_a_refused_newer_file_is_left_as_it_was(tmp_path):
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StoreError):
        SQLiteStore(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    db.close()


def test_the_default_store_lives_next_to_the_profile_not_its_base(tmp_path):
    from tether import load_kernel
    from tether.runtime import profile_store

    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "base.toml").write_text("[tether]\nplugins = []\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "tether.toml").write_text(
        'extends = "../team/base.toml"\n[tether]\nallow_outside = ["../team/base.toml"]\n'
    )
    store = profile_store(load_kernel(tmp_path / "app" / "tether.toml"))
    assert isinstance(store, SQLiteStore)
    assert store.path == tmp_path / "app" / ".tether" / "sessions.db"
    anyio.run(store.aclose)
