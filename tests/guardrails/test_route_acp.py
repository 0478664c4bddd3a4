"""A parent's guardrails inside a remote child over ACP: the child is ``tether acp`` of another
profile (a real process) with ``guardrails = "forward"``; it applies the forwarded guardrail to
the session it opens, and that session's children (local spawn children, two levels) are
checked by it too. A child profile that does not offer the guardrail refuses the session:
the delegation fails, nothing runs unchecked."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import tether_acp
from tether.store import GuardEvent, SQLiteStore
from tether.testing import make_runtime, write_profile

from .remote import child_profile as child_profile_on
from .remote import delegate, records, with_recorder

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"


def child_profile(tmp_path: Path, *, offers: bool = True) -> Path:
    """The child tether, served by ``tether acp``."""
    return child_profile_on(tmp_path, store="sqlite:.tether/sessions.db", offers=offers)


def parent_runtime(tmp_path: Path, child: Path, setting: str = 'guardrails = "forward"'):
    profile = write_profile(
        with_recorder(tmp_path / "parent"),
        f"""
[tether]
plugins = ["acp", "recorder"]
plugin_dirs = ["plugins"]
guardrails = ["recorder"]
[[plugin.acp.agents]]
name = "tether-child"
command = {json.dumps(str(TETHER))}
args = ["acp", "--profile", {json.dumps(str(child))}]
env = {{ TETHER_DISABLE_PLUGIN_AUTOLOAD = "0" }}
{setting}
[agent.main]
""",
    )
    return make_runtime(profile, {"acp": tether_acp})


async def test_a_forwarded_guardrail_checks_a_tether_child_three_levels_down(tmp_path, record):
    child = child_profile(tmp_path)
    runtime = parent_runtime(tmp_path, child)
    result = await delegate(runtime, tmp_path / "parent.db")
    assert result.stop_reason == "completed", result.diagnostic
    assert "SECRET-42" not in result.output
    assert "[masked]" in result.output
    seen = records(record)
    remote = [r for r in seen if r["pid"] != os.getpid()]
    # The remote tether's root session (depth 0 there), its spawn child and its grandchild.
    assert sorted({r["depth"] for r in remote}) == [0, 1, 2]
    assert {r["kind"] for r in remote if r["depth"] == 2} == {"input", "output"}
    assert [r["content"] for r in remote if r["depth"] == 2 and r["kind"] == "output"] == [
        "found SECRET-42"
    ]
    store = SQLiteStore(child.parent / ".tether" / "sessions.db")
    try:
        (root,) = [h for h in await store.sessions() if h.parent_session is None]
        setup = [s.event for s in await store.events(root.id, limit=3)]
        recorded = [e for e in setup if e.type == "descriptor" and e.kind == "guardrails"]
        assert [e.data for e in recorded] == [{"guardrails": ["recorder"]}]
        (son,) = await store.sessions(parent=root.id)
        (grandson,) = await store.sessions(parent=son.id)
        deep = [s.event for s in await store.events(grandson.id)]
        (replaced,) = [e for e in deep if isinstance(e, GuardEvent)]
        assert (replaced.guardrail, replaced.kind, replaced.action) == (
            "recorder",
            "output",
            "replace",
        )
        assert [e.content for e in deep if e.type == "assistant/message"] == ["found [masked]"]
    finally:
        await store.aclose()


async def test_a_child_tether_that_does_not_offer_the_guardrail_refuses_the_delegation(
    tmp_path, record
):
    child = child_profile(tmp_path, offers=False)
    runtime = parent_runtime(tmp_path, child)
    result = await delegate(runtime, tmp_path / "parent.db")
    assert result.stop_reason == "error"
    assert 'names guardrail "recorder", which no loaded plugin offers' in result.diagnostic
    assert "GUARDRAIL_INVALID" in result.diagnostic
    # Nothing ran in the child tether: no session was opened, no model was asked.
    assert [r for r in records(record) if r["pid"] != os.getpid()] == []
    db = child.parent / ".tether" / "sessions.db"
    if db.exists():
        store = SQLiteStore(db)
        try:
            assert await store.sessions() == []
        finally:
            await store.aclose()
