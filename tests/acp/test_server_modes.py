"""``tether acp``'s session modes and models: offered in ``session/new`` and ``session/load``,
set with ``session/set_mode`` and ``session/set_config_option``, kept in the session.

Modes are how this server, the permission host, decides a session's questions: ``ask`` the
client (the default), ``allow`` or ``deny`` without asking. Models are the model specs of the
profile's agents. The server runs as a real process driven by the ACP SDK's client side (the
helpers of test_server.py and test_server_status.py); a last test reads the raw wire and checks
every message of a session against the ACP schema's models.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import acp
import anyio
import pytest
from acp.schema import (
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    SessionNotification,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)
from pydantic import BaseModel

import tether
from tether.agents import Tool, ToolOutput
from tether.models import ImagePart
from tether.store import DescriptorEvent, SQLiteStore, ToolResult
from tether.testing import write_profile

from .test_server import TIMEOUT, events, served, text
from .test_server_status import PLUGIN, Asker, assert_monotone

pytestmark = pytest.mark.anyio

MAIN = "scripted:main.toml"
HELPER = "scripted:helper.toml"


def make_profile(folder: Path, main: str, helper: str = "", approval: str = "ask") -> Path:
    """Two agents, ``main`` (the one served) and ``helper``, each on a script of its own."""
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / "plugins" / "risky.py").write_text(PLUGIN, encoding="utf-8")
    write_profile(folder, main, "main.toml")
    write_profile(folder, helper, "helper.toml")
    return write_profile(
        folder,
        '[tether]\nplugins = ["risky"]\nplugin_dirs = ["plugins"]\n'
        'store = "sqlite:.tether/sessions.db"\n'
        f'[agent.main]\nmodel = "{MAIN}"\napproval = "{approval}"\n'
        f'[agent.helper]\nmodel = "{HELPER}"\n',
    )


def option(options: list[Any] | None, config_id: str) -> Any:
    (found,) = [o for o in options or [] if o.id == config_id]
    return found


DELETE = """
[[steps]]
tool_calls = [{ name = "delete", arguments = { path = "notes.md" } }]

[[steps]]
text = "Done."
"""


async def test_session_new_offers_the_modes_and_the_profiles_models(tmp_path):
    profile = make_profile(tmp_path, "")
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert session.modes is not None
    assert session.modes.current_mode_id == "ask"
    assert [m.id for m in session.modes.available_modes] == ["ask", "allow", "deny"]
    assert [o.id for o in session.config_options or []] == ["mode", "model"]
    mode = option(session.config_options, "mode")
    assert (mode.category, mode.current_value) == ("mode", "ask")
    model = option(session.config_options, "model")
    assert (model.category, model.current_value) == ("model", MAIN)
    assert [(o.value, o.description) for o in model.options] == [
        (MAIN, "the model of agent main"),
        (HELPER, "the model of agent helper"),
    ]


@pytest.mark.parametrize(("mode", "status"), [("allow", "completed"), ("deny", "failed")])
async def test_a_mode_decides_without_asking_and_a_reload_keeps_it(tmp_path, mode, status):
    profile = make_profile(tmp_path, DELETE + DELETE)
    client = Asker("reject")  # would refuse: the mode must decide, not the client
    with anyio.fail_after(TIMEOUT):
        async with served(profile, client=client) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id=mode)
            await conn.prompt(session_id=sid, prompt=text("Clean up"))
        reloaded = Asker("reject")
        async with served(profile, client=reloaded) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            loaded = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            reloaded.trail.clear()
            await conn.prompt(session_id=sid, prompt=text("Clean up again"))
    for asker in (client, reloaded):
        assert [row for row in asker.trail if row[0] == "request_permission"] == []
        (statuses,) = asker.statuses().values()  # the one call of its prompt
        assert (
            statuses == ["pending", "in_progress", "completed"]
            if mode == "allow"
            else [
                "pending",
                "failed",
            ]
        )
        assert_monotone(asker)
    # The client was told the mode is one of its config options, and it changed.
    changes = [u for _, u in client.updates if u.session_update == "config_option_update"]
    assert [option(u.config_options, "mode").current_value for u in changes] == [mode]
    assert loaded.modes is not None
    assert loaded.modes.current_mode_id == mode
    assert option(loaded.config_options, "mode").current_value == mode
    stored = await events(profile, sid)
    marks = [e.data for e in stored if isinstance(e, DescriptorEvent) and e.kind == "acp/mode"]
    assert marks == [{"mode": mode}]
    results = [e for e in stored if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [status == "failed"] * 2


async def test_set_config_option_mode_tells_the_current_mode(tmp_path):
    profile = make_profile(tmp_path, "")
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            reply = await conn.set_config_option(config_id="mode", session_id=sid, value="deny")
    assert option(reply.config_options, "mode").current_value == "deny"
    assert option(reply.config_options, "model").current_value == MAIN
    (update,) = [u for _, u in client.updates]
    assert (update.session_update, update.current_mode_id) == ("current_mode_update", "deny")


async def test_a_model_chosen_runs_from_the_next_turn_and_a_reload_keeps_it(tmp_path):
    # The main script holds its first turn in a tool until the test lets it go (a file), so the
    # model is chosen while a turn runs; the helper's script answers what comes after.
    flag = tmp_path / "go"
    main = f"""
    [[steps]]
    tool_calls = [{{ name = "hold", arguments = {{ flag = "{flag}" }} }}]

    [[steps]]
    text = "main answers."
    """
    # Step i answers the request holding i answers: the helper's first two are main's turn.
    helper = """
    [[steps]]
    text = "not played"

    [[steps]]
    text = "not played"

    [[steps]]
    text = "helper answers."

    [[steps]]
    text = "helper again."
    """
    profile = make_profile(tmp_path, main, helper)
    (tmp_path / "plugins" / "hold.py").write_text(HOLD, encoding="utf-8")
    profile.write_text(profile.read_text().replace('["risky"]', '["risky", "hold"]'))
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            replies: list[Any] = []

            async def prompt(words: str) -> None:
                replies.append(await conn.prompt(session_id=sid, prompt=text(words)))

            async with anyio.create_task_group() as group:
                group.start_soon(prompt, "first")
                await client.wait_for(lambda seen: any(r[0] == "tool_call" for r in seen))
                chosen = await conn.set_config_option(
                    config_id="model", session_id=sid, value=HELPER
                )  # answered while the turn runs: it does not wait for it
                flag.touch()
            await prompt("second")
            said = [r[1] for r in client.seen() if r[0] == "agent_message_chunk"]
        async with served(profile) as (conn, client, _):
            await conn.initialize(protocol_version=1)
            loaded = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            client.updates.clear()
            await prompt("third")
            again = [r[1] for r in client.seen() if r[0] == "agent_message_chunk"]
    assert [r.stop_reason for r in replies] == ["end_turn"] * 3
    assert option(chosen.config_options, "model").current_value == HELPER
    assert said == ["main answers.", "helper answers."]  # the running turn kept its model
    assert option(loaded.config_options, "model").current_value == HELPER
    assert again == ["helper again."]
    store = SQLiteStore(tmp_path / ".tether" / "sessions.db")
    try:
        header = await store.header(sid)
    finally:
        await store.aclose()
    assert header.model == HELPER
    stored = await events(profile, sid)
    changes = [e.data for e in stored if isinstance(e, DescriptorEvent) and e.kind == "model"]
    assert changes == [{"old": MAIN, "new": HELPER}]


HOLD = """
import anyio
import tether
from pathlib import Path
from tether.agents import Tool


async def hold(args, ctx):
    while not Path(args["flag"]).exists():
        await anyio.sleep(0.02)
    return "let go"


@tether.hookimpl
def tether_tools():
    return [Tool("hold", "Wait for the flag.", hold, {"type": "object"})]
"""


async def test_what_is_not_offered_is_invalid_params(tmp_path):
    profile = make_profile(tmp_path, "")
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            errors: list[acp.RequestError] = []
            for call in (
                lambda: conn.set_session_mode(session_id=sid, mode_id="yolo"),
                lambda: conn.set_config_option(config_id="model", session_id=sid, value="x:y"),
                lambda: conn.set_config_option(config_id="speed", session_id=sid, value="fast"),
                lambda: conn.set_config_option(config_id="mode", session_id=sid, value=True),
                lambda: conn.set_session_mode(session_id="ses_nowhere", mode_id="ask"),
            ):
                with pytest.raises(acp.RequestError) as caught:
                    await call()
                errors.append(caught.value)
    assert [e.code for e in errors] == [-32602, -32602, -32602, -32602, -32002]
    assert "the modes of this session: ask, allow, deny" in str(errors[0])
    assert f"the models of this session: {MAIN}, {HELPER}" in str(errors[1])
    assert "the options of this session: mode, model" in str(errors[2])


async def test_one_model_and_no_questions_offer_nothing(tmp_path):
    # An agent whose approval is not "ask" never asks this server: no modes. A profile whose
    # agents share one model: no model to choose.
    folder = tmp_path
    write_profile(folder, "", "main.toml")
    profile = write_profile(
        folder,
        '[tether]\nstore = "sqlite:.tether/sessions.db"\n'
        f'[agent.main]\nmodel = "{MAIN}"\napproval = "allow"\n'
        f'[agent.helper]\nmodel = "{MAIN}"\n',
    )
    with anyio.fail_after(TIMEOUT):
        async with served(profile) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with pytest.raises(acp.RequestError) as caught:
                await conn.set_session_mode(session_id=session.session_id, mode_id="allow")
    assert (session.modes, session.config_options) == (None, None)
    assert caught.value.code == -32602


# ------------------------------------------------------------------------ the raw wire


def conforms(schema: type[BaseModel], data: dict[str, Any]) -> None:
    """``data`` is a valid ``schema`` as it stands: parsing it drops or mends nothing (the
    SDK's models mend some invalid values instead of failing)."""
    parsed = schema.model_validate(data)
    assert parsed.model_dump(by_alias=True, exclude_unset=True, mode="json") == data


class Pictures:
    """An inline plugin: ``picture`` returns a text and a PNG (a ``ToolOutput``), as an MCP
    tool's image arrives."""

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        image = ImagePart(mime_type="image/png", data=PNG)
        return [
            Tool(
                "picture",
                "Take a picture.",
                lambda args, ctx: ToolOutput("a picture\n[image: image/png, 70 bytes]", [image]),
                {"type": "object"},
            )
        ]


PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
    "rkJggg=="
)


async def test_every_message_of_a_session_conforms_to_the_acp_schema(tmp_path, monkeypatch):
    from .test_server_wire import Gate, initialize, wire

    # A chosen model's spec is resolved from the directory tether acp runs in, as --model's is
    # (the served processes above run in the profile's folder).
    monkeypatch.chdir(tmp_path)
    calls = [
        '{ name = "measure", arguments = {} }',
        '{ name = "open_gate", arguments = {} }',
        '{ name = "picture", arguments = {} }',
    ]
    write_profile(
        tmp_path,
        f'[[steps]]\ntool_calls = [{", ".join(calls)}]\n[[steps]]\ntext = "Done."\n',
        "main.toml",
    )
    write_profile(tmp_path, "", "helper.toml")
    profile = write_profile(
        tmp_path,
        '[tether]\nplugins = ["gate", "pictures"]\nstore = "sqlite:.tether/sessions.db"\n'
        f'[agent.main]\nmodel = "{MAIN}"\n[agent.helper]\nmodel = "{HELPER}"\n',
    )
    plugins: dict[str, object] = {"gate": Gate(), "pictures": Pictures()}
    with anyio.fail_after(TIMEOUT):
        async with wire(profile, plugins=plugins) as client:
            await initialize(client)
            client.request("new", "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            sid = (await client.answer("new"))["result"]["sessionId"]
            requests: list[tuple[str, str, dict[str, Any], type[BaseModel]]] = [
                (
                    "mode",
                    "session/set_mode",
                    {"sessionId": sid, "modeId": "allow"},
                    SetSessionModeResponse,
                ),
                (
                    "prompt",
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": "Go"}]},
                    PromptResponse,
                ),
                (
                    "option",
                    "session/set_config_option",
                    {"sessionId": sid, "configId": "mode", "value": "ask"},
                    SetSessionConfigOptionResponse,
                ),
                (
                    "model",
                    "session/set_config_option",
                    {"sessionId": sid, "configId": "model", "value": HELPER},
                    SetSessionConfigOptionResponse,
                ),
                (
                    "load",
                    "session/load",
                    {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []},
                    LoadSessionResponse,
                ),
            ]
            for request_id, method, params, _ in requests:
                client.request(request_id, method, params)
                assert "result" in await client.answer(request_id)
    conforms(NewSessionResponse, client.answers("new")[0]["result"])
    for request_id, _, _, schema in requests:
        (answer,) = client.answers(request_id)
        conforms(schema, answer["result"])
    notifications = [m["params"] for m in client.messages if m.get("method") == "session/update"]
    for notification in notifications:
        conforms(SessionNotification, notification)
    assert [m for m in client.messages if m.get("method") == "session/request_permission"] == []
    kinds = Counter(n["update"]["sessionUpdate"] for n in notifications)
    # Live and replayed: 3 calls twice, 3 + 3 ends, 3 starts live; the mode told both ways.
    assert kinds == {
        "user_message_chunk": 1,
        "tool_call": 6,
        "tool_call_update": 9,
        "agent_message_chunk": 2,
        "config_option_update": 1,
        "current_mode_update": 1,
    }
    images = [
        block["content"]
        for n in notifications
        if n["update"]["sessionUpdate"] == "tool_call_update"
        for block in n["update"].get("content") or []
        if block["content"]["type"] == "image"
    ]
    assert images == [{"type": "image", "mimeType": "image/png", "data": PNG}] * 2
