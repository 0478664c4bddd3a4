"""A parent's guardrails inside a remote child over A2A: the child is ``tether a2a serve`` of
another profile (a real process) with ``guardrails = "forward"``; it applies the forwarded
guardrail to the context's session, and that session's children (local spawn children, two
levels) are checked by it too. A served profile that does not offer the guardrail refuses the
message: the delegation fails, nothing runs unchecked."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tether_a2a
from tether.store import GuardEvent, SQLiteStore
from tether.testing import make_runtime, write_profile

from ..a2a.test_serve import Server, free_port
from .remote import child_profile as child_profile_on
from .remote import delegate, records, with_recorder

pytestmark = pytest.mark.anyio


def served_profile(tmp_path: Path, *, offers: bool = True) -> Path:
    """The child tether, served by ``tether a2a serve``."""
    extra = 'description = "Goes three levels deep."'
    return child_profile_on(tmp_path, store="sqlite:served.db", extra=extra, offers=offers)


@pytest.fixture
def serve(tmp_path: Path, record: Path) -> Iterator[Any]:
    started: list[Server] = []

    def start(*, offers: bool = True) -> Server:
        server = Server(
            served_profile(tmp_path, offers=offers), free_port(), {"GUARD_RECORD": str(record)}
        )
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def parent_runtime(tmp_path: Path, url: str):
    profile = write_profile(
        with_recorder(tmp_path / "parent"),
        f"""
[tether]
plugins = ["a2a", "recorder"]
plugin_dirs = ["plugins"]
guardrails = ["recorder"]
[[plugin.a2a.agents]]
name = "tether-child"
url = {json.dumps(url)}
guardrails = "forward"
[agent.main]
""",
    )
    return make_runtime(profile, {"a2a": tether_a2a})


async def test_a_forwarded_guardrail_checks_a_served_tether_three_levels_down(
    tmp_path, record, serve
):
    server = serve()
    result = await delegate(parent_runtime(tmp_path, server.url), tmp_path / "parent.db")
    assert result.stop_reason == "completed", result.diagnostic
    assert "SECRET-42" not in result.output
    assert "[masked]" in result.output
    remote = [r for r in records(record) if r["pid"] != os.getpid()]
    # The served context's session (depth 0 there), its spawn child and its grandchild.
    assert sorted({r["depth"] for r in remote}) == [0, 1, 2]
    assert [r["content"] for r in remote if r["depth"] == 2 and r["kind"] == "output"] == [
        "found SECRET-42"
    ]
    store = SQLiteStore(tmp_path / "child" / "served.db")
    try:
        (root,) = [h for h in await store.sessions() if h.parent_session is None]
        setup = [s.event for s in await store.events(root.id, limit=3)]
        recorded = [e for e in setup if e.type == "descriptor" and e.kind == "guardrails"]
        assert [e.data for e in recorded] == [{"guardrails": ["recorder"]}]
        (son,) = await store.sessions(parent=root.id)
        (grandson,) = await store.sessions(parent=son.id)
        deep = [s.event for s in await store.events(grandson.id)]
        (replaced,) = [e for e in deep if isinstance(e, GuardEvent)]
        assert (replaced.guardrail, replaced.action) == ("recorder", "replace")
        assert [e.content for e in deep if e.type == "assistant/message"] == ["found [masked]"]
    finally:
        await store.aclose()


async def test_a_served_tether_that_does_not_offer_the_guardrail_refuses_the_message(
    tmp_path, record, serve
):
    server = serve(offers=False)
    result = await delegate(parent_runtime(tmp_path, server.url), tmp_path / "parent.db")
    assert result.stop_reason == "error"
    assert 'names guardrail "recorder", which no loaded plugin offers' in result.diagnostic
    assert [r for r in records(record) if r["pid"] != os.getpid()] == []
    db = tmp_path / "child" / "served.db"
    if db.exists():
        store = SQLiteStore(db)
        try:
            assert await store.sessions() == []
        finally:
            await store.aclose()
