"""``tether acp`` asks its client before a served agent's tool that needs approval runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import acp
import anyio
import pytest
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

from tether.runtime import Runtime, profile_store
from tether.testing import make_runtime, scaled, write_profile
from tether_acp._server import TetherAcpAgent

pytestmark = pytest.mark.anyio

PLUGIN = """
import tether
from tether.agents import Tool

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def delete(args, ctx):
    return "deleted " + args["path"]


@tether.hookimpl
def tether_tools():
    return [Tool("delete", "Delete a file.", delete, SCHEMA, needs_approval=True)]
"""

SCRIPT = """
[[steps]]
tool_calls = [{ name = "delete", arguments = { path = "notes.md" } }]
[[steps]]
text = "done"
"""


class Approver:
    """An ACP client that answers permission requests with ``choice`` and records them, and
    everything it is sent in order (``seen``)."""

    def __init__(self, choice: str | None) -> None:
        self.choice = choice
        self.asked: list[tuple[str, Any, list[Any]]] = []
        self.seen: list[tuple[str, ...]] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = update.session_update
        if kind in ("tool_call", "tool_call_update"):
            self.seen.append((kind, update.tool_call_id, str(update.status)))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.asked.append((session_id, tool_call, options))
        self.seen.append(("request_permission", tool_call.tool_call_id, str(tool_call.status)))
        if self.choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=self.choice)
        )


def profile(folder: Path) -> Path:
    (folder / "plugins").mkdir(parents=True)
    (folder / "plugins" / "risky.py").write_text(PLUGIN)
    write_profile(folder, SCRIPT, "script.toml")
    return write_profile(
        folder,
        '[tether]\nplugins = ["risky"]\nplugin_dirs = ["plugins"]\n'
        'store = "sqlite:.tether/sessions.db"\n[agent.main]\nmodel = "scripted:script.toml"\n',
    )


@pytest.mark.parametrize(("choice", "result"), [("allow", "deleted notes.md"), (None, "error")])
async def test_a_tool_that_needs_approval_asks_the_acp_client(tmp_path, choice, result):
    runtime = make_runtime(profile(tmp_path))
    store = profile_store(runtime.kernel)
    client = Approver(choice)
    try:
        with anyio.fail_after(scaled(10)):
            async with anyio.create_task_group() as host:
                server = TetherAcpAgent(Runtime(runtime.kernel, store), host=host)
                server.on_connect(client)
                try:
                    sid = (await server.new_session(cwd=str(tmp_path))).session_id
                    response = await server.prompt([acp.text_block("clean up")], sid)
                    agent = server._sessions[sid].agent  # pyright: ignore[reportPrivateUsage]  (white-box)
                    tool_results = [m.content for m in agent.messages if m.role == "tool"]
                finally:
                    server.release_all()
    finally:
        await store.aclose()
    assert response.stop_reason == "end_turn"
    ((asked_session, tool_call, options),) = client.asked
    assert asked_session == sid
    assert tool_call.title.startswith('delete({"path": "notes.md"}) (agent "main"')
    assert [o.kind for o in options] == ["allow_once", "reject_once"]
    assert tool_results[0].startswith(result)
    # The call went out first, and the question names it by its id.
    assert tool_call.tool_call_id == "call_1_1"
    # Pending while asked; running once allowed; never back from in_progress to pending.
    assert client.seen == [
        ("tool_call", "call_1_1", "pending"),
        ("request_permission", "call_1_1", "pending"),
        *([("tool_call_update", "call_1_1", "in_progress")] if choice else []),
        ("tool_call_update", "call_1_1", "completed" if choice else "failed"),
    ]


@pytest.mark.parametrize(("choice", "status"), [("allow", "in_progress"), (None, "failed")])
async def test_a_turn_no_prompt_streams_announces_the_call_before_asking(tmp_path, choice, status):
    # A turn that no session/prompt started (as a child's notice gives): nothing streams its
    # tool calls, so the server announces the call itself, asks, and closes it when refused.
    runtime = make_runtime(profile(tmp_path))
    store = profile_store(runtime.kernel)
    client = Approver(choice)
    try:
        with anyio.fail_after(scaled(10)):
            async with anyio.create_task_group() as host:
                server = TetherAcpAgent(Runtime(runtime.kernel, store), host=host)
                server.on_connect(client)
                try:
                    sid = (await server.new_session(cwd=str(tmp_path))).session_id
                    agent = server._sessions[sid].agent  # pyright: ignore[reportPrivateUsage]  (white-box)
                    await agent.followup("a notice")
                    await agent.when_idle()
                    tool_results = [m.content for m in agent.messages if m.role == "tool"]
                finally:
                    server.release_all()
    finally:
        await store.aclose()
    assert client.seen == [
        ("tool_call", "call_1_1", "pending"),
        ("request_permission", "call_1_1", "pending"),
        ("tool_call_update", "call_1_1", status),
    ]
    assert tool_results[0].startswith("deleted" if choice else "error")
