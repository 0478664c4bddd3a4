"""A profile of table agents with declared subagents, each on its own ``function:`` model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tether_spawn
import tether_subagent_tools
from tether.models import ModelResponse, ToolCall
from tether.testing import write_profile

from . import brains

PLUGINS: dict[str, object] = {
    "spawn": tether_spawn,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
}

PROFILE = """
[tether]
plugins = [{plugins}]
store = "{store}"

[agent.main]
model = "function:tests.specialists.brains:main"
instructions = "main.md"
subagents = [{subagents}]

[agent.writer]
description = "Writes short texts on request."
model = "function:tests.specialists.brains:writer"
instructions = "writer.md"

[agent.reviewer]
description = "Reviews a text and says what to fix."
model = "function:tests.specialists.brains:reviewer"
{extra}
"""


@pytest.fixture(autouse=True)
def roles() -> Iterator[dict[str, Any]]:
    brains.ROLES.clear()
    brains.REQUESTS.clear()
    yield brains.ROLES
    brains.ROLES.clear()
    brains.REQUESTS.clear()


def profile(
    folder: Path,
    *,
    subagents: tuple[str, ...] = ("writer", "reviewer"),
    plugins: tuple[str, ...] = (),
    store: str = "sqlite:sessions.db",
    extra: str = "",
) -> Path:
    (folder / "main.md").write_text("You run the show.\n")
    (folder / "writer.md").write_text("You write.\n")
    return write_profile(
        folder,
        PROFILE.format(
            plugins=", ".join(f'"{p}"' for p in plugins),
            store=store,
            subagents=", ".join(f'"{s}"' for s in subagents),
            extra=extra,
        ),
    )


def call(name: str, call_id: str = "c1", **arguments: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),),
        finish_reason="tool_calls",
    )
