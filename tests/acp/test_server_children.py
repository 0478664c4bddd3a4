"""``session/load`` of a delegated child's session: the child is the same child it was when its
parent delegated to it (its narrowed tools come from its delegation descriptor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import acp
import anyio
import pytest

import tether
import tether_spawn
import tether_subagent_tools
from tether.agents import Tool
from tether.runtime import Runtime, profile_store
from tether.testing import make_runtime, scaled, write_profile
from tether_acp._server import TetherAcpAgent

from .test_server import Recorder

pytestmark = pytest.mark.anyio

MODEL = """
from tether.models import ModelResponse, ToolCall


def answer(request):
    if request.session_label == "child-task":  # the child says which tools it has
        return "tools: " + ", ".join(sorted(tool.name for tool in request.tools))
    if request.messages[-1].role == "tool":
        return "done"
    arguments = {"description": "child-task", "prompt": "list your tools"}
    call = ToolCall(id="d1", name="subagent", arguments=arguments)
    return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
"""


class Tools:
    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        anything = {"type": "object"}
        return [
            Tool("shout", "Shout.", lambda args, ctx: "!", anything),
            Tool("echo", "Echo.", lambda args, ctx: "echo", anything),
        ]


def runtime(folder: Path) -> Any:
    (folder / "acp_children_model.py").write_text(MODEL, encoding="utf-8")
    profile = write_profile(
        folder,
        """
        [tether]
        plugins = ["spawn", "subagent", "tools"]
        store = "sqlite:.tether/sessions.db"

        [plugin.subagent]
        provider = "spawn"
        tool_filter = { deny = ["shout"] }

        [agent.main]
        model = "function:acp_children_model:answer"
        """,
    )
    plugins = {
        "spawn": tether_spawn,
        "subagent": tether_subagent_tools.SubagentToolsPlugin,
        "tools": Tools(),
    }
    return make_runtime(profile, plugins)


async def test_session_load_of_a_child_keeps_its_narrowed_tools(tmp_path):
    with anyio.fail_after(scaled(20)):
        k = runtime(tmp_path)
        store = profile_store(k.kernel)
        try:
            async with anyio.create_task_group() as host:
                server = TetherAcpAgent(Runtime(k.kernel, store), host=host)
                server.on_connect(Recorder())
                try:
                    sid = (await server.new_session(cwd=str(tmp_path))).session_id
                    await server.prompt([acp.text_block("delegate")], sid)
                finally:
                    server.release_all()
            (child,) = await store.sessions(parent=sid)
            delegated = [m for m in await _messages(store, child.id) if m.startswith("tools:")]
        finally:
            await store.aclose()

        # Another connection (and runtime, as after a restart) loads the child itself.
        k = runtime(tmp_path)
        store = profile_store(k.kernel)
        client = Recorder()
        try:
            async with anyio.create_task_group() as host:
                server = TetherAcpAgent(Runtime(k.kernel, store), host=host)
                server.on_connect(client)
                try:
                    await server.load_session(cwd=str(tmp_path), session_id=child.id)
                    reply = await server.prompt([acp.text_block("and now?")], child.id)
                finally:
                    server.release_all()
        finally:
            await store.aclose()
    (tools,) = delegated
    assert "shout" not in tools
    assert "echo" in tools
    assert reply.stop_reason == "end_turn"
    assert client.seen(child.id)[-1] == ("agent_message_chunk", tools)


async def _messages(store: Any, session_id: str) -> list[str]:
    return [
        s.event.content
        for s in await store.events(session_id)
        if s.event.type == "assistant/message"
    ]
