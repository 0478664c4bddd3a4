"""Group commit at ``synchronous="FULL"``: the appends of one moment share one commit (one
fsync), each keeps its own outcome, and ``NORMAL`` still commits each append on its own."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import SessionHeader, SQLiteStore, TurnStarted, UserMessage
from tether.testing import scaled
from tether.testing.store_conformance import SessionStoreConformance

pytestmark = pytest.mark.anyio

#: Generous: the suite must pass on a busy 2-core machine.
TIMEOUT = scaled(30.0)
#: How long another connection keeps the file locked in the lock tests.
LOCK_HELD = 0.3


class TestGroupCommitStore(SessionStoreConformance):
    """The whole store contract holds when appends go through group commit."""

    @pytest.fixture
    async def store(self, tmp_path):
        store = SQLiteStore(tmp_path / "sessions.db", synchronous="FULL")
        yield store
        await store.aclose()

    @pytest.fixture
    def reopen(self, tmp_path):
        return lambda: SQLiteStore(tmp_path / "sessions.db", synchronous="FULL")


def commits(statements: list[str]) -> int:
    """Transactions that wrote: explicit COMMITs plus writes outside a transaction."""
    count, explicit = 0, False
    for statement in statements:
        head = statement.split(None, 1)[0].upper() if statement.strip() else ""
        if head == "BEGIN":
            explicit = True
        elif head in ("COMMIT", "ROLLBACK"):
            count += head == "COMMIT"
            explicit = False
        elif head in ("INSERT", "UPDATE", "DELETE") and not explicit:
            count += 1
    return count


def traced(store: SQLiteStore) -> list[str]:
    """Every statement ``store`` runs from now on."""
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]  (white-box)
    return statements


def rows(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


async def full_store(db: Path, sessions: int, **options: float) -> SQLiteStore:
    """A FULL store holding ``sessions`` sessions ``s0``... with one event each."""
    store = SQLiteStore(db, synchronous="FULL", **options)
    for n in range(sessions):
        await store.create(SessionHeader(id=f"s{n}", created_at=float(n)), [TurnStarted(turn=0)])
    return store


async def gather(*calls: Callable[[], Awaitable[object]]) -> list[object]:
    """Run ``calls`` concurrently, started in one task group: each one's result or exception."""
    outcomes: list[object] = [None] * len(calls)

    async def one(index: int) -> None:
        try:
            outcomes[index] = await calls[index]()
        except Exception as exc:
            outcomes[index] = exc

    with anyio.fail_after(TIMEOUT):
        async with anyio.create_task_group() as group:
            for index in range(len(calls)):
                group.start_soon(one, index)
    return outcomes


def appending(store: SQLiteStore, session_id: str, *turns: int) -> Callable[[], Awaitable[int]]:
    """A call that appends one ``turn/start`` per turn to ``session_id``."""
    return lambda: store.append(session_id, [TurnStarted(turn=turn) for turn in turns])


def locked_by_another_connection(db: Path) -> sqlite3.Connection:
    """Another program holding the write lock of ``db`` until its connection rolls back."""
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


async def test_fifty_concurrent_appends_to_fifty_sessions_share_a_few_commits(tmp_path):
    store = await full_store(tmp_path / "s.db", 50)
    statements = traced(store)
    try:
        seqs = await gather(*(appending(store, f"s{n}", n) for n in range(50)))
        assert seqs == [2] * 50
        assert commits(statements) <= 5
        for n in range(50):
            stored = await store.events(f"s{n}")
            assert [(s.seq, s.event) for s in stored] == [
                (1, TurnStarted(turn=0)),
                (2, TurnStarted(turn=n)),
            ]
    finally:
        await store.aclose()


async def test_a_batch_takes_free_leases_and_reads_where_each_log_is(tmp_path):
    db = tmp_path / "s.db"
    await (await full_store(db, 20)).aclose()  # its leases are released, its seqs unknown
    store = SQLiteStore(db, synchronous="FULL")
    statements = traced(store)
    try:
        seqs = await gather(*(appending(store, f"s{n}", 1, 2) for n in range(20)))
        assert seqs == [3] * 20
        assert commits(statements) <= 2
        token = store.owner.token
        assert rows(db, "SELECT count(*) FROM leases WHERE token = ?", token) == [(20,)]
        assert [s.seq for s in await store.events("s7")] == [1, 2, 3]
    finally:
        await store.aclose()


async def test_concurrent_appends_to_one_session_keep_their_call_order(tmp_path):
    store = await full_store(tmp_path / "s.db", 1)
    statements = traced(store)
    try:
        seqs = await gather(*(appending(store, "s0", turn) for turn in range(1, 11)))
        assert seqs == list(range(2, 12))
        assert commits(statements) == 1
        stored = await store.events("s0", after=1)
        assert [(s.seq, s.event) for s in stored] == [
            (turn + 1, TurnStarted(turn=turn)) for turn in range(1, 11)
        ]
    finally:
        await store.aclose()


async def test_releases_share_the_commit_of_the_moments_appends(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 6)
    statements = traced(store)
    try:
        outcomes = await gather(
            appending(store, "s0", 1),
            lambda: store.release("s1"),
            appending(store, "s2", 1),
            lambda: store.release("s3"),
            lambda: store.release("s4"),
            appending(store, "s4", 1),  # after its release: the free lease is taken again
        )
        assert outcomes == [2, None, 2, None, None, 2]
        assert commits(statements) == 1
        held = rows(db, "SELECT session_id FROM leases ORDER BY session_id")
        assert held == [("s0",), ("s2",), ("s4",), ("s5",)]
        assert [s.seq for s in await store.events("s4")] == [1, 2]
    finally:
        await store.aclose()


async def test_a_member_whose_lease_another_store_holds_fails_alone_as_directly(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 3)
    holder = SQLiteStore(db)  # another owner, in this process: it keeps the lease of "taken"
    await holder.create(SessionHeader(id="taken", created_at=9.0))
    direct = SQLiteStore(db)
    try:
        with pytest.raises(StoreError) as refused:
            await direct.append("taken", [TurnStarted(turn=1)])
        outcomes = await gather(
            appending(store, "s0", 1),
            appending(store, "taken", 1),
            appending(store, "s1", 1),
            appending(store, "s2", 1),
        )
        assert outcomes[0] == outcomes[2] == outcomes[3] == 2
        busy = outcomes[1]
        assert isinstance(busy, StoreError)
        assert busy.code is ErrorCode.SESSION_BUSY
        assert str(busy) == str(refused.value)
        assert await holder.events("taken") == []
        assert rows(db, "SELECT count(*) FROM events WHERE seq = 2") == [(3,)]
    finally:
        for each in (store, holder, direct):
            await each.aclose()


async def test_a_member_for_an_unknown_session_fails_alone_as_directly(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 2)
    direct = SQLiteStore(db)
    try:
        with pytest.raises(StoreError) as unknown:
            await direct.append("nope", [TurnStarted(turn=1)])
        outcomes = await gather(
            appending(store, "s0", 1), appending(store, "nope", 1), appending(store, "s1", 1)
        )
        assert outcomes[0] == outcomes[2] == 2
        assert isinstance(outcomes[1], StoreError)
        assert outcomes[1].code is ErrorCode.SESSION_NOT_FOUND
        assert str(outcomes[1]) == str(unknown.value)
    finally:
        await store.aclose()
        await direct.aclose()


async def test_a_member_another_writer_got_ahead_of_conflicts_alone(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 2)
    other = sqlite3.connect(db)  # another program: it knows nothing of leases
    other.execute(
        "INSERT INTO events VALUES ('s0', 2, 'turn/start', ?)",
        (TurnStarted(turn=7).model_dump_json(),),
    )
    other.commit()
    other.close()
    try:
        outcomes = await gather(
            appending(store, "s0", 1), appending(store, "s1", 1), appending(store, "s0", 2)
        )
        conflict = outcomes[0]
        assert isinstance(conflict, StoreError)
        assert conflict.code is ErrorCode.SESSION_CONFLICT
        assert str(conflict).startswith('session "s0" already has an event 2: another writer')
        # The next member of the same session read where the log is; the other session went on.
        assert outcomes[1:] == [2, 3]
        assert [s.event for s in await store.events("s0")] == [
            TurnStarted(turn=0),
            TurnStarted(turn=7),
            TurnStarted(turn=2),
        ]
    finally:
        await store.aclose()


async def test_a_batch_waits_for_a_locked_file_then_commits_once(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 10)
    statements = traced(store)
    other = locked_by_another_connection(db)

    async def unlock_later() -> None:
        await anyio.sleep(LOCK_HELD)
        other.execute("ROLLBACK")

    try:
        start = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(unlock_later)
            seqs = await gather(*(appending(store, f"s{n}", n) for n in range(10)))
        assert time.monotonic() - start >= LOCK_HELD * 0.9
        assert seqs == [2] * 10
        assert commits(statements) == 1
        assert rows(db, "SELECT count(*) FROM events") == [(20,)]
    finally:
        other.close()
        await store.aclose()


async def test_a_batch_locked_past_the_busy_timeout_fails_every_member_unwritten(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 5, busy_timeout=0.2)
    before = dict(store._next_seq)  # pyright: ignore[reportPrivateUsage]  (white-box)
    other = locked_by_another_connection(db)
    try:
        outcomes = await gather(*(appending(store, f"s{n}", n) for n in range(5)))
        for outcome in outcomes:
            assert isinstance(outcome, StoreError)
            assert outcome.code is ErrorCode.STORE_BUSY
        other.execute("ROLLBACK")
        assert rows(db, "SELECT count(*) FROM events") == [(5,)]
        assert store._next_seq == before  # pyright: ignore[reportPrivateUsage]  (white-box)
        assert await gather(*(appending(store, f"s{n}", n) for n in range(5))) == [2] * 5
        assert [s.seq for s in await store.events("s3")] == [1, 2]
    finally:
        other.close()
        await store.aclose()


async def test_a_member_cancelled_while_its_batch_waits_is_not_written(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 2)
    other = locked_by_another_connection(db)
    seqs: dict[str, int] = {}
    scopes: list[anyio.CancelScope] = []

    async def leader() -> None:
        seqs["s0"] = await store.append("s0", [TurnStarted(turn=1)])

    async def follower() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            seqs["s1"] = await store.append("s1", [TurnStarted(turn=1)])

    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(leader)
                group.start_soon(follower)
                await anyio.sleep(LOCK_HELD / 3)
                scopes[0].cancel()  # the follower gives up while the file is locked
                await anyio.sleep(LOCK_HELD)
                other.execute("ROLLBACK")
        assert scopes[0].cancelled_caught
        assert seqs == {"s0": 2}
        assert [s.seq for s in await store.events("s1")] == [1]
        assert await store.append("s1", [TurnStarted(turn=2)]) == 2
    finally:
        other.close()
        await store.aclose()


async def test_a_cancelled_leader_still_writes_its_batch(tmp_path):
    db = tmp_path / "s.db"
    store = await full_store(db, 2)
    other = locked_by_another_connection(db)
    seqs: dict[str, int] = {}
    scopes: list[anyio.CancelScope] = []

    async def leader() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            seqs["s0"] = await store.append("s0", [TurnStarted(turn=1)])

    async def follower() -> None:
        seqs["s1"] = await store.append("s1", [TurnStarted(turn=1)])

    try:
        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(leader)
                group.start_soon(follower)
                await anyio.sleep(LOCK_HELD / 3)
                scopes[0].cancel()  # the others rely on the leader: it finishes their commit
                await anyio.sleep(LOCK_HELD)
                other.execute("ROLLBACK")
        assert seqs == {"s0": 2, "s1": 2}
        assert rows(db, "SELECT count(*) FROM events") == [(4,)]
    finally:
        other.close()
        await store.aclose()


async def test_appends_waiting_when_the_store_closes_fail_without_hanging(tmp_path):
    db = tmp_path / "s.db"
    await (await full_store(db, 3)).aclose()
    store = SQLiteStore(db, synchronous="FULL")  # holds no lease: closing needs no lock
    other = locked_by_another_connection(db)
    try:
        outcomes: list[object] = []

        async def appends() -> None:
            outcomes.extend(await gather(*(appending(store, f"s{n}", 1) for n in range(3))))

        with anyio.fail_after(TIMEOUT):
            async with anyio.create_task_group() as group:
                group.start_soon(appends)
                await anyio.sleep(LOCK_HELD / 3)
                await store.aclose()
        assert len(outcomes) == 3
        for outcome in outcomes:
            assert isinstance(outcome, sqlite3.ProgrammingError)
            assert "is closed; nothing was written" in str(outcome)
        with pytest.raises(sqlite3.ProgrammingError):
            await store.append("s0", [TurnStarted(turn=1)])
        other.execute("ROLLBACK")
        assert rows(db, "SELECT count(*) FROM events") == [(3,)]
    finally:
        other.close()


async def test_normal_commits_each_append_on_its_own_in_one_statement(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    for n in range(10):
        await store.create(SessionHeader(id=f"s{n}", created_at=float(n)))
    statements = traced(store)
    try:
        assert await store.append("s0", [UserMessage(message_id="m", content="x")]) == 1
        assert len(statements) == 1
        assert statements[0].startswith("INSERT INTO events SELECT")
        statements.clear()
        assert await gather(*(appending(store, f"s{n}", 1) for n in range(10))) == [2] + [1] * 9
        assert commits(statements) == 10
    finally:
        await store.aclose()
