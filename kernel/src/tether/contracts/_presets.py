"""What a plugin is shown of an agent preset (``tether_preset_tools``): its name, its declared
subagents and the tools the plugins offer it, read-only. The preset itself
(:class:`tether.agents.AgentPreset`, which builds agents) has these members and more."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ._callers import Caller, CallerRule
from ._tools import Tool, ToolSource

__all__ = ("PresetView", "SourceLayer", "Specialist", "ToolLayer")

#: One scope layer's tools, as ``(plugin name, tool)`` in profile order.
ToolLayer = tuple[tuple[str, Tool], ...]
#: One scope layer's tool sources, as ``(plugin name, source)`` in profile order.
SourceLayer = tuple[tuple[str, ToolSource], ...]


@dataclass(frozen=True)
class Specialist:
    """A declared subagent of an agent: another agent of the profile, offered as a tool."""

    tool_name: str
    """The tool the parent's model calls (the subagent's folder name, or its ``tool_name``)."""
    agent: str
    """The agent preset the child is."""
    description: str
    """What the parent's model reads to decide when to delegate (required)."""
    visibility: bool | Literal["deferred"] = True
    """``True``: a listed tool; ``"deferred"``: found through ``find_subagents``; ``False``:
    hidden (no tool; code may still start it)."""
    when: CallerRule | None = None
    """Offered only while the parent's current caller matches (the subagent's ``[agent.NAME]
    when``, docs/callers.md); ``None``: to every caller."""

    def offered_to(self, caller: Caller | None) -> bool:
        """Whether a parent running for ``caller`` may use this subagent."""
        return self.when is None or self.when.admits(caller)


class PresetView(Protocol):
    """An agent preset as a plugin's ``tether_preset_tools`` reads it."""

    @property
    def name(self) -> str | None:
        """The agent's name (``None`` for the profile's unnamed agent)."""
        ...

    @property
    def model_spec(self) -> str | None:
        """The agent's model spec, when the profile names one."""
        ...

    @property
    def specialists(self) -> tuple[Specialist, ...]:
        """The agent's declared subagents, in declaration order."""
        ...

    @property
    def tool_layers(self) -> tuple[ToolLayer, ...]:
        """The plugins' tools per scope layer, nearest first."""
        ...
