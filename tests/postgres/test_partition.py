"""A network partition between tether and its PostgreSQL server ends the turn within a set time
with STORE_UNAVAILABLE, loses nothing, and the session carries on once the network is back.

The partition is real: a TCP proxy (``partition.Partition``) between the store and the server
stops forwarding in the middle of a turn. Before the store bounded its waits, the turn waited as
long as the partition lasted; here a watchdog heals the network after ``HEAL_AFTER`` seconds, so
a store that does not give up by itself makes the test fail (late, with a completed turn) rather
than hang the suite.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import anyio
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tether.agents import Agent, new_header
from tether.errors import ErrorCode, StoreError
from tether.models import FunctionModel, ModelRequest
from tether.store import TurnEnded, UserMessage
from tether.testing import log_problems
from tether_postgres import PostgresStore

from .partition import Partition

pytestmark = pytest.mark.anyio

#: The store's statement_timeout, made short for the test (the default is 30 s): a call gives up
#: after it plus the grace for the server's own answer (``PostgresStore.answer_timeout``).
BOUND = 2.0
#: When the watchdog heals a partition the store failed to give up on: well past the bound.
HEAL_AFTER = 90.0
#: How late past the store's bound the turn may end on a busy machine.
SLACK = 30.0


def open_store(partition: Partition, postgres_url: str) -> PostgresStore:
    return PostgresStore(
        partition.conninfo(postgres_url), statement_timeout=BOUND, connect_timeout=BOUND
    )


async def test_a_partition_mid_turn_ends_it_with_store_unavailable_and_the_session_resumes(
    postgres_url,
):
    with Partition() as partition:
        watchdog = threading.Timer(HEAL_AFTER, partition.heal)
        watchdog.start()
        store = open_store(partition, postgres_url)
        try:
            header = await store.create(new_header())

            def answer(request: ModelRequest) -> str:
                if partition.cuts == 0:
                    partition.cut()  # the network drops just as the answer is to be stored
                return f"answer to {request.messages[-1].content}"

            agent = Agent(header=header, store=store, model=FunctionModel(answer), new_session=True)
            started = time.monotonic()
            async with agent:
                stop = await agent.run("first")
                took = time.monotonic() - started
                fault = agent.fault
            # The store refused the turn's end: the agent says why and takes no more turns.
            assert stop == "error"
            assert isinstance(fault, StoreError)
            assert fault.code is ErrorCode.STORE_UNAVAILABLE, fault
            assert f"did not answer within {store.answer_timeout:g} s" in str(fault)
            assert took < store.answer_timeout + SLACK, f"the turn ended after {took:.1f} s"
        finally:
            partition.heal()
            watchdog.cancel()
            with anyio.CancelScope(shield=True):
                await store.aclose()

        # The network is back: the session resumes in a new store (another process, say),
        # whatever the interrupted commit did, and its log keeps every promise.
        again = open_store(partition, postgres_url)
        try:
            agent = Agent(
                header=await again.header(header.id), store=again, model=FunctionModel(answer)
            )
            async with agent:
                assert await agent.run("second") == "completed"
            events = [stored.event for stored in await again.events(header.id)]
        finally:
            await again.aclose()
    assert [e.content for e in events if isinstance(e, UserMessage)][-1] == "second"
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)][-1] == "completed"
    assert log_problems(events) == []


async def test_a_call_and_a_close_during_a_partition_end_within_the_bound(postgres_url):
    with Partition() as partition:
        watchdog = threading.Timer(HEAL_AFTER, partition.heal)
        watchdog.start()
        store = open_store(partition, postgres_url)
        try:
            await store.create(new_header())  # connected: the pool holds a connection
            partition.cut()
            started = time.monotonic()
            with pytest.raises(StoreError) as info:
                await store.sessions()
            assert info.value.code is ErrorCode.STORE_UNAVAILABLE
            took = time.monotonic() - started
            assert took < store.answer_timeout + SLACK, f"the call ended after {took:.1f} s"
            started = time.monotonic()
            await store.aclose()  # cannot give its leases back: says so, and returns
            took = time.monotonic() - started
            assert took < store.answer_timeout + SLACK, f"the close ended after {took:.1f} s"
        finally:
            partition.heal()
            watchdog.cancel()
            with anyio.CancelScope(shield=True):
                await store.aclose()


@pytest.mark.skipif(os.geteuid() != 0, reason="stopping a server process needs root")
async def test_a_frozen_server_ends_the_call_and_the_same_store_carries_on_once_it_runs(
    postgres_url,
):
    # The case: the server's backends stop (SIGSTOP) and resume (SIGCONT) later.
    name = f"tether-frozen-{os.getpid()}"
    url = make_conninfo(postgres_url, application_name=name)
    store = PostgresStore(url, statement_timeout=BOUND, connect_timeout=BOUND)
    frozen: list[int] = []

    def thaw() -> None:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    watchdog = threading.Timer(HEAL_AFTER, thaw)
    watchdog.start()
    try:
        header = await store.create(new_header(), [UserMessage(message_id="m_one", content="one")])
        with psycopg.connect(postgres_url, autocommit=True) as db:
            rows = db.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
        frozen.extend(int(pid) for (pid,) in rows)
        assert frozen, "the store has no connection to freeze"
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            await store.append(header.id, [UserMessage(message_id="m_two", content="two")])
        took = time.monotonic() - started
        thaw()
        assert info.value.code is ErrorCode.STORE_UNAVAILABLE
        assert took < store.answer_timeout + SLACK, f"the append ended after {took:.1f} s"
        # Running again: the same store writes on, after what the log holds (the interrupted
        # append may have been committed by the server once it ran again, or not).
        last = await store.append(header.id, [UserMessage(message_id="m_three", content="three")])
        events = [stored.event for stored in await store.events(header.id)]
        contents = [event.content for event in events if isinstance(event, UserMessage)]
        assert len(contents) == len(events)
        assert contents[0] == "one"
        assert contents[-1] == "three"
        assert contents in (["one", "three"], ["one", "two", "three"])
        assert last == len(contents)
    finally:
        thaw()
        watchdog.cancel()
        with anyio.CancelScope(shield=True):
            await store.aclose()
