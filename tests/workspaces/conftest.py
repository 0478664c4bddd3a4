"""Shared parts for the workspace tests: a profile whose agents delegate (spawn, fork, the
root-only copy, a declared subagent), a ``where`` tool that answers the calling agent's
workspace, and a model that plays every side."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tether
import tether_fork
import tether_spawn
import tether_subagent_tools
from tether.agents import Tool
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import SQLiteStore
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_kernel, write_profile


class WherePlugin:
    """``where``: the calling agent's workspace, as JSON."""

    @tether.hookimpl
    def tether_tools(self):
        def where(arguments: dict[str, Any], context) -> str:
            workspace = context.agent.workspace
            return json.dumps(
                {
                    "root": str(workspace.root),
                    "owner": workspace.owner,
                    "kind": workspace.kind,
                    "shared_from": workspace.shared_from,
                    "backend": workspace.backend,
                }
            )

        return [Tool("where", "Where your workspace is.", where, safe=True)]


PLUGINS: dict[str, object] = {
    "spawn": tether_spawn,
    "fork": tether_fork,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
    "where": WherePlugin(),
}

PROFILE = """
[tether]
plugins = ["spawn", "fork", "subagent", "where"]
{tether}
[plugin.subagent]
{subagent}
[agent.main]
model = "scripted:none.toml"
subagents = ["helper"]
[agent.helper]
description = "Helps."
{helper}
"""


def call(name: str, arguments: dict[str, Any] | None = None, call_id: str = "c1") -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments or {}),),
        finish_reason="tool_calls",
    )


def is_child(request: ModelRequest) -> bool:
    return any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)


def child_says_where(request: ModelRequest) -> ModelResponse | str:
    """A child calls ``where`` once and answers with what it said."""
    last = request.messages[-1]
    if last.role == "tool":
        return last.content
    return call("where", call_id="w1")


def parent(first: ModelResponse) -> Callable[[ModelRequest], ModelResponse | str]:
    """A parent that makes ``first`` (a delegation) and then answers what it got back."""

    def answer(request: ModelRequest) -> ModelResponse | str:
        last = request.messages[-1]
        if last.role == "tool":
            return last.content
        return first

    return answer


def two_sided(
    parent_side: Callable[[ModelRequest], ModelResponse | str],
    child_side: Callable[[ModelRequest], ModelResponse | str] = child_says_where,
) -> FunctionModel:
    return FunctionModel(lambda r: child_side(r) if is_child(r) else parent_side(r))


def delegate(tool: str = "subagent", prompt: str = "where are you?") -> ModelResponse:
    arguments = {"description": "find out", "prompt": prompt}
    return call(tool, arguments if tool == "subagent" else {"prompt": prompt}, call_id="d1")


@pytest.fixture
async def build(tmp_path: Path):
    """``build(tether=..., subagent=..., helper=...)``: a runtime on a SQLite store in
    ``tmp_path`` whose profile has those extra lines."""
    stores: list[SQLiteStore] = []

    def make(tether: str = "", subagent: str = "", helper: str = "") -> Runtime:
        profile = write_profile(
            tmp_path, PROFILE.format(tether=tether, subagent=subagent, helper=helper)
        )
        store = SQLiteStore(tmp_path / ".tether" / "sessions.db")
        stores.append(store)
        return Runtime(make_kernel(profile, PLUGINS), store)

    yield make
    for store in stores:
        await store.aclose()
