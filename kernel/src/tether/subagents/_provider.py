"""The one skeleton of a provider whose children are agents of this profile.

spawn, fork and the declared subagents' provider differ only in their name, what they declare,
and what a child starts from (a seed of events, the parent's tool list kept as it is); starting
a one-shot child and planning a continuable one are the same for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..contracts import ContinuablePlan, SubagentCapabilities, SubagentStartRequest

if TYPE_CHECKING:
    from ..store import Event
    from ._child import LocalChildRun
    from ._hosted import HostedChildRun

__all__ = ("ALL_CAPABILITIES", "LocalChildProvider")

#: What a provider of local children can enforce: every capability, continuable children too.
ALL_CAPABILITIES = SubagentCapabilities(
    output_schema=True, depth_limit=True, tool_filter=True, persona=True, continuable=True
)


class LocalChildProvider:
    """A subagent provider whose children are agents of this profile, started with
    :func:`tether.subagents.local.start_child` (in this process, or on the runtime's child
    host) and continuable.

    A subclass sets :attr:`name` and, where it differs, :attr:`capabilities`,
    :attr:`inherits_parent_context`, :attr:`keep_tool_list` and :attr:`shares_workspace`, and
    overrides :meth:`seed`
    when its children start from events of their own (a fork's copy of the parent's turns).
    """

    name: str
    """The provider's name, unique in the profile (``[plugin.subagent] provider = NAME``)."""
    capabilities: SubagentCapabilities = ALL_CAPABILITIES
    """What it enforces: everything, unless a subclass declares less."""
    inherits_parent_context: bool = False
    """Descriptive: whether a child starts from the parent's history (:meth:`seed`)."""
    keep_tool_list: bool = False
    """Keep the parent's tool list byte-identical (a prompt cache reuses its prefix) and
    enforce a tool filter at call time instead of removing tools."""
    shares_workspace: bool = False
    """A child works in its parent's workspace unless its request says otherwise (a fork);
    by default it gets a workspace of its own (docs/workspaces.md)."""

    def __init__(self) -> None:
        if not isinstance(getattr(self, "name", None), str):
            raise TypeError(
                f"{type(self).__name__} sets no provider name: give the class a name = "
                '"NAME" attribute (a subclass of LocalChildProvider names itself)'
            )

    async def seed(self, request: SubagentStartRequest) -> Sequence[Event]:
        """The events the child's session starts with (none by default)."""
        return ()

    async def start(self, request: SubagentStartRequest) -> LocalChildRun | HostedChildRun:
        """Start a one-shot child where the parent's runtime runs children."""
        from ._hosted import start_child

        seed = await self.seed(request)
        return await start_child(
            request, provider=self.name, seed=seed, keep_tool_list=self.keep_tool_list
        )

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        """What a continuable child is composed with: the same seed and tool list."""
        return ContinuablePlan(seed=await self.seed(request), keep_tool_list=self.keep_tool_list)
