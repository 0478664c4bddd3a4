"""The Temporal server restarts between two turns (same state file): the worker reconnects by
itself, the session's workflow and log carry on, and the second message runs once."""

from __future__ import annotations

import anyio
import pytest

import tether_temporal as temporal
from tether.store import AssistantMessage, TurnEnded, UserMessage

from .conftest import TIMEOUT, make_cluster, start_server, stop_server

pytestmark = pytest.mark.anyio


async def test_a_server_restart_between_turns_loses_nothing(tmp_path, postgres_url):
    folder = tmp_path / "server"
    folder.mkdir()
    server = start_server(folder)
    port = int(server.address.rsplit(":", 1)[1])
    cluster = make_cluster(tmp_path, server.address, postgres_url)
    cluster.script('[[steps]]\ntext = "one"\n\n[[steps]]\ntext = "two"\n')
    store = cluster.store()
    try:
        cluster.worker()
        session_id = temporal.new_session_id()
        client = await temporal.connect(cluster.settings())
        first = await temporal.send(client, cluster.settings(), session_id, "before")
        with anyio.fail_after(TIMEOUT):
            assert await temporal.wait_for_turn(store, session_id, first) == "completed"

        stop_server(server)
        server = start_server(folder, port)  # same port, same state file

        client = await temporal.connect(cluster.settings())
        with anyio.fail_after(TIMEOUT):
            second = await temporal.send(client, cluster.settings(), session_id, "after")
            assert await temporal.wait_for_turn(store, session_id, second) == "completed"
        log = [s.event for s in await store.events(session_id)]
        assert [e.content for e in log if isinstance(e, UserMessage)] == ["before", "after"]
        assert [e.content for e in log if isinstance(e, AssistantMessage)] == ["one", "two"]
        assert len([e for e in log if isinstance(e, TurnEnded)]) == 2
    finally:
        await store.aclose()
        cluster.stop()
        stop_server(server)
