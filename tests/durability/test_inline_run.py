"""SIGKILL a process while ``agent.run()`` runs a turn inline on an idle agent.

``run()`` acknowledges nothing before its turn ends, so the message's acceptance is stored with
the turn's first answer (docs/turn-loop.md). Killed before that commit, the call is lost whole,
as if the process had died before making it: the log holds nothing of it, and the session goes
on cleanly in the next process.
"""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from tether.agents import Agent
from tether.models import FunctionModel
from tether.store import Event, InboxAccepted, SQLiteStore, TurnEnded, UserMessage
from tether.testing import log_problems

from .conftest import kill, wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

SCRIPT = """
import sys
from pathlib import Path

import anyio

from tether.agents import Agent, new_header
from tether.models import FunctionModel
from tether.store import SQLiteStore


async def main(db: str, marker: str) -> None:
    store = SQLiteStore(Path(db))
    header = await store.create(new_header(session_id="ses_inline"))

    async def answer(request):
        if len(request.messages) == 1:
            return "one"
        Path(marker).touch()  # the second turn's request: the process is killed in it
        await anyio.sleep(60)
        return "never"

    agent = Agent(header=header, store=store, model=FunctionModel(answer), new_session=True)
    async with agent:
        await agent.run("answered")
        await agent.run("lost with the process")


anyio.run(main, *sys.argv[1:])
"""


def test_killed_during_an_inline_run_the_call_is_lost_whole_and_the_session_goes_on(tmp_path):
    db, marker = tmp_path / "s.db", tmp_path / "asked"
    with (tmp_path / "output").open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(db), str(marker)],
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for(marker.exists, "the second turn's model request")
        finally:
            kill(process)

    async def resume() -> list[Event]:
        store = SQLiteStore(db)
        try:
            header = await store.header("ses_inline")
            agent = Agent(header=header, store=store, model=FunctionModel(lambda r: "two"))
            async with agent:  # the dead process's lease is taken over
                assert await agent.run("next") == "completed"
            return [stored.event for stored in await store.events("ses_inline")]
        finally:
            await store.aclose()

    log = anyio.run(resume)
    contents = [e.content for e in log if isinstance(e, InboxAccepted | UserMessage)]
    assert "lost with the process" not in contents
    assert [e.content for e in log if isinstance(e, UserMessage)] == ["answered", "next"]
    assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == ["completed", "completed"]
    assert log_problems(log) == []
