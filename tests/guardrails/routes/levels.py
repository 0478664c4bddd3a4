"""The model of the remote tethers in the route tests (``function:levels:answer``): each level
delegates to the next through the ``subagent`` tool until level 3, which answers with a secret;
each level above passes on what it read."""

from __future__ import annotations

import re

from tether.models import ModelRequest, ModelResponse, ToolCall


def level_of(request: ModelRequest) -> int:
    found = [re.search(r"level (\d)", m.content) for m in request.messages if m.role == "user"]
    return max((int(m.group(1)) for m in found if m), default=0)


def answer(request: ModelRequest) -> ModelResponse | str:
    last = request.messages[-1]
    level = level_of(request)
    if last.role == "tool":
        return f"level {level} read: {last.content}"
    if level >= 3:
        return "found SECRET-42"
    call = ToolCall(
        id=f"d{level}",
        name="subagent",
        arguments={"description": "go deeper", "prompt": f"level {level + 1}"},
    )
    return ModelResponse(tool_calls=(call,))
