"""tether-spawn: a fresh child agent per delegation (in this process, or on the runtime's child
host: a cluster's worker)."""

from __future__ import annotations

import tether
from tether.subagents.local import LocalChildProvider

__all__ = ("SpawnProvider",)


class SpawnProvider(LocalChildProvider):
    """Starts a child of the parent's preset with no parent history."""

    name = "spawn"


@tether.hookimpl
def tether_subagent_providers() -> list[SpawnProvider]:
    return [SpawnProvider()]
