"""A parent's guardrails inside a remote child over A2A: the child is ``tether a2a serve`` of
another profile (a real process) with ``guardrails = "forward"``; it applies the forwarded
guardrail to the context's session, and that session's children (local spawn children, two
levels) are checked by it too. A served profile that does not offer the guardrail refuses the
message: the delegation fails, nothing runs unchecked."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import tether_a2a
from tether.models import FunctionModel, ModelRequest, ModelResponse
from tether.runtime import compose_agent
from tether.store import GuardEvent, SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import make_runtime, scaled, write_profile

from ..a2a.test_serve import Server, free_port

pytestmark = pytest.mark.anyio

ROUTES = Path(__file__).parent / "routes"
TIMEOUT = scaled(60.0)


def with_recorder(folder: Path) -> Path:
    """``folder`` (a profile's), with the recorder guardrail as a local plugin in ``plugins``."""
    (folder / "plugins").mkdir(parents=True)
    shutil.copy(ROUTES / "recorder.py", folder / "plugins" / "recorder.py")
    return folder


def served_profile(tmp_path: Path, *, offers: bool = True) -> Path:
    """A tether that delegates to spawn children three levels deep, offering (not turning on)
    the recorder guardrail; served by ``tether a2a serve``."""
    folder = with_recorder(tmp_path / "child")
    shutil.copy(ROUTES / "levels.py", folder / "levels.py")
    plugins = '["spawn", "subagent", "recorder"]' if offers else '["spawn", "subagent"]'
    return write_profile(
        folder,
        f"""
[tether]
store = "sqlite:served.db"
plugins = {plugins}
plugin_dirs = ["plugins"]
[plugin.subagent]
max_depth = 5
[agent.main]
description = "Goes three levels deep."
model = "function:levels:answer"
""",
    )


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv("GUARD_RECORD", str(path))
    return path


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


def quiet(request: ModelRequest) -> ModelResponse | str:
    return "noted"


async def delegate(runtime: Any, db: Path) -> Any:
    store = SQLiteStore(db)
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("level 1", parent)
                )
                result = await run.result()
                await run.dispose()
    finally:
        await store.aclose()
    return result


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


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
