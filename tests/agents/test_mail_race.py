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
