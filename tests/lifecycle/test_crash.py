"""A removal killed half-way leaves nothing half-done: a real process ends sessions in a real
SQLite file (or PostgreSQL database) and is killed (SIGKILL) inside the store's transaction,
every change but the last made; the store then holds every session as it was, and the next
removal does it whole."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tether.store import InboxAccepted, SessionHeader, SQLiteStore, TurnStarted
from tether.testing import wait_until
from tether_postgres import PostgresStore

pytestmark = pytest.mark.anyio

FAMILY = ("root", "a", "a1", "d", "d1", "stranger")


def open_store(where: object) -> SQLiteStore | PostgresStore:
    if isinstance(where, str) and where.startswith("postgresql"):
        return PostgresStore(where)
    assert isinstance(where, Path)
    return SQLiteStore(where)


async def build(where: object) -> dict[str, list[object]]:
    """root -> a -> a1, root -> d (detached) -> d1, a stranger; each with a log, root with
    mail. What each session's log is."""
    store = open_store(where)
    now = time.time()
    parents = {"a": "root", "a1": "a", "d": "root", "d1": "d"}
    try:
        for n, sid in enumerate(FAMILY):
            header = SessionHeader(
                id=sid,
                created_at=now + n,
                parent_session=parents.get(sid),
                origin="subagent" if sid in parents else "user",
                detached=sid == "d",
            )
            await store.create(header, [TurnStarted(turn=1), TurnStarted(turn=2)])
            await store.release(sid)  # nobody drives them now
        await store.post("root", InboxAccepted(message_id="m1", content="waiting"))
        await store.post("a", InboxAccepted(message_id="m2", content="waiting"))
        return {sid: [s.event for s in await store.events(sid)] for sid in FAMILY}
    finally:
        await store.aclose()


async def state(where: object) -> dict[str, tuple[object, ...]]:
    store = open_store(where)
    try:
        found = {h.id: h for h in await store.sessions()}
        return {
            sid: (
                found[sid].closed_at,
                tuple(s.event for s in await store.events(sid)),
                tuple(await store.mailbox(sid)),
            )
            for sid in found
        }
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["close", "delete", "delete-tree"])
async def test_a_removal_killed_midway_leaves_every_session_as_it_was(
    tmp_path, spawn_lifecycle, mode
):
    path = tmp_path / "s.db"
    await build(path)
    before = await state(path)
    assert set(before) == set(FAMILY)

    worker = spawn_lifecycle(mode, path, "root")
    assert worker.line() == "READY"
    assert worker.line() == "MIDWAY"  # inside the transaction, all but its last statement run
    worker.kill()

    assert await state(path) == before  # nothing closed, nothing deleted, no mail lost
    await again_whole(path)


async def again_whole(where: object) -> None:
    store = open_store(where)
    try:  # the store is whole and unlocked: the removal runs again, whole
        removal = await store.delete_session("root", at=time.time(), tree=True)
        assert sorted(removal.deleted) == ["a", "a1", "d", "d1", "root"]
        assert [h.id for h in await store.sessions()] == ["stranger"]
    finally:
        await store.aclose()


#: The last statement of each removal on PostgreSQL, and the table whose trigger stalls it.
_PG_LAST = {
    "close": ("tether_mailbox", "DELETE FROM tether_mailbox WHERE session_id = ANY"),
    "delete": ("tether_sessions", "DELETE FROM tether_sessions WHERE id = ANY"),
    "delete-tree": ("tether_sessions", "DELETE FROM tether_sessions WHERE id = ANY"),
}


@pytest.mark.parametrize("mode", ["close", "delete", "delete-tree"])
async def test_a_postgres_removal_whose_process_is_killed_midway_is_rolled_back(
    postgres_url, spawn_lifecycle, mode
):
    import psycopg

    await build(postgres_url)
    before = await state(postgres_url)
    table, last = _PG_LAST[mode]
    with psycopg.connect(postgres_url, autocommit=True) as db:
        # The test's stall: the removal's last statement waits on the server, every other
        # change made and uncommitted, while the test kills its process.
        db.execute(
            "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(3); RETURN NULL; END $$"
        )
        db.execute(
            f"CREATE TRIGGER stall BEFORE DELETE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION stall()".encode()
        )
        worker = spawn_lifecycle(mode, postgres_url, "root")
        assert worker.line() == "READY"

        def backend() -> int | None:
            row = db.execute(
                "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s",
                (last + "%",),
            ).fetchone()
            return None if row is None else int(row[0])

        pid = await wait_until(backend, "the removal reaching its last statement")
        worker.kill()
        # The server finds its client gone once the statement ends, and rolls back.
        await wait_until(
            lambda: (
                db.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
                is None
            ),
            "the killed client's backend ending",
        )
        db.execute(f"DROP TRIGGER stall ON {table}".encode())
    assert await state(postgres_url) == before
    await again_whole(postgres_url)
