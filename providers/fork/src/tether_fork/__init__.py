"""tether-fork: an in-process child that starts from the parent's completed turns."""

from __future__ import annotations

from collections.abc import Sequence

import tether
from tether.agents import Agent
from tether.store import Event
from tether.store.replay import fold
from tether.subagents import SubagentStartRequest
from tether.subagents.local import LocalChildProvider

__all__ = ("ForkProvider", "fork_seed")


async def fork_seed(parent: Agent) -> list[Event]:
    """The parent's events through its last ``turn/end``: the turn that is delegating is still
    running, so only completed turns are copied."""
    log = [stored.event for stored in await parent.store.events(parent.session_id)]
    return log[: fold(log).completed]


class ForkProvider(LocalChildProvider):
    """Seeds the child with the parent's events through its last ``turn/end``, and keeps the
    parent's tool list byte-identical (a tool filter is enforced at call time), so the child's
    first request starts with the parent's prefix. The child works in its parent's workspace
    (its history speaks of those files), unless its request says otherwise."""

    name = "fork"
    inherits_parent_context = True
    keep_tool_list = True
    shares_workspace = True

    async def seed(self, request: SubagentStartRequest) -> Sequence[Event]:
        return await fork_seed(request.parent)


@tether.hookimpl
def tether_subagent_providers() -> list[ForkProvider]:
    return [ForkProvider()]
