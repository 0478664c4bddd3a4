"""A local plugin of the served agent in tether-a2a's tests: ``publish``, a tool that needs
approval (so a served turn asks, and its task goes input-required); and ``a2a_message_id``,
which says the A2A message id of the task its turn runs (read from the session's log, where
``tether a2a serve`` records each task when it is created), for the conformance kit's run: the
kit scripts its agent by message ids, which a model never sees
(:mod:`tests.a2a.peers.served`)."""

from __future__ import annotations

from typing import Any

import anyio

import tether
from tether.agents import Tool
from tether.store import DescriptorEvent


def _publish(arguments: dict[str, Any], context: Any) -> str:
    return f"published {arguments['what']}"


async def _message_id(arguments: dict[str, Any], context: Any) -> str:
    """The id of the message that created the session's newest task that has not ended."""
    agent = context.agent
    for _ in range(50):  # the task is recorded as its turn starts: wait for it, briefly
        found = ""
        for stored in await agent.store.events(agent.session_id):
            event = stored.event
            if isinstance(event, DescriptorEvent) and event.kind == "a2a/task":
                task = event.data.get("task", {})
                history = task.get("history") or [{}]
                found = history[0].get("messageId", "")
        if found:
            return found
        await anyio.sleep(0.02)
    return "unknown"


@tether.hookimpl
def tether_tools() -> list[Tool]:
    parameters = {"type": "object", "properties": {"what": {"type": "string"}}}
    return [
        Tool("publish", "Publish something.", _publish, parameters, needs_approval=True),
        Tool("a2a_message_id", "The A2A message id of this task.", _message_id, safe=True),
    ]
