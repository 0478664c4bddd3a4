"""Helpers for the tether-files tests: a real profile loading the plugin, a scripted run of
tool calls over a real folder, the tool results the model read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import tether_files
from tether.agents import Agent
from tether.models import FunctionModel, Message, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import SQLiteStore

PROFILE = """
[tether]
plugins = ["files"]
{tether}

[plugin.files]
{settings}

[agent.main]
{agent}
"""


def call(name: str, number: int = 0, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"c{number}", name=name, arguments=arguments)


@dataclass
class Run:
    """One scripted session: the agent, its workspace and what its tools answered."""

    agent: Agent
    root: Path
    results: list[Message] = field(default_factory=list[Message])

    @property
    def texts(self) -> list[str]:
        return [m.content for m in self.results]


@pytest.fixture
def files_run(tether_kernel, tmp_path: Path):
    """``await files_run(calls, settings="...", prepare=fn)``: one turn whose first step makes
    ``calls`` (each its own step when ``steps``), then answers "done". ``prepare(root)`` fills
    the workspace before the run (the workspace is the agent's, however it is made)."""

    async def run(
        calls: Sequence[ToolCall],
        *,
        settings: str = "",
        agent: str = "",
        prepare: Callable[[Path], None] | None = None,
        host: Any = None,
        steps: bool = True,
        workspace: Path | None = None,
        tether: str = "",
        cwd: bool = True,
    ) -> Run:
        """``cwd``: compose the agent with the workspace folder as its working folder (a
        ``project`` workspace); else it gets the profile's (``tether``: ``[tether]`` keys)."""
        kernel = tether_kernel(
            PROFILE.format(settings=settings, agent=agent, tether=tether),
            {"files": tether_files.FilesPlugin},
        )
        queue: list[ModelResponse | str] = (
            [ModelResponse(tool_calls=(c,), finish_reason="tool_calls") for c in calls]
            if steps
            else [ModelResponse(tool_calls=tuple(calls), finish_reason="tool_calls")]
        )

        def answer(request: ModelRequest) -> ModelResponse | str:
            return queue.pop(0) if queue else "done"

        folder = workspace if workspace is not None else tmp_path / "workspace"
        folder.mkdir(exist_ok=True)
        store = SQLiteStore(tmp_path / "sessions.db")
        try:
            runtime = Runtime(kernel, store, permission_host=host)
            agent_ = await runtime.compose(model=FunctionModel(answer), cwd=folder if cwd else None)
            root = agent_.workspace.root
            if prepare is not None:
                prepare(root)
            async with agent_:
                await agent_.run("go")
        finally:
            await store.aclose()
        return Run(agent_, root, [m for m in agent_.messages if m.role == "tool"])

    return run
