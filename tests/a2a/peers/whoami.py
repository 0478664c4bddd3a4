"""The model of the agent the caller tests serve (``function:tests.a2a.peers.whoami:brain``),
over A2A (tests/a2a/test_serve_callers.py) and ACP (tests/acp/test_server_callers.py): it
answers with what its request shows it, so a test reads what context the caller got::

    skills: billing-playbook | tools: invoices, load_skill, task_wait

``skills``: the names in the last skill catalog of the conversation (the skill tool's catalog
message), ``-`` for none; ``tools``: the names of the request's tools (a declared subagent is
a tool named after it), ``-`` for none.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from tether.models import ModelDelta, ModelRequest, ModelResponse

#: A catalog entry: ``- `NAME`: description``.
_ENTRY = re.compile(r"^- `([a-z0-9-]+)`:", re.MULTILINE)


def seen(request: ModelRequest) -> str:
    """What ``request`` shows: its last skill catalog and its tools."""
    skills: list[str] = []
    for message in request.messages:
        if message.role == "user" and "<available_skills>" in message.content:
            skills = _ENTRY.findall(message.content)
    tools = sorted(tool.name for tool in request.tools)
    return f"skills: {', '.join(sorted(skills)) or '-'} | tools: {', '.join(tools) or '-'}"


async def brain(request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse | str]:
    yield seen(request)
