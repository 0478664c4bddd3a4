"""``tether_preset_tools``: a plugin offers tools to one agent by what its preset declares; the
runtime puts them in a layer of their own, nearest of all, when it builds the preset."""

from __future__ import annotations

import pytest

import tether
from tether.agents import AgentPreset, Tool
from tether.errors import AgentError, ErrorCode, PluginError
from tether.runtime import Runtime

PROFILE = """
[tether]
plugins = ["per-agent"]

[agent.main]
description = "The agent a person talks to."

[agent.helper]
description = "Helps."
"""


def _tool(name: str) -> Tool:
    return Tool(name, f"The {name} tool.", lambda arguments, context: name)


class PerAgent:
    """Offers ``notes_<agent>`` to every agent but ``helper``, and remembers what it saw."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    @tether.hookimpl
    def tether_preset_tools(self, preset: AgentPreset) -> list[Tool]:
        self.seen.append(preset.name)
        return [] if preset.name == "helper" else [_tool(f"notes_{preset.name}")]


def test_hook_tether_preset_tools_offers_tools_to_one_agent_by_its_preset(tether_kernel):
    plugin = PerAgent()
    runtime = Runtime(tether_kernel(PROFILE, {"per-agent": plugin}))
    main = runtime.preset("main")
    assert main.tools.names() == ["notes_main"]
    assert main.tool_layers[0] == (("per-agent", main.tools.get("notes_main")),)
    assert len(main.tool_sources) == len(main.tool_layers)  # a source layer goes with it
    assert runtime.preset("helper").tools.names() == []
    assert runtime.preset("main") is main  # built once per runtime
    assert plugin.seen == ["main", "helper"]


def test_hook_tether_preset_tools_may_not_hide_another_tool_of_the_agent(tether_kernel):
    class Global:
        @tether.hookimpl
        def tether_tools(self) -> list[Tool]:
            return [_tool("notes_main")]

    profile = PROFILE.replace('plugins = ["per-agent"]', 'plugins = ["global", "per-agent"]')
    runtime = Runtime(tether_kernel(profile, {"per-agent": PerAgent(), "global": Global()}))
    with pytest.raises(AgentError) as caught:
        runtime.preset("main")
    assert caught.value.code is ErrorCode.TOOL_INVALID
    assert caught.value.message == (
        'tool "notes_main" that plugin "per-agent" offers agent "main" collides with the tool '
        'of plugin "global" of that name'
    )
    assert caught.value.plugin == "per-agent"


def test_hook_tether_preset_tools_lists_a_tool_the_agent_has_already_once(tether_kernel):
    shared = _tool("task_wait")

    class Both:
        @tether.hookimpl
        def tether_tools(self) -> list[Tool]:
            return [shared]

        @tether.hookimpl
        def tether_preset_tools(self, preset: AgentPreset) -> list[Tool]:
            return [shared, _tool("own")]

    profile = PROFILE.replace('plugins = ["per-agent"]', 'plugins = ["both"]')
    runtime = Runtime(tether_kernel(profile, {"both": Both()}))
    preset = runtime.preset("main")
    assert preset.tools.names() == ["own", "task_wait"]
    assert [tool.name for _, tool in preset.tool_layers[0]] == ["own"]


def test_hook_tether_preset_tools_returning_no_tools_breaks_the_contract(tether_kernel):
    class Loose:
        @tether.hookimpl
        def tether_preset_tools(self, preset: AgentPreset) -> object:
            return {"name": "loose"}

    profile = PROFILE.replace('plugins = ["per-agent"]', 'plugins = ["loose"]')
    runtime = Runtime(tether_kernel(profile, {"loose": Loose()}))
    with pytest.raises(PluginError) as caught:
        runtime.preset("main")
    assert caught.value.code is ErrorCode.PLUGIN_CONTRACT_VIOLATION
    assert "broke the contract of tether_preset_tools: expected an iterable of Tool, got dict" in (
        caught.value.message
    )


def test_hook_tether_preset_tools_is_asked_of_the_agents_own_layer_too(tether_kernel):
    plugin = PerAgent()
    profile = PROFILE.replace('plugins = ["per-agent"]', "plugins = []").replace(
        "[agent.main]\n", '[agent.main]\nplugins = ["per-agent"]\n'
    )
    runtime = Runtime(tether_kernel(profile, {"per-agent": plugin}))
    assert runtime.preset("main").tools.names() == ["notes_main"]
    assert runtime.preset("helper").tools.names() == []
    assert plugin.seen == ["main"]  # helper's scope does not see main's layer
