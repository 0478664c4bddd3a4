"""The model of the agent the caller tests serve (``function:tests.a2a.peers.whoami:brain``),
over A2A (tests/a2a/test_serve_callers.py) and ACP (tests/acp/test_server_callers.py): it
answers with what its request shows it, so a test reads what context the caller got::

    skills: billing-playbook, house-style | subagents: invoices

``skills``: the names in the newest skill catalog of the conversation (the skill tool's
catalog message); ``subagents``: the names in the newest list of the declared subagents
offered to the current caller (the specialists' subagent list, docs/callers.md); ``-`` for
none.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from tether.models import ModelDelta, ModelRequest, ModelResponse

#: An entry of a catalog or a list: ``- `NAME`: description``.
_ENTRY = re.compile(r"^- `([a-z0-9_-]+)`:", re.MULTILINE)


def seen(request: ModelRequest) -> str:
    """What ``request`` shows: its newest skill catalog and subagent list."""
    skills: list[str] = []
    subagents: list[str] = []
    for message in request.messages:
        if message.role != "user":
            continue
        if "<available_skills>" in message.content:
            skills = _ENTRY.findall(message.content)
        elif "call_subagent" in message.content and "<system-reminder>" in message.content:
            subagents = _ENTRY.findall(message.content)
    return (
        f"skills: {', '.join(sorted(skills)) or '-'} | "
        f"subagents: {', '.join(sorted(subagents)) or '-'}"
    )


async def brain(request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse | str]:
    yield seen(request)
