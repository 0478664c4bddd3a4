"""The delta relay on PostgreSQL (``LISTEN``/``NOTIFY``): batches published for a session reach
the processes following it, in order, long texts in pieces; a notification on its channel that
is not a batch (another program's) is skipped, not fatal."""

from __future__ import annotations

import logging

import anyio
import psycopg
import pytest

from tether.models import ModelDelta
from tether.store import DeltaBatch, DeltaRelay
from tether.testing import scaled
from tether_postgres import PostgresStore
from tether_postgres._store import delta_channel  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio

TIMEOUT = scaled(30.0)


async def test_published_batches_reach_a_follower_in_order(postgres_url):
    publisher = PostgresStore(postgres_url)
    follower = PostgresStore(postgres_url)  # another process's store, say
    assert isinstance(publisher, DeltaRelay)
    long = "é" * 2500  # over one notification's size: sent in pieces, in order
    try:
        async with follower.follow_deltas("s1") as batches:
            await publisher.publish_deltas(
                [
                    DeltaBatch("s1", "m1", 1, (ModelDelta("reasoning", "hmm"),)),
                    DeltaBatch("other", "m9", 1, (ModelDelta("text", "not mine"),)),
                ]
            )
            await publisher.publish_deltas(
                [
                    DeltaBatch(
                        "s1", "m1", 1, (ModelDelta("text", "Hel"), ModelDelta("text", "lo"))
                    ),
                    DeltaBatch("s1", "m1", 2, (ModelDelta("retry"), ModelDelta("text", long))),
                ]
            )
            heard: list[DeltaBatch] = []
            with anyio.fail_after(TIMEOUT):
                async for batch in batches:
                    heard.append(batch)
                    if "".join(d.text for b in heard for d in b.deltas).endswith(long):
                        break
    finally:
        await publisher.aclose()
        await follower.aclose()
    assert {b.session_id for b in heard} == {"s1"}
    assert [(b.message_id, b.step) for b in heard[:2]] == [("m1", 1), ("m1", 1)]
    assert [d.kind for d in heard[0].deltas] == ["reasoning"]
    assert "".join(d.text for d in heard[1].deltas) == "Hello"
    rest = [d for b in heard[2:] for d in b.deltas]
    assert {b.step for b in heard[2:]} == {2}
    assert rest[0].kind == "retry"
    assert "".join(d.text for d in rest[1:]) == long
    assert len(heard) > 3  # the long text took more than one notification


async def test_a_foreign_notification_on_the_channel_is_skipped(postgres_url, caplog):
    publisher = PostgresStore(postgres_url)
    follower = PostgresStore(postgres_url)
    try:
        async with follower.follow_deltas("s1") as batches:
            with psycopg.connect(postgres_url, autocommit=True) as db:
                for payload in ("not json", '{"m": 1, "s": "x", "d": []}', '{"m": "m1"}'):
                    db.execute("SELECT pg_notify(%s, %s)", (delta_channel("s1"), payload))
            await publisher.publish_deltas([DeltaBatch("s1", "m1", 1, (ModelDelta("text", "ok"),))])
            with caplog.at_level(logging.WARNING), anyio.fail_after(TIMEOUT):
                batch = await anext(aiter(batches))
    finally:
        await publisher.aclose()
        await follower.aclose()
    assert batch == DeltaBatch("s1", "m1", 1, (ModelDelta("text", "ok"),))
    assert caplog.text.count("is not a delta batch") == 3


def test_a_long_session_id_has_a_channel_postgresql_takes():
    assert delta_channel("ses_1") == "tether/ses_1"
    long = delta_channel("x" * 200)
    assert len(long.encode()) <= 63
    assert long == delta_channel("x" * 200) != delta_channel("x" * 199)
