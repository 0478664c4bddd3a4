"""One session, one driver, on PostgreSQL with real processes: a live holder keeps its session,
a killed one's is taken over exactly once, expiries are judged on the server's clock, and a store
whose lease was taken writes nothing."""

from __future__ import annotations

import socket
import subprocess
import sys

import anyio
import psycopg
import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import InboxAccepted, SessionHeader, TurnStarted
from tether_postgres import PostgresStore

pytestmark = pytest.mark.anyio


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def set_lease(url: str, session_id: str, *, host: str, pid: int, expires_in: float) -> None:
    """Rewrite a session's lease behind the stores' backs (another host, a dead owner); the
    expiry is ``expires_in`` seconds from now on the server's clock."""
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "INSERT INTO tether_leases (session_id, host, pid, started, token, expires_at) "
            "VALUES (%s, %s, %s, NULL, 'dead0wner', extract(epoch from now()) + %s) "
            "ON CONFLICT (session_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, "
            "started = NULL, token = excluded.token, expires_at = excluded.expires_at",
            (session_id, host, pid, expires_in),
        )


async def new_session(url: str, session_id: str = "s1") -> None:
    """A session whose lease is free (its creator closed)."""
    store = PostgresStore(url)
    await store.create(SessionHeader(id=session_id, created_at=1.0))
    await store.aclose()


async def test_a_session_a_live_process_holds_is_busy_naming_that_process(postgres_url, spawn):
    holder = spawn("hold", postgres_url, "s1")
    assert holder.line() == "READY"
    store = PostgresStore(postgres_url)
    try:
        for call in (
            store.acquire("s1"),
            store.append("s1", [TurnStarted(turn=2)]),
            store.take_mail("s1"),
            store.delete("s1"),
        ):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_BUSY
            assert f"driven by another process: pid {holder.pid} on host" in str(info.value)
        owner = await store.holder("s1")
        assert owner is not None
        assert owner.pid == holder.pid
        await store.post("s1", InboxAccepted(message_id="m1", content="for the holder"))
        assert await store.mail() == ["s1"]
        assert len(await store.events("s1")) == 1  # only the holder's own event
    finally:
        await store.aclose()


@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
async def test_a_killed_owners_session_is_taken_over_exactly_once(postgres_url, spawn, reap):
    holder = spawn("hold", postgres_url, "s1")
    assert holder.line() == "READY"
    holder.kill(reap=reap)
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        assert await first.holder("s1") is None  # its holder is dead
        with pytest.raises(StoreError) as info:
            await second.append("s1", [TurnStarted(turn=2)])
        assert info.value.code is ErrorCode.SESSION_BUSY  # a dead owner's log needs repair first
        assert "which has stopped" in str(info.value)
        assert await first.acquire("s1") is True
        with pytest.raises(StoreError) as info:
            await second.acquire("s1")  # the first store's process is alive
        assert info.value.code is ErrorCode.SESSION_BUSY
        assert await first.acquire("s1") is False  # taken over once, then simply ours
        assert await first.append("s1", [TurnStarted(turn=2)]) == 2
    finally:
        await first.aclose()
        await second.aclose()


async def test_of_two_processes_racing_for_a_dead_owners_session_one_wins(postgres_url, spawn):
    await new_session(postgres_url)
    racers = [spawn("race", postgres_url, "s1") for _ in range(2)]
    for racer in racers:
        assert racer.line() == "READY"
    deaths = [
        {"host": socket.gethostname(), "pid": dead_pid(), "expires_in": 60.0},
        {"host": "elsewhere.example", "pid": 1, "expires_in": -1.0},  # an expired remote owner
    ]
    for round_ in range(6):
        set_lease(postgres_url, "s1", **deaths[round_ % 2])
        for racer in racers:
            racer.send("go")
        assert sorted(racer.line() for racer in racers) == ["busy", "took"]


async def test_a_lease_from_another_host_holds_until_it_expires_on_the_servers_clock(
    postgres_url,
):
    await new_session(postgres_url)
    store = PostgresStore(postgres_url)
    try:
        set_lease(postgres_url, "s1", host="elsewhere.example", pid=4242, expires_in=60)
        with pytest.raises(StoreError) as info:
            await store.acquire("s1")
        assert info.value.code is ErrorCode.SESSION_BUSY
        assert 'pid 4242 on host "elsewhere.example"' in str(info.value)
        assert await store.holder("s1") is not None
        set_lease(postgres_url, "s1", host="elsewhere.example", pid=4242, expires_in=-1)
        assert await store.holder("s1") is None
        assert await store.acquire("s1") is True
    finally:
        await store.aclose()


async def test_renew_pushes_the_expiry_on_the_servers_clock(postgres_url):
    store = PostgresStore(postgres_url, lease_ttl=5.0)
    try:
        for session_id in ("s1", "s2"):
            await store.create(SessionHeader(id=session_id, created_at=1.0))
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute("UPDATE tether_leases SET expires_at = 0")
        await store.renew()
        with psycopg.connect(postgres_url, autocommit=True) as db:
            left = db.execute(
                "SELECT expires_at - extract(epoch from now()) FROM tether_leases"
            ).fetchall()
        assert len(left) == 2
        assert all(4.0 < float(row[0]) <= 5.0 for row in left)
    finally:
        await store.aclose()
    with psycopg.connect(postgres_url, autocommit=True) as db:
        assert db.execute("SELECT count(*) FROM tether_leases").fetchone() == (0,)


async def test_a_store_whose_lease_was_taken_over_writes_nothing(postgres_url):
    first = PostgresStore(postgres_url)
    await first.create(SessionHeader(id="s1", created_at=1.0), [TurnStarted(turn=1)])
    # Seen from another host, the first store stopped renewing: its lease expired.
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("UPDATE tether_leases SET host = 'elsewhere.example', expires_at = 0")
    second = PostgresStore(postgres_url)
    try:
        assert await second.acquire("s1") is True
        await first.post("s1", InboxAccepted(message_id="m1", content="hi"))
        for call in (
            first.append("s1", [TurnStarted(turn=2)]),
            first.append("s1", [TurnStarted(turn=2), TurnStarted(turn=3)]),
            first.take_mail("s1"),
        ):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_BUSY
        assert [s.seq for s in await second.events("s1")] == [1]
        assert [m.message_id for m in await second.take_mail("s1")] == ["m1"]
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_takeover_waits_for_a_write_in_flight(postgres_url):
    """The fenced append share-locks the lease row until it commits: a takeover that starts
    while the write is open waits for it, then sees it (no event is lost or duplicated)."""
    first = PostgresStore(postgres_url)
    await first.create(SessionHeader(id="s1", created_at=1.0), [TurnStarted(turn=1)])
    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("UPDATE tether_leases SET host = 'elsewhere.example', expires_at = 0")
    # Another program holds the session's row for a moment: the first store's append is in
    # flight (its lease row share-locked, its foreign-key check waiting) while the second store
    # tries to take over.
    second = PostgresStore(postgres_url, busy_timeout=30)
    locker = psycopg.connect(postgres_url)
    try:
        locker.execute("SELECT 1 FROM tether_sessions WHERE id = 's1' FOR UPDATE")
        async with anyio.create_task_group() as group:
            written: list[int] = []

            async def append() -> None:
                written.append(await first.append("s1", [TurnStarted(turn=2)]))

            group.start_soon(append)
            await anyio.sleep(0.3)  # the append waits on the session row, its lease row locked
            took: list[bool] = []

            async def take() -> None:
                took.append(await second.acquire("s1"))

            group.start_soon(take)
            await anyio.sleep(0.3)
            assert took == []  # waiting for the write in flight, not past it
            locker.rollback()  # the append commits, then the takeover goes through
        assert written == [2]
        assert took == [True]
        assert [s.seq for s in await second.events("s1")] == [1, 2]
        assert await second.append("s1", [TurnStarted(turn=3)]) == 3
    finally:
        locker.close()
        await first.aclose()
        await second.aclose()
