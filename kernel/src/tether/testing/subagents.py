"""Subagent test doubles that ship with tether, so plugin authors test delegation like we do.

:class:`LimitedProvider` is a real in-process provider (a fresh child, like spawn) that declares
only the capabilities it is given. It is also an inline plugin: list it in a profile under its
name and it registers itself through ``tether_subagent_providers`` and offers exactly those
capabilities through ``tether_offers``, so the load-time negotiation of a delegation tool and
``SubagentRuntime.start`` both reject what it does not declare::

    kernel = make_kernel(path, {"limited": LimitedProvider(), "subagent": tether_subagent_tools})
"""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..loading import Offer
from ..subagents import CAPABILITIES, SubagentCapabilities, SubagentStartRequest
from ..subagents.local import LocalChildRun, start_local_child

__all__ = ("LimitedProvider",)


class LimitedProvider:
    """An in-process provider with only the capabilities it is given (none by default)."""

    inherits_parent_context = False

    def __init__(
        self, name: str = "limited", capabilities: SubagentCapabilities | None = None
    ) -> None:
        self.name = name
        self.capabilities = capabilities or SubagentCapabilities()
        self.started: list[SubagentStartRequest] = []
        """Every request that reached :meth:`start` (a rejected start never does)."""

    async def start(self, request: SubagentStartRequest) -> LocalChildRun:
        self.started.append(request)
        return await start_local_child(request, provider=self.name)

    @hookimpl
    def tether_subagent_providers(self) -> list[LimitedProvider]:
        return [self]

    @hookimpl
    def tether_offers(self) -> list[Offer]:
        declared = frozenset(c for c in CAPABILITIES if getattr(self.capabilities, c))
        return [Offer(kind="subagent provider", capabilities=declared)]
