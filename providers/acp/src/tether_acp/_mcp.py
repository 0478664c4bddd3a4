"""The MCP servers an ACP client names in ``session/new`` and ``session/load`` (``mcpServers``),
as tool sources of that session's agent alone, through the tether-mcp-client plugin.

Each entry becomes a :class:`tether_mcp_client.ServerSettings`: a stdio entry (``name``,
``command``, ``args``, ``env`` as ``{name, value}`` pairs) starts ``command`` in the session's
``cwd``; an ``http`` entry (``name``, ``url``, ``headers`` as ``{name, value}`` pairs) is reached
over streamable HTTP. ``sse`` entries (and MCP-over-ACP ``acp`` entries) are skipped with a warning:
tether-mcp-client speaks neither. The model sees a server's tools as ``NAME__TOOL``: a name
tether-mcp-client refuses (ACP names are human-readable: ``"GitHub (work)"``) is made one
(``GitHub-work``), and a name nothing is left of, or two entries with one name, make the request
fail with "invalid params". A server that fails to start fails the compose (``TOOL_SOURCE_FAILED``),
so the request too.

tether-mcp-client is imported only when a client names servers; without it installed, they are
skipped with a warning (``uv add tether-mcp-client``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import acp
import pydantic
from acp.schema import AcpMcpServer, HttpMcpServer, McpServerStdio, SseMcpServer

if TYPE_CHECKING:
    from tether.agents import ToolSource
    from tether_mcp_client import ServerSettings

__all__ = ("OWNER", "client_tool_sources", "mcp_available")

log = logging.getLogger("tether.acp.mcp")

OWNER = "acp client"
"""Who offers these servers, in errors (``plugin "acp client", server "time"``)."""

_INVALID_PARAMS = -32602
#: The longest server name tether-mcp-client takes.
_MAX_NAME = 40


def mcp_available() -> bool:
    """Whether tether-mcp-client is installed (found, not imported: ``initialize`` stays cheap)."""
    import importlib.util

    return importlib.util.find_spec("tether_mcp_client") is not None


def client_tool_sources(servers: Iterable[object] | None, cwd: Path) -> list[ToolSource]:
    """Tool sources for the ``mcpServers`` of a ``session/new`` or ``session/load``
    (:mod:`acp.schema` models). An entry tether cannot take as given is an
    :class:`acp.RequestError` "invalid params" naming it."""
    entries = list(servers or ())
    if not entries:
        return []
    try:
        import tether_mcp_client
    except ImportError:
        log.warning(
            "the client offers %d MCP server(s) (%s); they are not used: tether-mcp-client is not"
            " installed (uv add tether-mcp-client)",
            len(entries),
            ", ".join(_shown_name(entry) for entry in entries),
        )
        return []
    settings: list[tether_mcp_client.ServerSettings] = []
    given: dict[str, str] = {}  # tether's name -> the name the client gave
    for entry in entries:
        usable = _usable(entry)
        if usable is None:
            continue
        original = usable.name
        name = _server_name(original)
        if name is None:
            raise _invalid(
                f"MCP server name {json.dumps(original[:200])} has no letter or digit tether"
                " can name its tools with",
                original,
            )
        if name in given:
            first = json.dumps(given[name][:200])
            raise _invalid(
                f"MCP server names {first} and {json.dumps(original[:200])} both name the"
                f' server "{name}" (its tools are {name}__TOOL); give them different names',
                original,
            )
        try:
            config = _settings(usable, name, cwd)
        except pydantic.ValidationError as exc:
            problems = "; ".join(error["msg"] for error in exc.errors())
            raise _invalid(
                f"MCP server {json.dumps(original[:200])}: {problems}", original
            ) from None
        if name != original:
            log.info(
                "MCP server %s is named %s here (its tools are %s__TOOL)",
                json.dumps(original[:200]),
                name,
                name,
            )
        given[name] = original
        settings.append(config)
    return tether_mcp_client.sources_for(settings, owner=OWNER)


def _usable(entry: object) -> McpServerStdio | HttpMcpServer | None:
    """``entry`` if tether-mcp-client can use it; ``None`` (with a warning) otherwise."""
    match entry:
        case McpServerStdio() | HttpMcpServer():
            return entry
        case SseMcpServer(name=name):
            log.warning(
                "MCP server %s is skipped: tether-mcp-client does not speak the SSE transport (use"
                " streamable HTTP or stdio)",
                json.dumps(name[:200]),
            )
        case AcpMcpServer(name=name):
            log.warning(
                "MCP server %s is skipped: tether does not take MCP over ACP",
                json.dumps(name[:200]),
            )
        case _:
            log.warning("an MCP server entry tether does not know is skipped: %r", entry)
    return None


def _settings(entry: McpServerStdio | HttpMcpServer, name: str, cwd: Path) -> ServerSettings:
    """The tether-mcp-client settings of one entry, named ``name``: a stdio server starts in the
    session's directory."""
    from tether_mcp_client import ServerSettings

    if isinstance(entry, McpServerStdio):
        return ServerSettings(
            name=name,
            command=entry.command,
            args=tuple(entry.args),
            env={variable.name: variable.value for variable in entry.env},
            cwd=cwd,
            expand_variables=False,  # the client's values, as it gave them
        )
    return ServerSettings(
        name=name,
        url=entry.url,
        headers={header.name: header.value for header in entry.headers},
        expand_variables=False,
    )


def _server_name(name: str) -> str | None:
    """``name`` as a tether-mcp-client server name: letters, digits, ``-`` and single ``_``,
    starting with a letter or digit, at most 40 characters (anything else becomes ``-``);
    ``None`` when nothing is left."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", name)
    cleaned = re.sub(r"_{2,}", "_", cleaned)
    cleaned = re.sub(r"-{2,}", "-", cleaned)
    cleaned = cleaned.strip("-_")[:_MAX_NAME].rstrip("-_")
    return cleaned or None


def _shown_name(entry: object) -> str:
    name = getattr(entry, "name", None)
    return json.dumps(name[:200]) if isinstance(name, str) else repr(entry)[:200]


def _invalid(message: str, name: str) -> acp.RequestError:
    return acp.RequestError(_INVALID_PARAMS, message, {"mcpServer": name[:200]})
