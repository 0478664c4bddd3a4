"""``authenticate``: agents that refuse ``session/new`` until the client signs in (as the Codex
adapter does). A real peer process (tests/acp/peers/auth.py) logs every request it gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

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


async def delegate_once(tmp_path: Path, store: Any, *args: str, **settings: Any) -> Any:
    log = tmp_path / "requests.log"
    runtime = build(tmp_path, agent_table("echo", "auth.py", "--log", str(log), *args, **settings))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("hello", parent))
        with anyio.fail_after(scaled(30)):
            result = await run.result()
        await run.dispose()
    events = [s.event for s in await store.events(run.id)]
    return result, log.read_text().splitlines(), events


async def test_an_agent_that_requires_authentication_is_signed_in_with_its_one_method(
    tmp_path, store
):
    result, requests, events = await delegate_once(tmp_path, store)
    assert (result.stop_reason, result.output) == (
        "completed",
        "signed in with agent-login: hello",
    )
    assert requests == [
        "initialize",
        "session/new",
        "authenticate agent-login",
        "session/new",
        "session/prompt",
    ]
    (session,) = [
        e.data for e in events if isinstance(e, DescriptorEvent) and e.kind == "acp/session"
    ]
    assert session["auth_method"] == "agent-login"


async def test_a_configured_auth_method_signs_in_before_the_session_opens(tmp_path, store):
    result, requests, _ = await delegate_once(
        tmp_path,
        store,
        "--methods",
        "chatgpt,openai-api-key",
        "--accept",
        "openai-api-key",
        auth_method="openai-api-key",
    )
    assert result.output == "signed in with openai-api-key: hello"
    assert requests == [
        "initialize",
        "authenticate openai-api-key",
        "session/new",
        "session/prompt",
    ]


async def test_several_methods_and_none_configured_is_an_error_naming_them(tmp_path, store):
    result, requests, _ = await delegate_once(
        tmp_path, store, "--methods", "chatgpt,openai-api-key"
    )
    assert result.stop_reason == "error"
    diagnostic = result.diagnostic or ""
    assert 'ACP agent "echo" requires authentication' in diagnostic
    assert "sign in first: chatgpt, openai-api-key" in diagnostic  # the agent's own data
    assert "its methods: chatgpt (Sign in with chatgpt), openai-api-key" in diagnostic
    assert "set auth_method in its [[plugin.acp.agents]] table to one of its methods" in diagnostic
    assert not [r for r in requests if r.startswith("authenticate")]  # no guess


async def test_a_terminal_login_is_not_started_on_the_users_behalf(tmp_path, store):
    result, requests, _ = await delegate_once(tmp_path, store, "--terminal")
    assert result.stop_reason == "error"
    assert "set auth_method" in (result.diagnostic or "")
    assert not [r for r in requests if r.startswith("authenticate")]


async def test_an_auth_method_the_agent_does_not_list_is_an_error(tmp_path, store):
    result, requests, _ = await delegate_once(tmp_path, store, auth_method="api-key")
    assert result.stop_reason == "error"
    assert "does not list auth_method 'api-key' among its authentication methods" in (
        result.diagnostic or ""
    )
    assert "its methods: agent-login" in (result.diagnostic or "")
    assert requests == ["initialize"]


async def test_a_refused_authentication_says_why(tmp_path, store):
    result, _, _ = await delegate_once(
        tmp_path, store, "--accept", "none", auth_method="agent-login"
    )
    assert result.stop_reason == "error"
    assert (
        "authenticate (agent-login) failed: Invalid params (-32602): unknown method agent-login"
        in (result.diagnostic or "")
    )
