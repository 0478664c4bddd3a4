"""The provider of declared subagents: a child of the subagent's own agent preset."""

from __future__ import annotations

from ..subagents import SubagentCapabilities
from ..subagents.local import LocalChildProvider

__all__ = ("SPECIALIST_PROVIDER", "SpecialistProvider")

#: The provider name recorded for declared subagents' children.
SPECIALIST_PROVIDER = "tether.specialist"


class SpecialistProvider(LocalChildProvider):
    """Starts a declared subagent: a child of its own agent preset (the request's ``agent``),
    with its own instructions, tools, model and limits. The built-in plugin
    ``tether.specialists`` offers it to every profile that declares subagents."""

    name = SPECIALIST_PROVIDER
    capabilities = SubagentCapabilities(
        output_schema=True, depth_limit=True, tool_filter=False, persona=False, continuable=True
    )
