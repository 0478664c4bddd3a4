"""On PostgreSQL only: what a killed ``tether`` leaves in the database, and who clears it; and
what only a store that awaits its writes exposes.

The promises both stores keep run on PostgreSQL too, through ``@on_both_stores`` in
test_two_processes.py and test_crash_matrix.py. This file checks what only the database shows:
every process of the project works in it (no SQLite file appears); a killed run's lease is still
unexpired on the server's clock when the next run starts (a store on another host would wait for
it), yet the next run on the same host takes it over, the killed pid being dead; and once every
process has ended, no lease and no mail are left. A SQLite store's append never awaits; a
PostgreSQL append does, so what an agent does while one is in flight is checked here too.
"""

from __future__ import annotations

import sys

import anyio
import psycopg
import pytest
from anyio.abc import TaskGroup

from tether.agents import Agent, new_header
from tether.models import FunctionModel, ModelRequest
from tether.store import TurnEnded, UserMessage
from tether.testing import log_problems

from .conftest import kill, postgres_store, printed, wait_for


def leases(url: str) -> list[tuple[str, int, bool]]:
    """Every lease row: session, pid, and whether it is unexpired on the server's clock."""
    with psycopg.connect(url, autocommit=True) as db:
        rows = db.execute(
            "SELECT session_id, pid, expires_at > extract(epoch from clock_timestamp()) "
            "FROM tether_leases ORDER BY session_id"
        ).fetchall()
    return [(str(session), int(pid), bool(unexpired)) for session, pid, unexpired in rows]


def mail(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM tether_mailbox").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_a_killed_runs_unexpired_lease_is_taken_over_on_its_host_and_nothing_is_left(
    make_project, postgres_url
):
    project = make_project()
    project.script('[[steps]]\ndelay = 60\ntext = "never"\n')
    process = project.start("run", "first", "second")
    wait_for(lambda: printed(process, "> first"), "the first turn to start its request")
    (root,) = project.roots()
    kill(process)
    # The lease names the dead process and, by the server's clock, has not run out.
    assert leases(postgres_url) == [(root, process.pid, True)]

    project.script('[[steps]]\ntext = "one"\n\n[[steps]]\ntext = "two"\n\n' * 2, "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "third")

    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert [e.content for e in events if isinstance(e, UserMessage)] == ["first", "second", "third"]
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["completed"] * 3
    assert project.problems(root) == {}
    assert leases(postgres_url) == []  # taken over, then given back at the end
    assert mail(postgres_url) == 0
    # No SQLite store on the side (.tether/workspaces/ holds the sessions' workspaces).
    assert not (project.folder / ".tether" / "sessions.db").exists()


@pytest.mark.anyio
async def test_a_message_accepted_while_a_turns_commit_is_in_flight_is_stored_once(postgres_url):
    # A message arrives (a child's notice, `tether sessions send`) just as the model answers:
    # its acceptance is written while the commit of the turn's claim and answer is in flight.
    store = postgres_store(postgres_url)
    try:
        header = await store.create(new_header())
        sent: list[str] = []
        groups: list[TaskGroup] = []

        def answer(request: ModelRequest) -> str:
            if not sent:
                sent.append("arrives meanwhile")
                groups[0].start_soon(agent.followup, sent[0])
            return "answer"

        agent = Agent(header=header, store=store, model=FunctionModel(answer), new_session=True)
        async with agent:
            async with anyio.create_task_group() as group:
                groups.append(group)
                assert await agent.run("first") == "completed"
            await agent.when_idle()  # the message's own turn
        events = [stored.event for stored in await store.events(header.id)]
    finally:
        await store.aclose()
    assert [e.content for e in events if isinstance(e, UserMessage)] == ["first", sent[0]]
    assert log_problems(events) == []
