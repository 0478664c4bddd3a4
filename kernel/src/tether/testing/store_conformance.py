"""The conformance suite for a ``SessionStore``: subclass it and provide a ``store`` fixture.

::

    from tether.testing.store_conformance import SessionStoreConformance

    class TestMyStore(SessionStoreConformance):
        @pytest.fixture
        async def store(self, tmp_path):
            store = MyStore(tmp_path / "db")
            yield store
            await store.aclose()

        # Optional: a fresh store on the same storage, to prove durability across a restart
        # and that two store objects on one storage keep each other's leases.
        @pytest.fixture
        def reopen(self, tmp_path):
            return lambda: MyStore(tmp_path / "db")

The tests run under anyio's pytest plugin (``pytest.mark.anyio``).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from ..contracts import Caller
from ..errors import ErrorCode, StoreError
from ..ground import implements
from ..models import ImagePart, Message, ToolCall, Usage
from ..store import (
    AssistantMessage,
    CompactionEvent,
    ContextMessage,
    DescriptorEvent,
    InboxAccepted,
    InboxDiscarded,
    InstructionEvent,
    LeaseOwner,
    MessageSource,
    SessionHeader,
    SessionLifecycle,
    SessionStore,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    dump_event,
)

__all__ = ("SessionLifecycleConformance", "SessionStoreConformance")


def _header(session_id: str, **fields: Any) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=fields.pop("created_at", time.time()), **fields)


def _message(n: int, content: str = "hello") -> InboxAccepted:
    return InboxAccepted(message_id=f"msg_{n}", content=content)


@asynccontextmanager
async def _second(reopen: Callable[[], SessionStore] | None) -> AsyncGenerator[SessionStore]:
    """Another store object on the same storage (another owner), closed afterwards."""
    if reopen is None:
        pytest.skip("this store has no second instance on one storage (no reopen fixture)")
    other = reopen()
    try:
        yield other
    finally:
        await other.aclose()


def _lifecycle(store: SessionStore) -> SessionLifecycle:
    if not implements(store, SessionLifecycle):
        pytest.skip("this store does not end sessions (no SessionLifecycle)")
    return store


async def _family(store: SessionStore) -> None:
    """root -> a -> a1, root -> d (detached) -> d1, and a stranger."""
    now = time.time()
    await store.create(_header("root", created_at=now))
    await store.create(_header("a", parent_session="root", origin="subagent", created_at=now + 1))
    await store.create(_header("a1", parent_session="a", origin="subagent", created_at=now + 2))
    await store.create(
        _header("d", parent_session="root", origin="subagent", detached=True, created_at=now + 3)
    )
    await store.create(_header("d1", parent_session="d", origin="subagent", created_at=now + 4))
    await store.create(_header("stranger", created_at=now + 5))


@pytest.mark.anyio
class SessionLifecycleConformance:
    """What a store keeps of a session's lifetime, and how it ends sessions
    (``SessionLifecycle``; skipped for a store without it). Part of
    :class:`SessionStoreConformance`."""

    @pytest.fixture
    def reopen(self) -> Callable[[], SessionStore] | None:
        """Override to return a factory for a second store on the same storage."""
        return None

    async def test_a_header_keeps_its_caller_detachment_and_closing_time(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        caller = Caller(
            id="os:alice",
            name="Alice",
            via="cli",
            claims={"team": "billing", "plan": {"tier": "enterprise", "seats": 3}},
        )
        header = _header("s1", caller=caller, detached=True, closed_at=1_700_000_000.5)
        await store.create(header)
        await store.create(_header("plain"))
        assert await store.header("s1") == header
        plain = await store.header("plain")
        assert (plain.caller, plain.detached, plain.closed_at) == (None, False, None)
        if reopen is None:
            return
        await store.aclose()
        again = reopen()
        try:
            assert await again.header("s1") == header
        finally:
            await again.aclose()

    async def test_closing_closes_the_lifetime_tree_but_not_detached_children(
        self, store: SessionStore
    ) -> None:
        lifecycle = _lifecycle(store)
        await _family(store)
        closed = await lifecycle.close_session("root", at=1000.0)
        assert closed[0] == "root"
        assert sorted(closed) == ["a", "a1", "root"]
        for sid in ("root", "a", "a1"):
            assert (await store.header(sid)).closed_at == 1000.0
        for sid in ("d", "d1", "stranger"):
            assert (await store.header(sid)).closed_at is None
        assert await lifecycle.close_session("root", at=2000.0) == ()  # idempotent
        assert (await store.header("a")).closed_at == 1000.0  # the first time is kept

    async def test_a_closed_session_takes_no_message_and_stays_readable(
        self, store: SessionStore
    ) -> None:
        lifecycle = _lifecycle(store)
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        await lifecycle.close_session("s1", at=time.time())
        with pytest.raises(StoreError) as info:
            await store.post("s1", _message(1))
        assert info.value.code is ErrorCode.SESSION_CLOSED
        assert await store.mailbox("s1") == []
        for batch in ([_message(2)], [TurnEnded(turn=1, stop_reason="completed"), _message(3)]):
            with pytest.raises(StoreError) as info:
                await store.append("s1", batch)
            assert info.value.code is ErrorCode.SESSION_CLOSED
        assert [s.seq for s in await store.events("s1")] == [1]  # nothing was written
        # Its holder may still end the turn it was running.
        assert await store.append("s1", [TurnEnded(turn=1, stop_reason="completed")]) == 2
        assert len(await store.events("s1")) == 2

    async def test_closing_drops_the_mail_nobody_took(self, store: SessionStore) -> None:
        lifecycle = _lifecycle(store)
        await store.create(_header("s1"))
        await store.post("s1", _message(1))
        await lifecycle.close_session("s1", at=time.time())
        assert await store.mailbox("s1") == []
        assert await store.mail() == []
        assert await store.take_mail("s1") == []

    async def test_deleting_closes_the_children_which_stay_readable(
        self, store: SessionStore
    ) -> None:
        lifecycle = _lifecycle(store)
        await _family(store)
        await store.append("a1", [TurnStarted(turn=1)])
        removal = await lifecycle.delete_session("root", at=1000.0)
        assert removal.deleted == ("root",)
        assert sorted(removal.closed) == ["a", "a1"]
        with pytest.raises(StoreError) as info:
            await store.header("root")
        assert info.value.code is ErrorCode.SESSION_NOT_FOUND
        assert (await store.header("a1")).closed_at == 1000.0
        assert [s.seq for s in await store.events("a1")] == [1]
        assert (await store.header("d")).closed_at is None  # detached: lives on
        assert (await store.header("a")).parent_session == "root"  # its lineage is kept

    async def test_deleting_a_tree_removes_every_session_below_it(
        self, store: SessionStore
    ) -> None:
        lifecycle = _lifecycle(store)
        await _family(store)
        await store.post("d1", _message(1))
        removal = await lifecycle.delete_session("root", at=1000.0, tree=True)
        assert removal.deleted[0] == "root"
        assert sorted(removal.deleted) == ["a", "a1", "d", "d1", "root"]
        assert removal.closed == ()
        assert [h.id for h in await store.sessions()] == ["stranger"]
        assert await store.mail() == []

    async def test_ending_an_unknown_session_is_not_found(self, store: SessionStore) -> None:
        lifecycle = _lifecycle(store)
        for call in (
            lifecycle.close_session("nope", at=1.0),
            lifecycle.delete_session("nope", at=1.0),
            lifecycle.delete_session("nope", at=1.0, tree=True),
        ):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_NOT_FOUND

    async def test_an_open_session_another_owner_holds_is_deleted_only_once_closed(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        _lifecycle(store)
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        await store.create(_header("c1", parent_session="s1", origin="subagent"))
        async with _second(reopen) as other:
            lifecycle = _lifecycle(other)
            for tree in (False, True):
                with pytest.raises(StoreError) as info:
                    await lifecycle.delete_session("s1", at=1.0, tree=tree)
                assert info.value.code is ErrorCode.SESSION_BUSY
                assert (await other.header("c1")).closed_at is None  # nothing changed
            assert await lifecycle.close_session("s1", at=1.0) == ("s1", "c1")
            removal = await lifecycle.delete_session("s1", at=2.0, tree=True)
            assert removal.deleted == ("s1", "c1")
        with pytest.raises(StoreError) as info:
            await store.append("s1", [TurnEnded(turn=1, stop_reason="completed")])
        assert info.value.code is ErrorCode.SESSION_NOT_FOUND


@pytest.mark.anyio
class SessionStoreConformance(SessionLifecycleConformance):
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

    async def test_concurrent_appends_to_one_session_keep_their_call_order(
        self, store: SessionStore
    ) -> None:
        # Parallel tool calls append their results at once: each gets the next seq in the
        # order the appends were called, none is refused, none is lost.
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        results: dict[int, int] = {}

        async def append(n: int) -> None:
            results[n] = await store.append(
                "s1", [ToolResult(tool_call_id=f"c{n}", name="t", content=str(n))]
            )

        async with anyio.create_task_group() as group:
            for n in range(8):
                group.start_soon(append, n)
        assert results == {n: n + 2 for n in range(8)}
        stored = [s.event for s in (await store.events("s1"))[1:]]
        assert [e.content for e in stored if isinstance(e, ToolResult)] == [
            str(n) for n in range(8)
        ]

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
        call = ToolCall(id="c1", name="read", arguments={"path": "a.txt", "lines": [1, 2]})
        usage = Usage(input_tokens=10, output_tokens=3, cached_input_tokens=4)
        events = [
            TurnStarted(turn=1, message_id="msg_1"),
            InstructionEvent(slug="clock", role="user", content="It is noon."),
            UserMessage(
                message_id="msg_1",
                content="read a.txt",
                source=MessageSource(kind="subagent", sender="ses_parent"),
            ),
            AssistantMessage(
                content="reading", tool_calls=(call,), usage=usage, finish_reason="tool_calls"
            ),
            ToolResult(tool_call_id="c1", name="read", content="boom", is_error=True),
            ToolResult(
                tool_call_id="c2",
                name="look",
                content="an image",
                images=(ImagePart(mime_type="image/png", data="iVBORw0KGgo="),),
            ),
            AssistantMessage(content="half an ans", partial=True),
            InboxAccepted(
                message_id="msg_2",
                content="and then",
                source=MessageSource(kind="steer"),
                delivery="step",
                trace={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
            ),
            InboxDiscarded(message_id="msg_2"),
            ContextMessage(role="system", content="a catalog", origin="skills"),
            DescriptorEvent(kind="continuable", version=2, data={"mode": "spawn", "n": [1]}),
            CompactionEvent(
                summary="they read a file",
                kept=(Message(role="user", content="read a.txt"),),
                replaced=4,
                earlier_answers=1,
                tokens_before=900,
                tokens_after=120,
                trigger="manual",
                usage=usage,
            ),
            TurnEnded(turn=1, stop_reason="completed", usage=usage, steps=2, error=None),
        ]
        await store.append("s1", events)
        read = [s.event for s in await store.events("s1")]
        assert read == events
        # The same kinds and the same stored shape, not only equal values.
        assert [type(e) for e in read] == [type(e) for e in events]
        assert [dump_event(e) for e in read] == [dump_event(e) for e in events]

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

    # -- the session's model ----------------------------------------------------------------

    async def test_a_header_records_its_model_or_none(self, store: SessionStore) -> None:
        await store.create(_header("s1", model="openai:gpt-4.1"))
        await store.create(_header("s2"))
        assert (await store.header("s1")).model == "openai:gpt-4.1"
        assert (await store.header("s2")).model is None  # a session from before models

    async def test_set_model_changes_the_header_and_logs_it_in_one_step(
        self, store: SessionStore
    ) -> None:
        await store.create(_header("s1", model="a:one"), [TurnStarted(turn=1)])
        change = DescriptorEvent(kind="model", data={"old": "a:one", "new": "b:two"})
        header = await store.set_model("s1", "b:two", [change])
        assert header.model == "b:two"
        assert await store.header("s1") == header
        assert [(s.seq, s.event) for s in await store.events("s1")][-1] == (2, change)
        assert await store.append("s1", [TurnStarted(turn=2)]) == 3

    async def test_set_model_on_an_unknown_session_is_not_found(self, store: SessionStore) -> None:
        with pytest.raises(StoreError) as info:
            await store.set_model("nope", "a:one")
        assert info.value.code is ErrorCode.SESSION_NOT_FOUND

    async def test_the_model_survives_a_reopen(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        if reopen is None:
            pytest.skip("this store is not durable (no reopen fixture)")
        await store.create(_header("s1", model="a:one"))
        await store.set_model("s1", "b:two")
        await store.aclose()
        again = reopen()
        try:
            assert (await again.header("s1")).model == "b:two"
        finally:
            await again.aclose()

    async def test_another_store_cannot_change_a_held_sessions_model(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        await store.create(_header("s1", model="a:one"), [TurnStarted(turn=1)])
        async with _second(reopen) as other:
            change = DescriptorEvent(kind="model", data={"old": "a:one", "new": "b:two"})
            with pytest.raises(StoreError) as info:
                await other.set_model("s1", "b:two", [change])
            assert info.value.code is ErrorCode.SESSION_BUSY
            assert (await other.header("s1")).model == "a:one"  # nothing changed
            assert [s.seq for s in await store.events("s1")] == [1]

    # -- leases: one session, one driver ----------------------------------------------------

    async def test_the_creator_holds_the_new_session(self, store: SessionStore) -> None:
        assert isinstance(store.owner, LeaseOwner)
        assert store.owner.pid == os.getpid()
        await store.create(_header("s1"))
        assert await store.holder("s1") == store.owner

    async def test_acquiring_a_free_or_own_lease_returns_false(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        assert await store.acquire("s1") is False  # already ours
        await store.release("s1")
        assert await store.holder("s1") is None
        assert await store.acquire("s1") is False  # free
        assert await store.holder("s1") == store.owner

    async def test_lease_calls_on_an_unknown_session_are_not_found(
        self, store: SessionStore
    ) -> None:
        for call in (store.acquire("nope"), store.holder("nope"), store.take_mail("nope")):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_NOT_FOUND

    async def test_release_is_idempotent(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.release("s1")
        await store.release("s1")
        await store.release("nope")
        assert await store.holder("s1") is None

    async def test_append_takes_a_free_lease(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.release("s1")
        assert await store.append("s1", [TurnStarted(turn=1)]) == 1
        assert await store.holder("s1") == store.owner

    async def test_renew_keeps_the_leases(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.renew()
        assert await store.holder("s1") == store.owner

    async def test_another_store_cannot_write_a_held_session(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        async with _second(reopen) as other:
            assert other.owner.token != store.owner.token
            for call in (
                other.append("s1", [TurnStarted(turn=2)]),
                other.append("s1", [TurnStarted(turn=2), TurnStarted(turn=3)]),
                other.acquire("s1"),
            ):
                with pytest.raises(StoreError) as info:
                    await call
                assert info.value.code is ErrorCode.SESSION_BUSY
                assert f"pid {os.getpid()}" in str(info.value)  # names the owner
            assert [s.seq for s in await store.events("s1")] == [1]  # nothing was written
            assert await other.holder("s1") == store.owner

    async def test_release_never_drops_another_owners_lease(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        await store.create(_header("s1"))
        async with _second(reopen) as other:
            await other.release("s1")
            assert await other.holder("s1") == store.owner
            await store.release("s1")
            assert await other.acquire("s1") is False  # free now: taken, not taken over
            assert await other.append("s1", [TurnStarted(turn=1)]) == 1
            assert await store.holder("s1") == other.owner

    async def test_a_released_session_continues_where_another_store_left_it(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        await store.release("s1")
        async with _second(reopen) as other:
            assert await other.append("s1", [TurnStarted(turn=2)]) == 2
            await other.release("s1")
        assert await store.append("s1", [TurnStarted(turn=3)]) == 3

    async def test_closing_a_store_releases_its_leases(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        await store.create(_header("s1"))
        await store.aclose()
        await store.aclose()  # idempotent
        async with _second(reopen) as other:
            assert await other.holder("s1") is None
            assert await other.acquire("s1") is False

    # -- the mailbox ------------------------------------------------------------------------

    async def test_posted_messages_wait_in_the_mailbox(self, store: SessionStore) -> None:
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        await store.create(_header("quiet"))
        assert await store.mail() == []
        await store.post("s1", _message(1))
        await store.post("s1", _message(2))
        assert await store.mail() == ["s1"]
        assert await store.mailbox("s1") == [_message(1), _message(2)]
        assert await store.mailbox("quiet") == []
        assert [s.seq for s in await store.events("s1")] == [1]  # not in the log yet

    async def test_take_mail_moves_messages_into_the_log_once_in_order(
        self, store: SessionStore
    ) -> None:
        await store.create(_header("s1"), [TurnStarted(turn=1)])
        messages = [_message(n) for n in range(1, 4)]
        for message in messages:
            await store.post("s1", message)
        assert await store.take_mail("s1") == messages
        stored = await store.events("s1")
        assert [(s.seq, s.event) for s in stored[1:]] == list(zip([2, 3, 4], messages, strict=True))
        assert await store.mailbox("s1") == []
        assert await store.mail() == []
        assert await store.take_mail("s1") == []  # never twice
        assert await store.append("s1", [TurnStarted(turn=2)]) == 5

    async def test_posting_needs_no_lease(
        self, store: SessionStore, reopen: Callable[[], SessionStore] | None
    ) -> None:
        await store.create(_header("s1"))
        async with _second(reopen) as other:
            await other.post("s1", _message(1))
            assert await other.mail() == ["s1"]
            with pytest.raises(StoreError) as info:
                await other.take_mail("s1")  # taking it does need the lease
            assert info.value.code is ErrorCode.SESSION_BUSY
            assert await other.mailbox("s1") == [_message(1)]  # nothing was taken
        assert await store.mail() == ["s1"]
        assert await store.take_mail("s1") == [_message(1)]

    async def test_take_mail_takes_a_free_lease(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.release("s1")
        await store.post("s1", _message(1))
        assert await store.take_mail("s1") == [_message(1)]
        assert await store.holder("s1") == store.owner

    async def test_posting_to_an_unknown_session_is_not_found(self, store: SessionStore) -> None:
        for call in (store.post("nope", _message(1)), store.mailbox("nope")):
            with pytest.raises(StoreError) as info:
                await call
            assert info.value.code is ErrorCode.SESSION_NOT_FOUND

    async def test_delete_removes_the_lease_and_the_mail(self, store: SessionStore) -> None:
        await store.create(_header("s1"))
        await store.post("s1", _message(1))
        await store.delete("s1")
        assert await store.mail() == []
        await store.create(_header("s1"))  # the id again: no old mail, a fresh lease
        assert await store.mailbox("s1") == []
        assert await store.holder("s1") == store.owner

    async def test_text_that_cannot_be_encoded_is_stored_anyway(self, store: SessionStore) -> None:
        # A lone surrogate (half an emoji) has no UTF-8 form: a durable store keeps U+FFFD in
        # its place; a store of objects may keep the text as it was.
        cut, replaced = "half an emoji: \ud83d.", "half an emoji: \ufffd."
        kept = {replaced} if store.durable else {cut, replaced}
        await store.create(_header("s1", label=cut))
        await store.append("s1", [UserMessage(message_id="m1", content=cut)])
        await store.post("s1", InboxAccepted(message_id="m2", content=cut))
        assert (await store.mailbox("s1"))[0].content in kept
        (taken,) = await store.take_mail("s1")
        assert taken.content in kept
        first, second = (s.event for s in await store.events("s1"))
        assert isinstance(first, UserMessage)
        assert isinstance(second, InboxAccepted)
        assert {first.content, second.content} <= kept
        assert (await store.header("s1")).label in kept
