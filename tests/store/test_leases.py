"""One session, one driver, with real processes on a real SQLite file: who holds a lease, when
its owner counts as dead, and that exactly one process takes a dead owner's session over."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import (
    InboxAccepted,
    LeaseOwner,
    SessionHeader,
    SQLiteStore,
    TurnStarted,
)

pytestmark = pytest.mark.anyio


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def set_lease(db: Path, session_id: str, **columns: object) -> None:
    """Rewrite a session's lease behind the stores' backs (another host, a dead owner)."""
    lease = {
        "host": socket.gethostname(),
        "pid": dead_pid(),
        "started": None,
        "token": "dead0wner",
        "expires_at": time.time() + 60,
    }
    lease.update(columns)
    with sqlite3.connect(db) as connection:
        connection.execute(
            "INSERT OR REPLACE INTO leases (session_id, host, pid, started, token, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, *lease.values()),
        )
    connection.close()


def lease_expiries(db: Path) -> list[float]:
    connection = sqlite3.connect(db)
    try:
        return [row[0] for row in connection.execute("SELECT expires_at FROM leases")]
    finally:
        connection.close()


async def new_session(db: Path, session_id: str = "s1") -> None:
    """A session whose lease is free (its creator closed)."""
    store = SQLiteStore(db)
    await store.create(SessionHeader(id=session_id, created_at=1.0))
    await store.aclose()


# -- liveness -------------------------------------------------------------------------------


def test_the_current_owner_names_this_process():
    owner = LeaseOwner.current()
    assert (owner.host, owner.pid) == (socket.gethostname(), os.getpid())
    if sys.platform == "linux":
        assert owner.started is not None
        assert owner.started > 0
    assert owner.token != LeaseOwner.current().token  # one token per store object
    assert owner.alive(expires_at=0.0)  # on its own host, a running process is alive


def test_an_exited_process_is_dead():
    owner = LeaseOwner(host=socket.gethostname(), pid=dead_pid(), started=None, token="t")
    assert not owner.alive(expires_at=time.time() + 60)


@pytest.mark.skipif(sys.platform != "linux", reason="start times come from /proc")
def test_a_reused_pid_is_dead():
    me = LeaseOwner.current()
    assert me.started is not None
    reused = LeaseOwner(host=me.host, pid=me.pid, started=me.started - 1.0, token="t")
    assert not reused.alive(expires_at=time.time() + 60)


@pytest.mark.skipif(sys.platform != "linux", reason="process states come from /proc")
def test_a_killed_process_its_parent_has_not_reaped_is_dead():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = LeaseOwner(host=socket.gethostname(), pid=process.pid, started=None, token="t")
        assert owner.alive(expires_at=0.0)
        process.kill()
        deadline = time.monotonic() + 10
        while owner.alive(expires_at=0.0) and time.monotonic() < deadline:
            time.sleep(0.01)  # the kill takes effect asynchronously
        assert not owner.alive(expires_at=0.0)  # a zombie until the wait below
    finally:
        process.kill()
        process.wait()


def test_an_owner_on_another_host_lives_until_its_lease_expires():
    owner = LeaseOwner(host="elsewhere.example", pid=os.getpid(), started=None, token="t")
    assert owner.alive(expires_at=100.0, now=99.0)
    assert not owner.alive(expires_at=100.0, now=100.0)


# -- a live owner keeps its session ---------------------------------------------------------


async def test_a_session_a_live_process_holds_is_busy_naming_that_process(tmp_path, spawn):
    db = tmp_path / "s.db"
    holder = spawn("hold", db, "s1")
    assert holder.line() == "READY"
    store = SQLiteStore(db)
    try:
        for call in (
            store.acquire("s1"),
            store.append("s1", [TurnStarted(turn=2)]),
            store.take_mail("s1"),
        ):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_BUSY
            assert f"driven by another process: pid {holder.pid} on host" in str(info.value)
            assert "tether sessions send s1" in str(info.value)
        owner = await store.holder("s1")
        assert owner is not None
        assert owner.pid == holder.pid
        await store.post("s1", InboxAccepted(message_id="m1", content="for the holder"))
        assert await store.mail() == ["s1"]
        assert len(await store.events("s1")) == 1  # only the holder's own event
    finally:
        await store.aclose()


# -- a dead owner's session is taken over once ----------------------------------------------


@pytest.mark.parametrize("reap", [True, False], ids=["reaped", "zombie"])
async def test_a_killed_owners_session_is_taken_over_exactly_once(tmp_path, spawn, reap):
    db = tmp_path / "s.db"
    holder = spawn("hold", db, "s1")
    assert holder.line() == "READY"
    holder.kill(reap=reap)
    first, second = SQLiteStore(db), SQLiteStore(db)
    try:
        assert await first.holder("s1") is None  # its holder is dead
        with pytest.raises(StoreError) as info:
            await second.append("s1", [TurnStarted(turn=2)])
        assert info.value.code is ErrorCode.SESSION_BUSY  # a dead owner's log needs repair first
        assert f"pid {holder.pid}" in str(info.value)
        assert "which has stopped" in str(info.value)
        assert "restore the session first" in str(info.value)
        assert await first.acquire("s1") is True
        with pytest.raises(StoreError) as info:
            await second.acquire("s1")  # the first store's process is alive
        assert info.value.code is ErrorCode.SESSION_BUSY
        assert await first.acquire("s1") is False  # taken over once, then simply ours
        assert await first.append("s1", [TurnStarted(turn=2)]) == 2
    finally:
        await first.aclose()
        await second.aclose()


async def test_of_two_processes_racing_for_a_dead_owners_session_one_wins(tmp_path, spawn):
    db = tmp_path / "s.db"
    await new_session(db)
    racers = [spawn("race", db, "s1") for _ in range(2)]
    for racer in racers:
        assert racer.line() == "READY"
    deaths = [
        {"pid": dead_pid()},  # an exited process on this host
        {"host": "elsewhere.example", "pid": 1, "expires_at": 0.0},  # an expired remote owner
    ]
    for round_ in range(6):
        set_lease(db, "s1", **deaths[round_ % 2])
        for racer in racers:
            racer.send("go")
        assert sorted(racer.line() for racer in racers) == ["busy", "took"]


async def test_a_store_whose_lease_was_taken_over_writes_nothing(tmp_path):
    db = tmp_path / "s.db"
    first = SQLiteStore(db)
    await first.create(SessionHeader(id="s1", created_at=1.0), [TurnStarted(turn=1)])
    # Seen from another host, the first store stopped renewing: its lease expired.
    connection = sqlite3.connect(db)
    connection.execute("UPDATE leases SET host = 'elsewhere.example', expires_at = 0")
    connection.commit()
    connection.close()
    second = SQLiteStore(db)
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


async def test_a_lease_from_another_host_holds_until_it_expires(tmp_path):
    db = tmp_path / "s.db"
    await new_session(db)
    set_lease(db, "s1", host="elsewhere.example", pid=4242, expires_at=time.time() + 60)
    store = SQLiteStore(db)
    try:
        with pytest.raises(StoreError) as info:
            await store.acquire("s1")
        assert info.value.code is ErrorCode.SESSION_BUSY
        assert 'pid 4242 on host "elsewhere.example"' in str(info.value)
        set_lease(db, "s1", host="elsewhere.example", pid=4242, expires_at=time.time() - 1)
        assert await store.acquire("s1") is True
    finally:
        await store.aclose()


async def test_renew_pushes_the_expiry_of_every_held_lease(tmp_path):
    db = tmp_path / "s.db"
    store = SQLiteStore(db, lease_ttl=5.0)
    try:
        for session_id in ("s1", "s2"):
            await store.create(SessionHeader(id=session_id, created_at=1.0))
        connection = sqlite3.connect(db)
        connection.execute("UPDATE leases SET expires_at = 0")
        connection.commit()
        connection.close()
        before = time.time()
        await store.renew()
        for expires_at in lease_expiries(db):
            assert before + 5.0 <= expires_at <= time.time() + 5.0
    finally:
        await store.aclose()
    assert lease_expiries(db) == []  # closing released them


async def test_delete_refuses_a_session_another_live_process_holds(tmp_path, spawn):
    db = tmp_path / "s.db"
    holder = spawn("hold", db, "s1")
    assert holder.line() == "READY"
    store = SQLiteStore(db)
    try:
        with pytest.raises(StoreError) as info:
            await store.delete("s1")
        assert info.value.code is ErrorCode.SESSION_BUSY
        holder.kill()
        await store.delete("s1")  # a dead owner's session may be rolled back
        assert await store.sessions() == []
    finally:
        await store.aclose()
