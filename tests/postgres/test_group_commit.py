"""Group commit on PostgreSQL: the appends one store's sessions make at the same moment go in one
statement, each keeps its own outcome (a lost lease, a foreign writer's row), and a cancelled
append leaves every log where the store believes it is."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import anyio
import psycopg
import pytest

from tether.errors import ErrorCode, StoreError
from tether.store import SessionHeader, TurnStarted
from tether.testing import scaled
from tether_postgres import PostgresStore

pytestmark = pytest.mark.anyio

#: Generous: the suite must pass on a busy 2-core machine.
TIMEOUT = scaled(60.0)


async def held_sessions(url: str, sessions: int) -> PostgresStore:
    """A store holding ``sessions`` sessions ``s0``... with one event each, appended once more
    (so the store knows where each log is, and the next appends are grouped)."""
    store = PostgresStore(url)
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


def appending(store: PostgresStore, session_id: str, *turns: int) -> Callable[[], Awaitable[int]]:
    return lambda: store.append(session_id, [TurnStarted(turn=turn) for turn in turns])


def transactions(url: str, seq: int) -> int:
    """How many transactions wrote the events numbered ``seq`` (rows of one share ``xmin``)."""
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute(
            "SELECT count(DISTINCT xmin::text) FROM tether_events WHERE seq = %s", (seq,)
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_fifty_sessions_appending_at_once_share_a_few_statements(postgres_url):
    store = await held_sessions(postgres_url, 50)
    try:
        seqs = await gather(*(appending(store, f"s{n}", n, n) for n in range(50)))
        assert seqs == [3] * 50
        assert transactions(postgres_url, 2) <= 5
        for n in range(50):
            stored = await store.events(f"s{n}")
            assert [(s.seq, s.event) for s in stored] == [
                (1, TurnStarted(turn=0)),
                (2, TurnStarted(turn=n)),
                (3, TurnStarted(turn=n)),
            ]
        # The store knows where each log is: the next round is grouped too, and in place.
        assert await gather(*(appending(store, f"s{n}", 99) for n in range(50))) == [4] * 50
    finally:
        await store.aclose()


async def test_a_member_whose_lease_was_taken_fails_alone_as_directly(postgres_url):
    store = await held_sessions(postgres_url, 4)
    try:
        # Another host took s2 over (its lease expired there): the store still believes it
        # holds it, so s2's append joins the batch and the lease check in the statement
        # refuses it; the one-session path then says why, as it would alone.
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute(
                "UPDATE tether_leases SET host = 'elsewhere.example', pid = 1, token = 'other', "
                "expires_at = extract(epoch from now()) + 600 WHERE session_id = 's2'"
            )
        outcomes = await gather(*(appending(store, f"s{n}", 1) for n in range(4)))
        assert outcomes[0] == outcomes[1] == outcomes[3] == 2
        busy = outcomes[2]
        assert isinstance(busy, StoreError)
        assert busy.code is ErrorCode.SESSION_BUSY
        assert "elsewhere.example" in str(busy)
        assert [s.seq for s in await store.events("s2")] == [1]
    finally:
        await store.aclose()


async def test_a_foreign_writers_row_fails_only_the_session_it_is_in(postgres_url):
    store = await held_sessions(postgres_url, 4)
    try:
        # Another program (one that ignores leases) wrote event 2 of s1: the batch's statement
        # fails as a whole, and each member goes alone: s1 is told, the others are written once.
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute(
                "INSERT INTO tether_events (session_id, seq, type, data) "
                "VALUES ('s1', 2, 'turn/start', '{\"type\": \"turn/start\", \"turn\": 7}')"
            )
        outcomes = await gather(*(appending(store, f"s{n}", 1) for n in range(4)))
        assert outcomes[0] == outcomes[2] == outcomes[3] == 2
        conflict = outcomes[1]
        assert isinstance(conflict, StoreError)
        assert conflict.code is ErrorCode.SESSION_CONFLICT
        for n in (0, 2, 3):
            assert [s.seq for s in await store.events(f"s{n}")] == [1, 2]
        # Told, the store reads where s1's log is: its next append lands after the foreign row.
        assert await store.append("s1", [TurnStarted(turn=8)]) == 3
    finally:
        await store.aclose()


async def test_cancelled_appends_leave_each_log_where_the_store_believes_it_is(postgres_url):
    """Appends cancelled at random moments (waiting to join, waiting for the statement in
    flight): each one's events are in the log or not, and the store's next append of every
    session lands right after the last event, never on a seq already taken."""
    store = await held_sessions(postgres_url, 30)
    chance = random.Random(18)
    try:

        async def one(session_id: str, scope: anyio.CancelScope, returned: dict[str, int]) -> None:
            with scope:
                returned[session_id] = await store.append(session_id, [TurnStarted(turn=1)])

        for _ in range(5):
            returned: dict[str, int] = {}

            with anyio.fail_after(TIMEOUT):
                async with anyio.create_task_group() as group:
                    scopes = {f"s{n}": anyio.CancelScope() for n in range(30)}
                    for session_id, scope in scopes.items():
                        group.start_soon(one, session_id, scope, returned)
                    for _ in range(chance.randrange(0, 4)):
                        await anyio.lowlevel.checkpoint()
                    for scope in chance.sample(list(scopes.values()), 10):
                        scope.cancel()
            for n in range(30):
                session_id = f"s{n}"
                stored = await store.events(session_id)
                assert [s.seq for s in stored] == list(range(1, len(stored) + 1))
                if session_id in returned:
                    assert returned[session_id] == len(stored)
                assert await store.append(session_id, [TurnStarted(turn=2)]) == len(stored) + 1
    finally:
        await store.aclose()
