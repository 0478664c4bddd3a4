"""The SQLite store under the faults of a shared file, with real processes: many processes
creating one new file, a file another program keeps locked, an old schema, text that has no
UTF-8 form, a failure in the middle of a transaction."""

from __future__ import annotations

import itertools
import sqlite3
import statistics
import time
from pathlib import Path

import anyio
import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import (
    SCHEMA_VERSION,
    InboxAccepted,
    SessionHeader,
    SQLiteStore,
    TurnStarted,
    UserMessage,
)
from tether.testing import scaled

pytestmark = pytest.mark.anyio

#: The schema version 1 files were written with (tether before leases and the mailbox).
SCHEMA_1 = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    label TEXT,
    agent TEXT,
    parent_session TEXT,
    origin TEXT NOT NULL,
    delegation_depth INTEGER NOT NULL,
    seed_length INTEGER NOT NULL
);
CREATE INDEX sessions_by_parent ON sessions (parent_session);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""


def query(db: Path, sql: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


async def test_sixteen_processes_open_one_new_file_at_once(tmp_path, spawn):
    db = tmp_path / "new" / "sessions.db"
    workers = [spawn("open", db, f"s{n}") for n in range(16)]
    for worker in workers:
        assert worker.line() == "READY"
    for worker in workers:  # all at once: each one opens the file the moment it reads this
        worker.send("go")
    for worker in workers:
        assert worker.line() == "ok"
    assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(db, "PRAGMA journal_mode") == [("wal",)]
    tables = {name for (name,) in query(db, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sessions", "events", "leases", "mailbox"} <= tables
    counts = query(db, "SELECT session_id, count(*) FROM events GROUP BY session_id")
    assert sorted(counts) == sorted((f"s{n}", 2) for n in range(16))
    assert query(db, "SELECT count(*) FROM leases") == [(0,)]  # each closed: released


async def test_an_append_waits_for_a_locked_file_and_the_loop_keeps_running(tmp_path, spawn):
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    await store.create(SessionHeader(id="s1", created_at=1.0))
    locker = spawn("lock", db, 10)
    assert locker.line() == "READY"
    ticks: list[float] = []
    seqs: list[int] = []

    async def tick() -> None:
        while True:
            ticks.append(time.monotonic())
            await anyio.sleep(0.01)

    async def write(events: list[TurnStarted]) -> None:
        seqs.append(await store.append("s1", events))

    start = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        async with anyio.create_task_group() as writers:
            writers.start_soon(write, [TurnStarted(turn=1)])
            writers.start_soon(write, [TurnStarted(turn=2), TurnStarted(turn=3)])
        waited = time.monotonic() - start
        group.cancel_scope.cancel()
    try:
        assert waited > 8.0  # the lock was held 10 s
        assert sorted(seqs) in ([1, 3], [2, 3])  # whichever came first
        assert [s.seq for s in await store.events("s1")] == [1, 2, 3]
        gaps = [later - earlier for earlier, later in itertools.pairwise(ticks)]
        assert max(gaps) < 0.5  # never stalled for long
        assert statistics.median(gaps) < 0.05
    finally:
        await store.aclose()


async def test_a_file_locked_past_the_busy_timeout_is_store_busy_and_unchanged(tmp_path, spawn):
    db = tmp_path / "s.db"
    store = SQLiteStore(db, busy_timeout=0.5)
    await store.create(SessionHeader(id="s1", created_at=1.0), [TurnStarted(turn=1)])
    locker = spawn("lock", db, 60)
    assert locker.line() == "READY"
    try:
        for call in (
            store.append("s1", [TurnStarted(turn=2)]),
            store.append("s1", [TurnStarted(turn=2), TurnStarted(turn=3)]),
            store.post("s1", InboxAccepted(message_id="m1", content="hi")),
            store.create(SessionHeader(id="s2", created_at=2.0)),
        ):
            start = time.monotonic()
            with pytest.raises(StoreError) as info:
                await call
            assert 0.4 < time.monotonic() - start < scaled(10.0)
            assert info.value.code is ErrorCode.STORE_BUSY
            assert str(db) in str(info.value)
            assert "busy_timeout" in str(info.value)
        locker.kill()
        assert [s.seq for s in await store.events("s1")] == [1]  # nothing was written
        assert [h.id for h in await store.sessions()] == ["s1"]
        assert await store.mail() == []
        assert await store.append("s1", [TurnStarted(turn=2)]) == 2  # and it works again
    finally:
        await store.aclose()


async def test_opening_a_file_that_needs_migrating_waits_for_its_lock(tmp_path, spawn):
    db = tmp_path / "s.db"
    connection = sqlite3.connect(db)
    connection.executescript(SCHEMA_1)
    connection.close()
    locker = spawn("lock", db, 60)
    assert locker.line() == "READY"
    with pytest.raises(StoreError) as info:
        SQLiteStore(db, busy_timeout=0.5)
    assert info.value.code is ErrorCode.STORE_BUSY
    assert query(db, "PRAGMA user_version") == [(1,)]
    locker.kill()
    store = SQLiteStore(db, busy_timeout=0.5)
    await store.aclose()
    assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


async def test_opening_a_current_file_needs_no_lock(tmp_path, spawn):
    db = tmp_path / "s.db"
    await SQLiteStore(db).aclose()
    locker = spawn("lock", db, 60)
    assert locker.line() == "READY"
    store = SQLiteStore(db, busy_timeout=0.5)  # reads go on while another process writes
    assert await store.sessions() == []
    await store.aclose()


async def test_a_schema_1_file_is_migrated_with_its_sessions_and_events(tmp_path):
    db = tmp_path / "s.db"
    connection = sqlite3.connect(db)
    connection.executescript(SCHEMA_1)
    connection.execute(
        "INSERT INTO sessions VALUES ('old', 1.5, 'kept', 'main', NULL, 'user', 2, 0)"
    )
    old_events = [UserMessage(message_id="m1", content="hi"), TurnStarted(turn=1)]
    connection.executemany(
        "INSERT INTO events VALUES ('old', ?, ?, ?)",
        [(seq, event.type, event.model_dump_json()) for seq, event in enumerate(old_events, 1)],
    )
    connection.commit()
    connection.close()
    store = SQLiteStore(db)
    try:
        assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
        header = await store.header("old")
        assert (header.label, header.agent, header.delegation_depth) == ("kept", "main", 2)
        assert header.model is None  # recorded models came with schema 3: old sessions have none
        assert [s.event for s in await store.events("old")] == old_events
        assert await store.holder("old") is None  # nobody held sessions before leases
        assert await store.append("old", [TurnStarted(turn=2)]) == 3
        await store.post("old", InboxAccepted(message_id="m2", content="new"))
        assert [m.message_id for m in await store.take_mail("old")] == ["m2"]
        assert [s.seq for s in await store.events("old")] == [1, 2, 3, 4]
    finally:
        await store.aclose()


async def test_a_failure_inside_a_transaction_rolls_all_of_it_back(tmp_path):
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0))
        await store.release("s1")  # so that take_mail takes the lease inside its transaction
        await store.post("s1", InboxAccepted(message_id="m1", content="fine"))
        connection = sqlite3.connect(db)  # another program posts something that is not mail
        connection.execute(
            "INSERT INTO mailbox (session_id, message_id, data) VALUES ('s1', 'm2', '{}')"
        )
        connection.commit()
        connection.close()
        with pytest.raises(StoreError) as info:
            await store.take_mail("s1")
        assert info.value.code is ErrorCode.SESSION_CORRUPT
        assert 'a message posted to session "s1" cannot be read' in str(info.value)
        assert await store.holder("s1") is None  # the lease it took went back, too
        assert await store.events("s1") == []
        assert query(db, "SELECT message_id FROM mailbox ORDER BY id") == [("m1",), ("m2",)]
        connection = sqlite3.connect(db)
        connection.execute("DELETE FROM mailbox WHERE message_id = 'm2'")
        connection.commit()
        connection.close()
        assert [m.message_id for m in await store.take_mail("s1")] == ["m1"]  # usable again
    finally:
        await store.aclose()


async def test_text_with_a_lone_surrogate_is_stored_with_a_replacement(tmp_path):
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    try:
        await store.create(SessionHeader(id="s1", created_at=1.0))
        await store.append(
            "s1", [UserMessage(message_id="m1", content="cut \ud83d here; whole \U0001f600")]
        )
        (stored,) = await store.events("s1")
        assert isinstance(stored.event, UserMessage)
        assert stored.event.content == "cut \ufffd here; whole \U0001f600"
    finally:
        await store.aclose()
    assert query(db, "SELECT count(*) FROM events") == [(1,)]  # and the file reads back


async def test_looking_at_an_empty_mailbox_is_cheap(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    try:
        for n in range(20):
            await store.create(SessionHeader(id=f"s{n}", created_at=float(n)))
        samples = []
        for _ in range(2000):
            start = time.perf_counter()
            await store.mail()
            samples.append(time.perf_counter() - start)
        # Owners look every ~50 ms; this is a generous bound for a busy machine.
        assert statistics.median(samples) < 200e-6
    finally:
        await store.aclose()


async def test_a_schema_2_file_gains_the_model_column_and_its_sessions_have_none(tmp_path):
    from tether.store import DescriptorEvent
    from tether.store._sqlite_schema import MIGRATIONS

    db = tmp_path / "s.db"
    connection = sqlite3.connect(db)
    connection.executescript(";".join(MIGRATIONS[:2]) + "; PRAGMA user_version = 2;")
    connection.execute(
        "INSERT INTO sessions VALUES ('old', 1.5, 'kept', 'main', NULL, 'user', 1, 0)"
    )
    connection.execute(
        "INSERT INTO events VALUES ('old', 1, 'turn/start', ?)",
        (TurnStarted(turn=1).model_dump_json(),),
    )
    connection.commit()
    connection.close()
    store = SQLiteStore(db)
    try:
        assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
        header = await store.header("old")
        assert (header.label, header.delegation_depth, header.model) == ("kept", 1, None)
        change = DescriptorEvent(kind="model", data={"old": None, "new": "scripted:s.toml"})
        assert (await store.set_model("old", "scripted:s.toml", [change])).model == (
            "scripted:s.toml"
        )
        assert [s.event for s in await store.events("old")] == [TurnStarted(turn=1), change]
    finally:
        await store.aclose()
