"""tether-mcp-client: Model Context Protocol servers' tools as tether tools.

Servers are entries of ``[[plugin.mcp.servers]]`` in any scope layer: a ``command`` started over
stdio, or a ``url`` reached over streamable HTTP. Each server's tools become tether tools named
``SERVER__TOOL``, listed when an agent is composed (a tool source, see
:class:`tether.agents.ToolSource`) and fixed for its session. A server starts on first use (or
when the runtime opens, with ``start = "eager"``), is shared by every agent of the runtime that
sees the same entry, is restarted once if it dies, and stops with the runtime. docs/mcp.md has
the whole story.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tether
from tether.agents import PreStep, ToolSource

from ._capabilities import SAMPLING_DESCRIPTOR, ClientFeatures, record_sampling
from ._connection import LOG_LEVELS, Connection, ServerUnavailable
from ._results import render_result
from ._settings import SEPARATOR, RootsSettings, SamplingSettings, ServerSettings, Settings

if TYPE_CHECKING:
    import click

from ._source import (
    SERVERS,
    RuntimeServers,
    ServerSource,
    announce_changes,
    connection_for,
    connections,
    sources_for,
    tool_name,
)

__all__ = (
    "LOG_LEVELS",
    "NOTICE",
    "SAMPLING_DESCRIPTOR",
    "SAMPLING_USAGE",
    "SEPARATOR",
    "SERVERS",
    "ClientFeatures",
    "Connection",
    "McpPlugin",
    "RootsSettings",
    "RuntimeServers",
    "SamplingSettings",
    "ServerSettings",
    "ServerSource",
    "ServerUnavailable",
    "Settings",
    "announce_changes",
    "connection_for",
    "connections",
    "record_sampling",
    "render_result",
    "sources_for",
    "tool_name",
)

#: The change notice, one pre-step for every instance (an agent that sees two layers' instances
#: runs it once): it finds the servers an agent uses in its tools, and keeps what the agent saw
#: in the agent's runtime (:data:`SERVERS`), so it holds nothing itself.
NOTICE = PreStep("mcp-tool-changes", announce_changes)
#: Records the usage of the sampling requests an agent's calls answered (``mcp/sampling``
#: descriptors in its log, written before its next step).
SAMPLING_USAGE = PreStep("mcp-sampling", record_sampling)


class McpPlugin(tether.Plugin[Settings]):
    """The plugin ``mcp`` (a class-based plugin): one object per instance, holding one source
    per server entry of its settings. The runtime's listings are cached on the sources, so
    every agent composed from this instance shares them; the connections are the runtime's
    (:data:`SERVERS`), shared by every instance."""

    settings_model = Settings

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.sources: list[ToolSource] = sources_for(settings.servers)
        """One tool source per ``[[plugin.mcp.servers]]`` entry (nothing starts until used)."""

    @tether.hookimpl
    def tether_tool_sources(self) -> list[ToolSource]:
        return self.sources

    @tether.hookimpl
    def tether_pre_step(self) -> list[PreStep]:
        return [NOTICE, SAMPLING_USAGE] if self.settings.servers else []

    @staticmethod
    @tether.hookimpl
    def tether_cli_commands() -> list[click.Command]:
        """``tether mcp`` (declared in the entry points, group ``tether.commands``)."""
        from ._cli import mcp_group

        return [mcp_group]
