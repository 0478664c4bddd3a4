"""tether-fork: an in-process child that starts from the parent's completed turns."""

from __future__ import annotations

import tether
from tether.agents import Agent
from tether.store import Event
from tether.store.replay import fold
from tether.subagents import (
    ContinuablePlan,
    HostedChildRun,
    LocalChildRun,
    SubagentCapabilities,
    SubagentStartRequest,
    start_child,
)

__all__ = ("ForkProvider", "fork_seed")


async def fork_seed(parent: Agent) -> list[Event]:
    """The parent's events through its last ``turn/end``: the turn that is delegating is still
    running, so only completed turns are copied."""
    log = [stored.event for stored in await parent.store.events(parent.session_id)]
    return log[: fold(log).completed]


class ForkProvider:
    """Seeds the child with the parent's events through its last ``turn/end``."""

    name = "fork"
    capabilities = SubagentCapabilities(
        output_schema=True, depth_limit=True, tool_filter=True, persona=True, continuable=True
    )
    inherits_parent_context = True

    async def start(self, request: SubagentStartRequest) -> LocalChildRun | HostedChildRun:
        seed = await fork_seed(request.parent)
        return await start_child(request, provider=self.name, seed=seed, keep_tool_list=True)

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        return ContinuablePlan(seed=await fork_seed(request.parent), keep_tool_list=True)


@tether.hookimpl
def tether_subagent_providers() -> list[ForkProvider]:
    return [ForkProvider()]
