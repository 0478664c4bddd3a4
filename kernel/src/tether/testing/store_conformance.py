"""The conformance suite for a ``SessionStore``: subclass it and provide a ``store`` fixture.

::

    from tether.testing.store_conformance import SessionStoreConformance

    class TestMyStore(SessionStoreConformance):
        @pytest.fixture
        async def store(self, tmp_path):
            store = MyStore(tmp_path / "db")
            yield store
            await store.aclose()

        # Optional: a fresh store on the same storage, to prove durability across a restart.
        @pytest.fixture
        def reopen(self, tmp_path):
            return lambda: MyStore(tmp_path / "db")

The tests run under anyio's pytest plugin (``pytest.mark.anyio``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ..errors import ErrorCode, StoreError
from ..store import (
    AssistantMessage,
    DescriptorEvent,
    SessionHeader,
    SessionStore,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

__all__ = ("SessionStoreConformance",)


def _header(session_id: str, **fields: Any) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=fields.pop("created_at", time.time()), **fields)


@pytest.mark.anyio
class SessionStoreConformance:
    """Behaviours every ``SessionStore`` must have; one test per behaviour."""

    @pytest.fixture
    def reopen(self) -> Callable[[], SessionStore] | None:
        """Override to return a factory for a second store on the same storage."""
        return None

    async def test_is_a_session_store(self, store: SessionStore) -> None:
        assert isinstance(store, SessionStore)

    async def test_create_then_read_the_header(self, store: SessionStore) -> None:
        header = _header("s1", label="first", agent="main", seed_length=0)
        await store.create(header)
        assert await store.header("s1") == header

    async def test_create_with_first_events_is_one_step(self, store: SessionStore) -> None:
        first = [TurnStarted(turn=1), TurnEnded(turn=1, stop_reason="completed")]
        await store.create(_header("s1"), first)
        assert [(s.seq, s.event) for s in await store.events("s1")] == [
            (1, first[0]),
            (2, first[1]),
        ]
        assert await store.append("s1", [TurnStarted(turn=2)]) == 3
        with pytest.raises(StoreError):
            await store.create(_header("s1"), [TurnStarted(turn=9)])
        assert len(await store.events("s1")) == 3  # the failed create wrote nothing

    async def test_creating_an_existing_session_is_an_error(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        with pytest.raises(StoreError) as info:
            await store.create(_header("s1"))
        assert info.value.code is ErrorCode.SESSION_EXISTS

    async def test_unknown_session_is_not_found(self, store: SessionStore) -> None:
        for call in (store.header("nope"), store.events("nope")):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_NOT_FOUND
        with pytest.raises(StoreError):
            await store.append("nope", [TurnStarted(turn=1)])

    async def test_events_come_back_in_order_with_gap_free_seq(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        events = [
            UserMessage(message_id="m1", content="hi"),
            TurnStarted(turn=1, message_id="m1"),
            AssistantMessage(content="hello"),
            TurnEnded(turn=1, stop_reason="completed"),
        ]
        assert await store.append("s1", events[:1]) == 1
        assert await store.append("s1", events[1:]) == 4
        stored = await store.events("s1")
        assert [s.seq for s in stored] == [1, 2, 3, 4]
        assert [s.event for s in stored] == events

    async def test_events_after_a_seq(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.append("s1", [TurnStarted(turn=n) for n in range(1, 6)])
        assert [s.seq for s in await store.events("s1", after=3)] == [4, 5]

    async def test_events_up_to_a_limit(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.append("s1", [TurnStarted(turn=n) for n in range(1, 6)])
        assert [s.seq for s in await store.events("s1", limit=2)] == [1, 2]
        assert [s.seq for s in await store.events("s1", after=3, limit=1)] == [4]
        assert [s.seq for s in await store.events("s1", after=4, limit=10)] == [5]
        assert await store.events("s1", limit=0) == []

    async def test_logs_of_sessions_are_separate(self, store: SessionStore) -> None:
        await store.create(_header("a"))
        await store.create(_header("b"))
        await store.append("a", [TurnStarted(turn=1)])
        await store.append("b", [TurnStarted(turn=7), TurnStarted(turn=8)])
        assert [s.event for s in await store.events("a")] == [TurnStarted(turn=1)]
        assert [s.seq for s in await store.events("b")] == [1, 2]

    async def test_every_event_kind_round_trips(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        events = [
            ToolResult(tool_call_id="c1", name="read", content="boom", is_error=True),
            DescriptorEvent(kind="continuable", version=2, data={"mode": "spawn"}),
        ]
        await store.append("s1", events)
        assert [s.event for s in await store.events("s1")] == events

    async def test_depth_can_be_raised_never_lowered(self, store: SessionStore) -> None:
        await store.create(_header("s1", delegation_depth=1))
        assert (await store.raise_depth("s1", 2)).delegation_depth == 2
        with pytest.raises(StoreError) as info:
            await store.raise_depth("s1", 1)
        assert info.value.code is ErrorCode.DEPTH_LOWERED
        assert (await store.header("s1")).delegation_depth == 2

    @pytest.mark.parametrize("bad", [True, -1, 1.5])
    async def test_depth_must_be_a_non_negative_int(self, store: SessionStore, bad: Any) -> None:
        await store.create(_header("s1"))
        with pytest.raises(StoreError):
            await store.raise_depth("s1", bad)

    async def test_children_are_listed_by_parent(self, store: SessionStore) -> None:
        await store.create(_header("root", created_at=1.0))
        await store.create(_header("c1", created_at=2.0, parent_session="root", origin="subagent"))
        await store.create(_header("c2", created_at=3.0, parent_session="root", origin="subagent"))
        await store.create(_header("other", created_at=4.0))
        assert [h.id for h in await store.sessions(parent="root")] == ["c2", "c1"]
        assert [h.id for h in await store.sessions(limit=2)] == ["other", "c2"]

    async def test_delete_removes_a_session_and_its_log(self, store: SessionStore) -> None:
        await store.create(_header("gone"))
        await store.create(_header("kept"))
        await store.append("gone", [TurnStarted(turn=1)])
        await store.delete("gone")
        with pytest.raises(StoreError) as info:
            await store.events("gone")
        assert info.value.code is ErrorCode.SESSION_NOT_FOUND
        assert [h.id for h in await store.sessions()] == ["kept"]
        await store.create(_header("gone"))  # the id is free again, with an empty log
        assert await store.events("gone") == []
        with pytest.raises(StoreError):
            await store.delete("nope")

    async def test_says_whether_it_is_durable(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        assert isinstance(store.durable, bool)
        assert store.durable == (reopen is not None)

    async def test_facts_survive_a_reopen(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        if reopen is None:
            pytest.skip("this store is not durable (no reopen fixture)")
        await store.create(_header("s1", delegation_depth=2))
        await store.append("s1", [TurnStarted(turn=1)])
        await store.aclose()
        again = reopen()
        try:
            assert (await again.header("s1")).delegation_depth == 2
            assert await again.append("s1", [TurnStarted(turn=2)]) == 2
            assert [s.seq for s in await again.events("s1")] == [1, 2]
        finally:
            await again.aclose()
