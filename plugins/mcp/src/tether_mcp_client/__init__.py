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

import weakref
from typing import TYPE_CHECKING

import tether
from tether.agents import PreStep, ToolSource

from ._connection import Connection, ServerUnavailable
from ._results import render_result
from ._settings import SEPARATOR, ServerSettings, Settings

if TYPE_CHECKING:
    import click

from ._source import ChangeNotice, ServerSource, connection_for, connections, sources_for, tool_name

__all__ = (
    "SEPARATOR",
    "Connection",
    "ServerSettings",
    "ServerSource",
    "ServerUnavailable",
    "Settings",
    "connection_for",
    "connections",
    "render_result",
    "sources_for",
    "tool_name",
)

#: One change notice for every agent: it finds the servers an agent uses in its tools.
_NOTICE = PreStep("mcp-tool-changes", ChangeNotice())

_sources: dict[int, list[ToolSource]] = {}


def _for(settings: Settings) -> list[ToolSource]:
    """One source per server entry of a settings object (one plugin instance), kept with it:
    the runtime's listings are cached on them."""
    found = _sources.get(id(settings))
    if found is None:
        found = _sources[id(settings)] = sources_for(settings.servers)
        weakref.finalize(settings, _sources.pop, id(settings), None)
    return found


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_tool_sources(settings: Settings) -> list[ToolSource]:
    return _for(settings)


@tether.hookimpl
def tether_pre_step(settings: Settings) -> list[PreStep]:
    return [_NOTICE] if settings.servers else []


@tether.hookimpl
def tether_cli_commands() -> list[click.Command]:
    """``tether mcp`` (declared in the entry points, group ``tether.commands``)."""
    from ._cli import mcp_group

    return [mcp_group]
