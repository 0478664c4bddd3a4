"""tether-spawn: a fresh in-process child agent per delegation."""

from __future__ import annotations

import tether
from tether.subagents import (
    ContinuablePlan,
    LocalChildRun,
    SubagentCapabilities,
    SubagentStartRequest,
    start_local_child,
)

__all__ = ("SpawnProvider",)


class SpawnProvider:
    """Starts a child of the parent's preset with no parent history."""

    name = "spawn"
    capabilities = SubagentCapabilities(
        output_schema=True, depth_limit=True, tool_filter=True, persona=True, continuable=True
    )
    inherits_parent_context = False

    async def start(self, request: SubagentStartRequest) -> LocalChildRun:
        return await start_local_child(request, provider=self.name)

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        return ContinuablePlan()


@tether.hookimpl
def tether_subagent_providers() -> list[SpawnProvider]:
    return [SpawnProvider()]
