"""``session/request_permission`` from an ACP child: what is decided, what is logged, in which
order, and what a cancelled turn does to a question still open. Real peer processes
(tests/acp/peers/permission.py), real SQLite stores."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

import tether_acp
from tether.runtime import compose_agent
from tether.store import DescriptorEvent, SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import scaled

from .test_provider import agent_table, build, delegating

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


async def delegate_once(runtime: Any, store: Any, prompt: str) -> tuple[Any, list[Any]]:
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest(prompt, parent))
        with anyio.fail_after(scaled(30)):
            result = await run.result()
        await run.dispose()
    return result, [s.event for s in await store.events(run.id)]


def acp_records(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.kind, e.data)
        for e in events
        if isinstance(e, DescriptorEvent) and e.kind in ("acp/permission", "acp/tool_call")
    ]


@pytest.mark.parametrize(("answer", "decision"), [("allow", "allowed"), ("reject", "denied")])
async def test_the_decision_logged_is_the_kind_of_the_option_the_host_chose(
    tmp_path, store, answer, decision
):
    runtime = build(tmp_path, agent_table("echo", "permission.py", permission="ask"))

    async def host(question: Any) -> str:
        return answer

    tether_acp.set_permission_host(runtime, host)
    result, events = await delegate_once(runtime, store, "ask edit")
    assert result.output == f"selected: {answer}"
    ((_, note),) = acp_records(events)
    assert (note["decision"], note["option"], note["by"]) == (decision, answer, "the host")
    assert note["tool_call_id"] == "perm-1"


async def test_an_option_the_agent_did_not_offer_is_not_passed_on(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "permission.py", permission="ask"))

    async def host(question: Any) -> str:
        return "allow_everything_forever"

    tether_acp.set_permission_host(runtime, host)
    result, events = await delegate_once(runtime, store, "ask execute")
    assert result.output == "selected: reject"
    ((_, note),) = acp_records(events)
    assert note["decision"] == "denied"
    assert note["by"] == (
        "the host answered an option the agent did not offer ('allow_everything_forever')"
    )


async def test_a_host_that_fails_denies(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "permission.py", permission="ask"))

    async def host(question: Any) -> str:
        raise RuntimeError("the terminal went away")

    tether_acp.set_permission_host(runtime, host)
    result, events = await delegate_once(runtime, store, "ask edit")
    assert result.output == "selected: reject"
    ((_, note),) = acp_records(events)
    assert note["decision"] == "denied"
    assert "the host failed (RuntimeError: the terminal went away)" in note["by"]


async def test_a_cancelled_turn_answers_its_open_question_cancelled_at_once(tmp_path, store):
    runtime = build(
        tmp_path, agent_table("echo", "permission.py", permission="ask", cancel_grace=20)
    )
    asked = anyio.Event()

    async def host(question: Any) -> str:
        asked.set()
        await anyio.sleep_forever()  # nobody at the keyboard
        raise AssertionError("unreachable")

    tether_acp.set_permission_host(runtime, host)
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("ask edit", parent))
        with anyio.fail_after(scaled(30)):
            await asked.wait()
        started = time.monotonic()
        await run.dispose()
        elapsed = time.monotonic() - started
        result = await run.result()
    events = [s.event for s in await store.events(run.id)]
    assert result.stop_reason == "aborted"
    assert elapsed < 10  # the agent answered its cancelled turn; no grace period spent
    ((_, note),) = acp_records(events)
    assert (note["decision"], note["option"], note["by"]) == (
        "cancelled",
        None,
        "the turn was cancelled",
    )


@pytest.mark.parametrize("prompt", ["ask read run", "ask read announce run"])
async def test_a_permission_decided_before_its_tool_ran_is_logged_before_it(
    tmp_path, store, prompt
):
    runtime = build(
        tmp_path,
        agent_table("echo", "permission.py", permission="allow_once", allow_kinds=["read"]),
    )
    result, events = await delegate_once(runtime, store, prompt)
    assert result.output == "selected: allow"
    records = acp_records(events)
    assert [kind for kind, _ in records] == ["acp/permission", "acp/tool_call"]
    assert records[0][1]["decision"] == "allowed"
    assert records[1][1]["status"] == "completed"
