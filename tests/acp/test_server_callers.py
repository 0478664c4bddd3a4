"""Callers of ``tether acp`` (docs/acp.md#callers-who-sends-each-prompt, docs/callers.md), in a
real process driven by the ACP SDK's client: a profile that trusts its client takes the caller
a request names in ``_meta["tether/caller"]``; two such callers see different skill catalogs
and different declared subagents on one profile; a sender a gate refuses gets ACP error -32003
(``CALLER_REFUSED``) and nothing is written; an unreadable caller is invalid params; without
trust the caller is the one running ``tether acp``.

The served agent's model (:mod:`tests.a2a.peers.whoami`) answers with the skills and tools its
request shows; the skills come from the caller-aware provider of the local plugin
:mod:`tests.a2a.peers.plugins.team_skills`, which also offers the ``readonly`` gate."""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import acp
import anyio
import pytest

from tether.contracts import Caller
from tether.errors import ErrorCode
from tether.store import InboxAccepted, SQLiteStore, UserMessage

from ..a2a.test_serve_callers import seen
from .test_server import TETHER, TIMEOUT, Recorder, text

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[2]
PLUGINS = ROOT / "tests" / "a2a" / "peers" / "plugins"
MODEL = "function:tests.a2a.peers.whoami:brain"
CALLER_KEY = "tether/caller"
BILLING = {"id": "acp:ann@example.com", "name": "Ann", "claims": {"team": "billing"}}
SUPPORT = {"id": "acp:sam@example.com", "claims": {"team": "support"}}
GUEST = {"id": "acp:gus@example.com", "claims": {"plan": "free"}}
READONLY = {"id": "acp:rob@example.com", "claims": {"team": "billing", "readonly": True}}


def profile(folder: Path, *, trust: bool = True) -> Path:
    """One agent with a gate (the billing and support teams only), a subagent per team, and
    the caller-aware skills; ``trust``: ``[plugin.acp.serve] trust_meta_caller``."""
    plugins = json.dumps(str(PLUGINS))
    serve = "[plugin.acp.serve]\ntrust_meta_caller = true\n" if trust else ""
    text = f"""
[tether]
plugins = [{'"acp", ' if trust else ""}"skill-tool", "team_skills"]
store = "sqlite:.tether/sessions.db"
plugin_dirs = [{plugins}]
allow_outside = [{plugins}]
{serve}
[agent.main]
model = "{MODEL}"
subagents = ["invoices", "tickets"]
callers = {{ allow = ["os:*"], claims = {{ team = ["billing", "support"] }} }}

[agent.invoices]
description = "Answers questions about invoices."
model = "{MODEL}"
when = {{ claims = {{ team = "billing" }} }}

[agent.tickets]
description = "Answers questions about support tickets."
model = "{MODEL}"
when = {{ claims = {{ team = "support" }} }}
"""
    path = folder / "tether.toml"
    path.write_text(text)
    return path


@asynccontextmanager
async def served(
    path: Path, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[acp.ClientSideConnection, Recorder]]:
    """``tether acp --profile PATH`` in a process of its own (with ``env`` added), plugins
    found by entry point (as a user's are) and this repository importable (the function
    model)."""
    env = {**environment(), **(env or {})}
    client = Recorder()
    with (path.parent / "stderr.log").open("ab") as stderr:
        async with acp.spawn_agent_process(
            cast(acp.Client, client),
            str(TETHER),
            "acp",
            "--profile",
            str(path),
            env=env,
            cwd=path.parent,
            transport_kwargs={"stderr": stderr.fileno(), "shutdown_timeout": 15.0},
        ) as (conn, _):
            await conn.initialize(protocol_version=1)
            yield conn, client


def environment() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD" and not k.startswith("TETHER_CALLER")
    }
    return {**env, "PYTHONPATH": str(ROOT)}


def meta(caller: dict[str, Any]) -> dict[str, Any]:
    return {CALLER_KEY: caller}


def answer(client: Recorder, session_id: str) -> str:
    """What the agent said in ``session_id`` since the last call (and forget it)."""
    said = "".join(row[1] for row in client.seen(session_id) if row[0] == "agent_message_chunk")
    client.updates.clear()
    return said


async def stored(folder: Path, session_id: str) -> tuple[Any, list[Any]]:
    store = SQLiteStore(folder / ".tether" / "sessions.db")
    try:
        return await store.header(session_id), [s.event for s in await store.events(session_id)]
    finally:
        await store.aclose()


async def session_ids(folder: Path) -> list[str]:
    store = SQLiteStore(folder / ".tether" / "sessions.db")
    try:
        return [header.id for header in await store.sessions()]
    finally:
        await store.aclose()


def caller(data: dict[str, Any]) -> Caller:
    return Caller(**data, via="acp")


async def test_two_meta_callers_see_their_own_skills_and_subagents_on_one_profile(tmp_path):
    with anyio.fail_after(TIMEOUT):
        async with served(profile(tmp_path)) as (conn, client):
            # Named by session/new: the session's initiator and its prompts' sender.
            ann = (await conn.new_session(cwd=str(tmp_path), **meta(BILLING))).session_id
            await conn.prompt(session_id=ann, prompt=text("what do you see?"))
            ann_sees = seen(answer(client, ann))
            # Named by the prompt only (the session's initiator is the OS user).
            sam = (await conn.new_session(cwd=str(tmp_path))).session_id
            await conn.prompt(session_id=sam, prompt=text("what do you see?"), **meta(SUPPORT))
            sam_sees = seen(answer(client, sam))
    assert ann_sees == (["billing-playbook", "house-style"], ["invoices"])
    assert sam_sees == (["house-style", "support-playbook"], ["tickets"])
    header, events = await stored(tmp_path, ann)
    assert header.caller == caller(BILLING)
    assert [e.source.caller for e in events if isinstance(e, InboxAccepted)] == [caller(BILLING)]
    header, events = await stored(tmp_path, sam)
    assert header.caller is not None
    assert header.caller.id == f"os:{getpass.getuser()}"
    assert [e.source.caller for e in events if isinstance(e, InboxAccepted)] == [caller(SUPPORT)]


async def test_a_refused_sender_gets_an_acp_error_and_nothing_is_written(tmp_path):
    with anyio.fail_after(TIMEOUT):
        async with served(profile(tmp_path)) as (conn, _client):
            ann = (await conn.new_session(cwd=str(tmp_path), **meta(BILLING))).session_id
            await conn.prompt(session_id=ann, prompt=text("first"))
            _, before = await stored(tmp_path, ann)
            # A follow-up from a sender the profile's gate refuses, in ann's session.
            with pytest.raises(acp.RequestError) as guest:
                await conn.prompt(session_id=ann, prompt=text("mine now"), **meta(GUEST))
            # And one a plugin's gate refuses (read-only: it may open, not send).
            with pytest.raises(acp.RequestError) as readonly:
                await conn.prompt(session_id=ann, prompt=text("me too"), **meta(READONLY))
            _, after = await stored(tmp_path, ann)
            # The session goes on for a sender the gates admit.
            await conn.prompt(session_id=ann, prompt=text("second"))
            # A new session for a refused caller is not created.
            with pytest.raises(acp.RequestError) as new:
                await conn.new_session(cwd=str(tmp_path), **meta(GUEST))
    assert after == before
    for refused, who in ((guest, GUEST), (readonly, READONLY), (new, GUEST)):
        error = refused.value
        assert error.code == -32003
        assert error.data == {"tetherCode": str(ErrorCode.CALLER_REFUSED)}
        assert f'caller "{who["id"]}"' in str(error)
    assert f"may not send to session {ann}" in str(guest.value)
    assert 'refused by gate "profile"' in str(guest.value)
    assert 'refused by gate "readonly"' in str(readonly.value)
    assert "may not start a session" in str(new.value)
    assert await session_ids(tmp_path) == [ann]
    _, events = await stored(tmp_path, ann)
    assert [e.content for e in events if isinstance(e, UserMessage)] == ["first", "second"]


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"id": "has a space"}, "id: "),
        ("acp:someone", "it is str, not an object"),
        ({"id": "acp:x", "claims": ["team"]}, "its claims are not an object"),
        ({"id": "acp:x", "role": "admin"}, "it has 'role', which a caller does not"),
    ],
)
async def test_a_meta_caller_that_cannot_be_read_is_invalid_params(tmp_path, given, problem):
    with anyio.fail_after(TIMEOUT):
        async with served(profile(tmp_path)) as (conn, _):
            with pytest.raises(acp.RequestError) as refused:
                await conn.new_session(cwd=str(tmp_path), **{CALLER_KEY: given})
    assert refused.value.code == -32602
    assert refused.value.data == {"tetherCode": str(ErrorCode.CALLER_INVALID)}
    assert f'the caller in _meta["{CALLER_KEY}"] cannot be read: {problem}' in str(refused.value)
    assert await session_ids(tmp_path) == []


async def test_without_trust_a_meta_caller_is_ignored_and_the_os_user_sends(tmp_path):
    path = profile(tmp_path, trust=False)
    with anyio.fail_after(TIMEOUT):
        async with served(path) as (conn, client):
            sid = (await conn.new_session(cwd=str(tmp_path), **meta(GUEST))).session_id
            await conn.prompt(session_id=sid, prompt=text("hello"), **meta(GUEST))
            sees = seen(answer(client, sid))
    me = f"os:{getpass.getuser()}"
    header, events = await stored(tmp_path, sid)
    assert header.caller is not None
    assert header.caller.id == me
    # Each acceptance names its sender (a turn's claim only a change of who asks).
    assert [e.source.caller for e in events if isinstance(e, InboxAccepted)] == [header.caller]
    assert sees == (["house-style"], [])  # the OS user has no team
    log = (tmp_path / "stderr.log").read_text()
    assert log.count('a client named its caller in _meta["tether/caller"], which is ignored') == 1


async def test_tether_caller_names_the_processs_caller_as_for_tether_run(tmp_path):
    env = {
        "TETHER_CALLER": "team:billing-desk",
        "TETHER_CALLER_NAME": "Billing desk",
        "TETHER_CALLER_CLAIMS": '{"team": "billing"}',
    }
    with anyio.fail_after(TIMEOUT):
        async with served(profile(tmp_path, trust=False), env) as (conn, client):
            sid = (await conn.new_session(cwd=str(tmp_path))).session_id
            await conn.prompt(session_id=sid, prompt=text("hello"))
            sees = seen(answer(client, sid))
    header, _ = await stored(tmp_path, sid)
    desk = Caller(
        id="team:billing-desk", name="Billing desk", via="env", claims={"team": "billing"}
    )
    assert header.caller == desk
    assert sees == (["billing-playbook", "house-style"], ["invoices"])


def test_a_tether_caller_that_cannot_be_read_stops_tether_acp_at_start(tmp_path):
    import subprocess

    env = {**environment(), "TETHER_CALLER": "acp:x", "TETHER_CALLER_CLAIMS": "[1]"}
    done = subprocess.run(
        [str(TETHER), "acp", "--profile", str(profile(tmp_path))],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2
    assert "the caller of tether acp cannot be read: it is a JSON list, not an object" in (
        done.stderr
    )
    assert "(TETHER_CALLER_CLAIMS); " in done.stderr
    assert f"[{ErrorCode.CALLER_INVALID}]" in done.stderr
