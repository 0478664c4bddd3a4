"""A live agent whose session another store object (another process, in effect) closes: the
turn it runs ends and is stored; no message is accepted after the close."""

from __future__ import annotations

import time

import anyio
import pytest

from tether.agents import Agent, AgentLimits, ToolRegistry, new_header
from tether.errors import ErrorCode, StoreError
from tether.models import FunctionModel, ModelResponse
from tether.store import InboxAccepted, SQLiteStore, TurnEnded
from tether.testing import scaled

pytestmark = pytest.mark.anyio


async def test_a_closed_sessions_agent_finishes_its_turn_and_accepts_nothing_more(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    other = SQLiteStore(tmp_path / "s.db")  # another owner of the same file
    started, go_on = anyio.Event(), anyio.Event()

    async def model(request: object) -> ModelResponse:
        started.set()
        await go_on.wait()
        return ModelResponse(text="finished anyway")

    header = await store.create(new_header(agent="main"))
    agent = Agent(
        header=header,
        store=store,
        model=FunctionModel(model),
        tools=ToolRegistry([]),
        limits=AgentLimits(retry_backoff=0),
    )
    try:
        async with agent:
            await agent.followup("work")
            with anyio.fail_after(scaled(10)):
                await started.wait()
            assert await other.close_session(agent.session_id, at=time.time()) == (
                agent.session_id,
            )
            before = [s.event for s in await store.events(agent.session_id)]
            for send in (agent.followup, agent.steer, agent.inject):
                with pytest.raises(StoreError) as info:
                    await send("one more thing")
                assert info.value.code is ErrorCode.SESSION_CLOSED
            assert [s.event for s in await store.events(agent.session_id)] == before
            go_on.set()
            with anyio.fail_after(scaled(10)):
                await agent.when_idle()
        events = [s.event for s in await store.events(agent.session_id)]
        assert isinstance(events[-1], TurnEnded)
        assert events[-1].stop_reason == "completed"  # the turn it ran was kept whole
        accepted = [e for e in events if isinstance(e, InboxAccepted)]
        assert [e.content for e in accepted] == ["work"]
    finally:
        await other.aclose()
        await store.aclose()


async def test_running_a_closed_session_is_refused_before_the_model_is_called(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    calls: list[object] = []
    header = await store.create(new_header(agent="main"))
    await store.close_session(header.id, at=time.time())
    agent = Agent(
        header=await store.header(header.id),
        store=store,
        model=FunctionModel(lambda request: calls.append(request) or "never"),
        tools=ToolRegistry([]),
        limits=AgentLimits(retry_backoff=0),
    )
    try:
        async with agent:
            with pytest.raises(StoreError) as info:
                await agent.run("hello")
            assert info.value.code is ErrorCode.SESSION_CLOSED
        assert calls == []
        assert await store.events(header.id) == []
    finally:
        await store.aclose()
