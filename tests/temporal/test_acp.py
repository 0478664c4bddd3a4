"""``tether acp`` fronting a cluster: an ACP client (the SDK's) prompts a ``tether acp`` process
whose profile loads tether-temporal; a worker process runs each turn, and the server streams it
from the shared store (its answers' pieces relayed by PostgreSQL as they come). A cancel
interrupts the turn on the worker; ``session/load`` from a new connection replays the session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import acp
import anyio
import pytest

from tests.acp.test_server import Recorder
from tether.store import TurnEnded

from .conftest import TIMEOUT, Cluster, wait_for

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"

SCRIPT = """\
[[steps]]
tool_calls = [{ name = "quick", arguments = { text = "a" } }]

[[steps]]
text = "first done"
chunks = 3
chunk_delay = 0.3

[[steps]]
tool_calls = [{ name = "wait", arguments = { text = "acp" } }]

[[steps]]
text = "after the cancel"
"""


@asynccontextmanager
async def served(cluster: Cluster) -> AsyncIterator[tuple[acp.ClientSideConnection, Recorder]]:
    client = Recorder()
    with (cluster.folder / "acp-stderr.log").open("ab") as stderr:
        async with acp.spawn_agent_process(
            cast(acp.Client, client),
            str(TETHER),
            "acp",
            "--profile",
            str(cluster.profile),
            env=cluster.env() | {"PATH": os.environ.get("PATH", "")},
            cwd=cluster.folder,
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 15.0},
        ) as (conn, _):
            yield conn, client


def text(part: str) -> list[Any]:
    return [acp.text_block(part)]


async def test_acp_fronts_a_cluster_streams_turns_cancels_and_loads(cluster):
    cluster.script(SCRIPT)
    worker = cluster.worker()
    with anyio.fail_after(TIMEOUT * 2):
        async with served(cluster) as (conn, client):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(cluster.folder), mcp_servers=[])).session_id
            reply = await conn.prompt(session_id=sid, prompt=text("hello"))
            assert reply.stop_reason == "end_turn"
            seen = client.seen(sid)
            assert ("tool_call", seen[0][1], "quick", "pending") == seen[0]
            assert seen[1] == ("tool_call_update", seen[0][1], "in_progress", "")
            assert seen[2] == ("tool_call_update", seen[0][1], "completed", "quick:a")
            # The answer streamed from the worker in pieces (relayed through PostgreSQL).
            chunks = seen[3:]
            assert {row[0] for row in chunks} == {"agent_message_chunk"}
            assert "".join(row[1] for row in chunks) == "first done"
            assert len(chunks) > 1
            assert cluster.runs("a.quick") == [worker.pid]  # the worker ran it

            replies: list[Any] = []

            async def prompt() -> None:
                replies.append(await conn.prompt(session_id=sid, prompt=text("wait for it")))

            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await anyio.to_thread.run_sync(
                    lambda: wait_for(lambda: cluster.runs("acp.wait"), "the worker's tool call")
                )
                await conn.cancel(session_id=sid)
            assert replies[0].stop_reason == "cancelled"

        store = cluster.store()
        try:
            log = [s.event for s in await store.events(sid)]
        finally:
            await store.aclose()
        assert [e.stop_reason for e in log if isinstance(e, TurnEnded)] == [
            "completed",
            "aborted",
        ]

        async with served(cluster) as (conn, client):
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(cluster.folder), session_id=sid, mcp_servers=[])
            replayed = client.seen(sid)
            assert ("user_message_chunk", "hello") in replayed
            assert ("agent_message_chunk", "first done") in replayed
            reply = await conn.prompt(session_id=sid, prompt=text("go on"))
            assert reply.stop_reason == "end_turn"
            assert client.seen(sid)[-1] == ("agent_message_chunk", "after the cancel")
