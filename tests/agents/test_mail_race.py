"""Mail another process posted, taken while the agent that takes it is being left."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tether.agents import Agent, AgentLimits, ToolRegistry, new_header
from tether.models import FunctionModel, ModelResponse
from tether.store import InboxAccepted, MessageSource, SessionStore, SQLiteStore
from tether.store.replay import fold

pytestmark = pytest.mark.anyio


class _HeldTake(SQLiteStore):
    """A real SQLite store whose ``take_mail`` holds its answer until the test lets it go:
    the agent is left while the mail it took is on its way to it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.taken = anyio.Event()
        self.go = anyio.Event()

    async def take_mail(self, session_id: str) -> list[InboxAccepted]:
        posted = await super().take_mail(session_id)
        if posted:
            self.taken.set()
            await self.go.wait()
        return posted


def _agent(store: SessionStore, header: object, replies: list[str]) -> Agent:
    answers = iter(replies)
    return Agent(
        header=header,  # type: ignore[arg-type]
        store=store,
        model=FunctionModel(lambda request: ModelResponse(text=next(answers))),
        tools=ToolRegistry(()),
        limits=AgentLimits(retry_backoff=0),
    )


async def test_mail_taken_while_the_agent_is_left_waits_in_the_log_for_the_next_driver(
    tmp_path: Path,
):
    store = _HeldTake(tmp_path / "s.db")
    try:
        header = await store.create(new_header(agent="main"))
        agent = _agent(store, header, [])
        message = InboxAccepted(
            message_id="msg_1", content="hello", source=MessageSource(kind="user")
        )
        collected: list[int] = []
        async with anyio.create_task_group() as group:
            async with agent:
                await store.post(header.id, message)

                async def collect() -> None:
                    collected.append(await agent.lease.collect_mail())

                group.start_soon(collect)
                await store.taken.wait()
            # The agent is left; the mail it took reaches it now.
            store.go.set()
        assert collected == [1]  # no "use the agent inside `async with agent:`" error
        state = fold([stored.event for stored in await store.events(header.id)])
        assert state.waiting  # accepted, nobody ran it: the next driver does

        again = _agent(store, await store.header(header.id), ["hi there"])
        async with again:
            again.loop.resume()
            await again.when_idle()
        assert again.loop.last_stop_reason == "completed"
        assert [m.content for m in again.messages if m.role == "assistant"] == ["hi there"]
    finally:
        await store.aclose()


class _HeldSteer(SQLiteStore):
    """A real SQLite store that holds the append of a steer's acceptance until the test lets
    it go: the turn the steer was meant for ends while the steer is being stored."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.storing = anyio.Event()
        self.go = anyio.Event()

    async def append(self, session_id: str, events, **kwargs):  # type: ignore[no-untyped-def]
        if any(isinstance(e, InboxAccepted) and e.delivery == "step" for e in events):
            self.storing.set()
            await self.go.wait()
        return await super().append(session_id, events, **kwargs)


async def test_a_steer_stored_while_its_turn_ends_runs_as_the_next_turn(tmp_path: Path):
    store = _HeldSteer(tmp_path / "s.db")
    try:
        header = await store.create(new_header(agent="main"))
        step = anyio.Event()
        seen: list[str] = []

        async def answer(request):  # type: ignore[no-untyped-def]
            seen.append(request.messages[-1].content)
            if len(seen) == 1:
                step.set()
                await store.storing.wait()  # answers once the steer is on its way
            return ModelResponse(text="ok")

        agent = Agent(
            header=header,
            store=store,
            model=FunctionModel(answer),
            tools=ToolRegistry(()),
            limits=AgentLimits(retry_backoff=0),
        )
        async with agent, anyio.create_task_group() as group:
            await agent.followup("first")
            await step.wait()
            assert agent.loop.in_turn
            group.start_soon(agent.steer, "and this")
            await store.storing.wait()  # the steer is on its way into the log
            with anyio.fail_after(10):
                while agent.loop.in_turn:  # the turn's steps are over; its end waits to be
                    await anyio.sleep(0.01)  # stored behind the steer
            store.go.set()
            with anyio.fail_after(10):
                while len(seen) < 2 or agent.status != "idle":
                    await anyio.sleep(0.01)
        # Not stranded among the steers of a turn that is over: a turn of its own.
        assert seen == ["first", "and this"]
        assert agent.turns == 2
    finally:
        await store.aclose()
