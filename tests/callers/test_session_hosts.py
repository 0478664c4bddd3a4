"""A caller reaches a session another process runs (a session host, ``tether run`` on a
cluster profile): ``Runtime.follow(..., caller=)`` hands it to a host whose ``send`` takes one,
which asks the agent's gates and records it; a host written before callers is called as
before (docs/callers.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from tether.contracts import Caller
from tether.errors import CallerError, ErrorCode
from tether.runtime import Runtime
from tether.store import InboxAccepted, SQLiteStore
from tether.testing import RuntimeSessionHost, make_kernel, scaled, write_profile

pytestmark = pytest.mark.anyio

ALICE = Caller(id="os:alice", via="cli", claims={"team": "billing"})
MALLORY = Caller(id="os:mallory", via="cli")

PROFILE = """
[agent.main]
model = "function:tests.callers.brains:main"
callers = { claims = { team = "billing" } }
"""


async def _senders(store: SQLiteStore, session_id: str) -> list[Caller | None]:
    return [
        s.event.source.caller
        for s in await store.events(session_id)
        if isinstance(s.event, InboxAccepted)
    ]


async def test_a_followed_session_is_created_by_its_caller_and_refuses_another(tmp_path: Path):
    kernel = make_kernel(write_profile(tmp_path, PROFILE))
    here = SQLiteStore(tmp_path / "sessions.db")
    there = SQLiteStore(tmp_path / "sessions.db")
    try:
        async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
            host = RuntimeSessionHost(driver)
            with anyio.fail_after(scaled(20)):
                async with runtime.follow(host, agent="main", caller=ALICE) as followed:
                    assert await followed.run(["hello"]) == "completed"
                session_id = followed.session_id
                assert (await here.header(session_id)).caller == ALICE
                assert await _senders(here, session_id) == [ALICE]
                before = len(await here.events(session_id))
                async with runtime.follow(host, session_id, caller=MALLORY) as followed:
                    with pytest.raises(CallerError) as refused:
                        await followed.send("let me in")
                assert refused.value.code is ErrorCode.CALLER_REFUSED
                assert len(await here.events(session_id)) == before
                assert await here.mailbox(session_id) == []
                with pytest.raises(CallerError) as refused:
                    async with runtime.follow(host, agent="main", caller=MALLORY) as followed:
                        await followed.send("a session of my own")
                assert refused.value.code is ErrorCode.CALLER_REFUSED
                assert [h.id for h in await here.sessions()] == [session_id]
    finally:
        await here.aclose()
        await there.aclose()


class _BeforeCallers(RuntimeSessionHost):
    """A host written before callers: its ``send`` has no ``caller`` parameter."""

    async def send(  # pyright: ignore[reportIncompatibleMethodOverride]
        self,
        session_id: str,
        content: str,
        *,
        agent: str | None = None,
        new: bool = False,
        message_id: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        return await super().send(
            session_id, content, agent=agent, new=new, message_id=message_id, trace=trace
        )


async def test_a_host_without_callers_is_called_as_before(tmp_path: Path):
    kernel = make_kernel(write_profile(tmp_path, PROFILE.replace("callers =", "# callers =")))
    here = SQLiteStore(tmp_path / "sessions.db")
    there = SQLiteStore(tmp_path / "sessions.db")
    try:
        async with Runtime.open(kernel, there) as driver, Runtime.open(kernel, here) as runtime:
            with anyio.fail_after(scaled(20)):
                async with runtime.follow(
                    _BeforeCallers(driver), agent="main", caller=ALICE
                ) as followed:
                    assert await followed.run(["hello"]) == "completed"
            assert (await here.header(followed.session_id)).caller is None
            assert await _senders(here, followed.session_id) == [None]
    finally:
        await here.aclose()
        await there.aclose()
