"""tether-spawn: a fresh child agent per delegation (in this process, or on the runtime's child
host: a cluster's worker)."""

from __future__ import annotations

import tether
from tether.subagents import (
    ContinuablePlan,
    HostedChildRun,
    LocalChildRun,
    SubagentCapabilities,
    SubagentStartRequest,
    start_child,
)

__all__ = ("SpawnProvider",)


class SpawnProvider:
    """Starts a child of the parent's preset with no parent history."""

    name = "spawn"
    capabilities = SubagentCapabilities(
        output_schema=True, depth_limit=True, tool_filter=True, persona=True, continuable=True
    )
    inherits_parent_context = False

    async def start(self, request: SubagentStartRequest) -> LocalChildRun | HostedChildRun:
        return await start_child(request, provider=self.name)

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        return ContinuablePlan()


@tether.hookimpl
def tether_subagent_providers() -> list[SpawnProvider]:
    return [SpawnProvider()]
