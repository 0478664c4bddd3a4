"""Shared parts for the subagent tests: a profile, a kernel, and a model that plays both sides.

Children run the parent's agent preset (and model), so :class:`Brain` tells a child's request
from its parent's by the delegation note the child's log carries, and answers each by looking
at the request's last message.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import tether_fork
import tether_spawn
import tether_subagent_tools
from tether.agents import Agent
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime, compose_agent
from tether.store import MemoryStore, SessionStore
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_kernel, scaled, write_profile

PLUGINS: dict[str, object] = {
    "spawn": tether_spawn,
    "fork": tether_fork,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
}

PROFILE = """
[tether]
plugins = ["spawn", "fork", "subagent"{extra_plugins}]
{settings}
[agent.main]
model = "scripted:none.toml"
"""


def is_child(request: ModelRequest) -> bool:
    """A child's log holds the delegation note (after any fork seed)."""
    return any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)


def delegate(
    prompt: str, *, tool: str = "subagent", background: bool | None = None, call_id: str = "d1"
) -> ModelResponse:
    """The parent's step that calls the delegation tool."""
    arguments: dict[str, Any] = {"description": "do the task", "prompt": prompt}
    if background is not None:
        arguments["run_in_background"] = background
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id, name=tool, arguments=arguments),),
        finish_reason="tool_calls",
    )


Answer = Callable[[ModelRequest], "ModelResponse | str | Awaitable[ModelResponse | str]"]


class Brain:
    """A FunctionModel body: ``parent(request)`` and ``child(request)`` answer each side."""

    def __init__(self, parent: Answer, child: Answer) -> None:
        self.parent = parent
        self.child = child
        self.model = FunctionModel(self)

    def __call__(self, request: ModelRequest) -> ModelResponse | str | Awaitable[Any]:
        return (self.child if is_child(request) else self.parent)(request)

    @property
    def child_requests(self) -> list[ModelRequest]:
        return [r for r in self.model.requests if is_child(r)]

    @property
    def parent_requests(self) -> list[ModelRequest]:
        return [r for r in self.model.requests if not is_child(r)]


def last(request: ModelRequest) -> str:
    return request.messages[-1].content


def delegating_parent(prompt: str = "child task", **kwargs: Any) -> Answer:
    """Delegates once on its user message; answers with what the tool returned."""

    def answer(request: ModelRequest) -> ModelResponse | str:
        message = request.messages[-1]
        if message.role == "tool":
            return f"parent saw: {message.content}"
        if any(m.role == "tool" for m in request.messages):
            return "noted"  # a task's result or a notice (maybe then the [Tasks] note)
        return delegate(prompt, **kwargs)

    return answer


def echo_child(request: ModelRequest) -> str:
    return f"child answer to {last(request)}"


@pytest.fixture
def build_kernel(tmp_path):
    def build(settings: str = "", extra_plugins: dict[str, object] | None = None):
        extra = "".join(f', "{name}"' for name in extra_plugins or {})
        path = write_profile(tmp_path, PROFILE.format(extra_plugins=extra, settings=settings))
        return make_kernel(path, {**PLUGINS, **(extra_plugins or {})})

    return build


@pytest.fixture
def kernel(build_kernel):
    return build_kernel()


@pytest.fixture
def build_runtime(build_kernel):
    def build(settings: str = "", extra_plugins: dict[str, object] | None = None) -> Runtime:
        return Runtime(build_kernel(settings, extra_plugins))

    return build


@pytest.fixture
def runtime(kernel) -> Runtime:
    return Runtime(kernel)


async def make_parent(kernel, model, store: SessionStore | None = None) -> Agent:
    return await compose_agent(kernel, store or MemoryStore(), model=model)


def tool_results(agent: Agent) -> list[str]:
    return [m.content for m in agent.messages if m.role == "tool"]


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class EchoTools:
    """An inline plugin with two tools the tool-filter tests can keep or drop."""

    @staticmethod
    def _tools():
        from tether.agents import Tool

        return [
            Tool("echo", "Echo the text.", lambda args, ctx: args.get("text", ""), safe=True),
            Tool("shout", "Echo it loudly.", lambda args, ctx: args.get("text", "").upper()),
        ]

    def __init__(self) -> None:
        import tether

        class Plugin:
            @tether.hookimpl
            def tether_tools(self):
                return EchoTools._tools()

        self.plugin = Plugin()


async def wait_for(predicate, timeout: float = 5.0) -> None:
    """Poll ``predicate()`` until it holds (for work that finishes in a background task);
    ``timeout`` is scaled by the suite's time scale."""
    import anyio

    with anyio.fail_after(scaled(timeout)):
        while not predicate():
            await anyio.sleep(0.005)
