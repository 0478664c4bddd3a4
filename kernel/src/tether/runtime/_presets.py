"""What plugins add to one agent's preset once it is built: ``tether_preset_tools``."""

from __future__ import annotations

import dataclasses

from ..agents import AgentPreset, Tool, ToolRegistry
from ..errors import AgentError, ErrorCode
from ..ground import format_loc

__all__ = ("with_preset_tools",)


def with_preset_tools(preset: AgentPreset) -> AgentPreset:
    """``preset`` with the tools the plugins visible from its scope offer it through
    ``tether_preset_tools`` in a layer of their own, nearest of all (``preset`` itself when
    they offer none). A tool object the preset has already is left out; a name another of its
    tools has is ``TOOL_INVALID``: such a tool would hide that one, and no winner is picked."""
    offered = [
        (plugin.name, tool)
        for plugin in preset.scope.visible_plugins()
        if plugin.implements("tether_preset_tools")
        for tool in plugin.collect("tether_preset_tools", Tool, preset=preset)
    ]
    if not offered:
        return preset
    held = {tool.name: (owner, tool) for layer in preset.tool_layers for owner, tool in layer}
    own: list[tuple[str, Tool]] = []
    for plugin, tool in offered:
        owner, other = held.get(tool.name, (None, None))
        if other is tool:
            continue  # offered by a plugin of the profile too (the task tools): listed once
        if other is not None:
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'tool "{tool.name}" that plugin "{plugin}" offers agent "{preset.name}" '
                f'collides with the tool of plugin "{owner}" of that name',
                key=format_loc(("agent", str(preset.name)), ()),
                plugin=plugin,
                remedy="rename one of the tools, or remove one of the plugins from the scope",
            )
        own.append((plugin, tool))
    layers = (tuple(own), *preset.tool_layers)
    return dataclasses.replace(
        preset,
        tools=ToolRegistry.from_layers(layers),  # two instances offering one name: TOOL_INVALID
        tool_layers=layers,
        tool_sources=((), *preset.tool_sources),
    )
