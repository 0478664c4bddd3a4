"""Agents on real stores, driven by the function and scripted models tether ships."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tether.agents import Agent, AgentLimits, Tool, ToolRegistry, new_header
from tether.models import Model
from tether.store import MemoryStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request, tmp_path):
    store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield store
    await store.aclose()


@pytest.fixture
def make_agent(store) -> Callable[..., object]:
    async def make(model: Model, *, tools=(), limits=None, **kwargs) -> Agent:
        header = await store.create(new_header(agent=kwargs.pop("agent", "main")))
        return Agent(
            header=header,
            store=store,
            model=model,
            tools=ToolRegistry(tools),
            limits=limits or AgentLimits(retry_backoff=0),
            **kwargs,
        )

    return make


def echo_tool(name: str = "echo", *, safe: bool = False, run=None) -> Tool:
    return Tool(
        name,
        f"{name} a text",
        run or (lambda args, ctx: f"{name}:{args['text']}"),
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        safe=safe,
    )
