"""A local plugin of the served agent in tether-a2a's tests: ``publish``, a tool that needs
approval (so a served turn asks, and its task goes input-required)."""

from __future__ import annotations

from typing import Any

import tether
from tether.agents import Tool


def _publish(arguments: dict[str, Any], context: Any) -> str:
    return f"published {arguments['what']}"


@tether.hookimpl
def tether_tools() -> list[Tool]:
    parameters = {"type": "object", "properties": {"what": {"type": "string"}}}
    return [Tool("publish", "Publish something.", _publish, parameters, needs_approval=True)]
