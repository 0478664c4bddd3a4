"""Callers of ``tether a2a serve`` (docs/a2a.md#callers, docs/callers.md): each bearer token's
caller is ``a2a:NAME`` with the claims ``[plugin.a2a.serve.callers]`` gives it; on one profile
two callers see different skill catalogs and different declared subagents; the session records
its initiator and each message its sender; a caller a gate refuses gets HTTP 403 (both
bindings, streamed or not), and nothing is written.

The served agent's model (:mod:`tests.a2a.peers.whoami`) answers with the skills and tools its
request shows; the skills come from a caller-aware provider and the ``readonly`` gate from the
local plugin :mod:`tests.a2a.peers.plugins.team_skills`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.contracts import Caller
from tether.errors import ErrorCode
from tether.store import DescriptorEvent, InboxAccepted, SQLiteStore

from .test_serve import PEERS, TIMEOUT, Server, answer, client_of, free_port, send, stored

pytestmark = pytest.mark.anyio

MODEL = "function:tests.a2a.peers.whoami:brain"
TOKENS = {
    "BILLING_TOKEN": "t-billing",
    "SUPPORT_TOKEN": "t-support",
    "GUEST_TOKEN": "t-guest",
    "AUDITOR_TOKEN": "t-auditor",
}
BILLING = Caller(id="a2a:billing", name="Billing team", via="a2a", claims={"team": "billing"})
SUPPORT = Caller(id="a2a:support", via="a2a", claims={"team": "support"})
#: The JSON-RPC headers of A2A 1.0.
RPC = {"content-type": "application/json", "a2a-version": "1.0"}


def profile(folder: Path, billing: str = '{ team = "billing" }') -> Path:
    """Four callers on one agent: ``billing`` (claims ``billing``), ``support``, ``guest`` (a
    free plan, which the agent's gate refuses) and ``auditor`` (billing, read-only: the
    ``readonly`` gate lets it start sessions, not send); a declared subagent per team."""
    plugins = json.dumps(str(PEERS / "plugins"))
    text = f"""
[tether]
plugins = ["a2a", "skill-tool", "team_skills"]
store = "sqlite:served.db"
plugin_dirs = [{plugins}]
allow_outside = [{plugins}]

[plugin.a2a.serve.tokens_env]
billing = "BILLING_TOKEN"
support = "SUPPORT_TOKEN"
guest = "GUEST_TOKEN"
auditor = "AUDITOR_TOKEN"

[plugin.a2a.serve.callers]
billing = {{ name = "Billing team", claims = {billing} }}
support = {{ claims = {{ team = "support" }} }}
guest = {{ claims = {{ plan = "free" }} }}
auditor = {{ claims = {{ team = "billing", readonly = true }} }}

[agent.main]
description = "Says what it sees."
model = "{MODEL}"
subagents = ["invoices", "tickets"]
callers = {{ claims = {{ team = ["billing", "support"] }} }}

[agent.invoices]
description = "Answers questions about invoices."
model = "{MODEL}"
when = {{ claims = {{ team = "billing" }} }}

[agent.tickets]
description = "Answers questions about support tickets."
model = "{MODEL}"
when = {{ claims = {{ team = "support" }} }}
"""
    path = folder / "served.toml"
    path.write_text(text)
    return path


def seen(text: str) -> tuple[list[str], list[str]]:
    """The skills and subagents the model said it saw (:func:`tests.a2a.peers.whoami.seen`)."""
    skills, _, subagents = text.partition(" | ")
    names = [skills.removeprefix("skills: "), subagents.removeprefix("subagents: ")]
    found = [[] if n == "-" else n.split(", ") for n in names]
    return found[0], found[1]


async def sessions_of(path: Path) -> list[str]:
    store = SQLiteStore(path)
    try:
        return [header.id for header in await store.sessions()]
    finally:
        await store.aclose()


def said(text: str, context_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id:
        message["contextId"] = context_id
    return {"message": message}


def assert_refused(response: httpx.Response, caller: str) -> str:
    """``response`` is a 403 refusing ``caller``: its message."""
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    message = error["message"]
    assert f'caller "{caller}"' in message
    assert f"[{ErrorCode.CALLER_REFUSED}]" in message
    details = error.get("data") or error.get("details")
    assert {"tetherCode": "CALLER_REFUSED"} in [d.get("metadata") for d in details]
    return message


async def test_two_callers_see_their_own_skills_and_subagents_on_one_profile(tmp_path):
    server = Server(profile(tmp_path), free_port(), TOKENS)
    try:
        async with (
            client_of(server.url, token="t-billing") as billing,
            client_of(server.url, token="t-support", binding="HTTP+JSON") as support,
        ):
            billing_task, _ = await send(billing, "what do you see?")
            support_task, _ = await send(support, "what do you see?")
    finally:
        assert server.stop() == 0
    assert seen(answer(billing_task)) == (["billing-playbook", "house-style"], ["invoices"])
    assert seen(answer(support_task)) == (["house-style", "support-playbook"], ["tickets"])
    # The sessions record their initiators, and each message its sender.
    for task, caller in ((billing_task, BILLING), (support_task, SUPPORT)):
        header, events = await stored(tmp_path / "served.db", task.context_id)
        assert header.caller == caller
        assert [e.source.caller for e in events if isinstance(e, InboxAccepted)] == [caller]


@pytest.mark.parametrize(
    ("path", "method"),
    [("", "SendMessage"), ("", "SendStreamingMessage"), ("rest/message:send", None)],
)
async def test_a_caller_the_gate_refuses_gets_403_and_no_session_is_written(tmp_path, path, method):
    server = Server(profile(tmp_path), free_port(), TOKENS)
    try:
        headers = {**RPC, "authorization": "Bearer t-guest"}
        body = (
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": said("hello")}
            if method
            else said("hello")
        )
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            refused = await http.post(server.url + path, headers=headers, json=body)
        message = assert_refused(refused, "a2a:guest")
        assert "may not start a session" in message
        assert 'refused by gate "profile"' in message
        if not method:  # HTTP+JSON: the AIP-193 body says its status too
            assert refused.json()["error"]["code"] == 403
            assert refused.json()["error"]["status"] == "PERMISSION_DENIED"
    finally:
        assert server.stop() == 0
    assert await sessions_of(tmp_path / "served.db") == []


async def test_a_caller_admitted_to_start_a_session_but_not_to_send_leaves_nothing(tmp_path):
    server = Server(profile(tmp_path), free_port(), TOKENS)
    try:
        headers = {**RPC, "authorization": "Bearer t-auditor"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": said("hello")}
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            refused = await http.post(server.url, headers=headers, json=body)
        message = assert_refused(refused, "a2a:auditor")
        assert "may not send to a new session" in message
        assert 'refused by gate "readonly"' in message
    finally:
        assert server.stop() == 0
    assert await sessions_of(tmp_path / "served.db") == []


async def test_a_follow_up_from_a_refused_sender_is_refused_and_the_log_is_unchanged(tmp_path):
    """billing starts a context; the profile then makes it read-only (a plugin's gate: it may
    open sessions, not send): its follow-up to its own context gets 403 and writes nothing."""
    path = profile(tmp_path)
    server = Server(path, free_port(), TOKENS)
    try:
        async with client_of(server.url, token="t-billing") as billing:
            task, _ = await send(billing, "first")
    finally:
        assert server.stop() == 0
    _, before = await stored(tmp_path / "served.db", task.context_id)
    profile(tmp_path, billing='{ team = "billing", readonly = true }')
    server = Server(path, free_port(), TOKENS)
    try:
        headers = {**RPC, "authorization": "Bearer t-billing"}
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "SendMessage",
            "params": said("second", context_id=task.context_id),
        }
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            refused = await http.post(server.url, headers=headers, json=body)
        message = assert_refused(refused, "a2a:billing")
        assert f"may not send to session {task.context_id}" in message
        assert 'a read-only caller sends no messages (refused by gate "readonly")' in message
    finally:
        assert server.stop() == 0
    _, after = await stored(tmp_path / "served.db", task.context_id)
    assert after == before
    assert [e.content for e in after if isinstance(e, InboxAccepted)] == ["first"]
    tasks = [e for e in after if isinstance(e, DescriptorEvent) and e.kind == "a2a/task"]
    assert {t.data["task"]["id"] for t in tasks} == {task.id}


def test_callers_without_authentication_stop_the_server_at_start(tmp_path):
    import subprocess
    import sys

    from .test_serve import ENV

    path = tmp_path / "served.toml"
    path.write_text(
        '[tether]\nplugins = ["a2a"]\nstore = "sqlite:served.db"\n'
        '[plugin.a2a.serve]\ncallers = { alice = { claims = { team = "x" } } }\n'
        f'[agent.main]\nmodel = "{MODEL}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "tether", "a2a", "serve", "--profile", str(path), "--port", "0"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode != 0
    assert "callers names who authenticated callers are" in done.stderr
    assert "PLUGIN_SETTINGS_INVALID" in done.stderr


def test_a_callers_name_is_its_id_with_what_an_id_cannot_hold_percent_encoded():
    from tether_a2a._callers import Callers, caller_id
    from tether_a2a._settings import CallerSettings, ServeSettings

    assert caller_id("billing") == "a2a:billing"
    assert caller_id("Billing team\n") == "a2a:Billing%20team%0A"
    known = Callers(
        ServeSettings(
            tokens_env={"billing": "X"},
            callers={"billing": CallerSettings(name="Billing", claims={"team": "billing"})},
        )
    )
    assert known.of("billing") == BILLING.model_copy(update={"name": "Billing"})
    assert known.of("carol") == Caller(id="a2a:carol", via="a2a")  # not listed: no claims
    assert known.of("") is None  # nobody authenticated


def test_callers_must_name_callers_a_token_authenticates():
    from pydantic import ValidationError

    from tether_a2a._settings import CallerSettings, ServeSettings

    bob = {"bob": CallerSettings(claims={"x": 1})}
    with pytest.raises(ValidationError, match="callers names 'bob', which no token"):
        ServeSettings(tokens_env={"alice": "A"}, callers=bob)
    # With an authenticator, any name it may return.
    assert ServeSettings(authenticator="m:f", callers=bob).callers == bob
