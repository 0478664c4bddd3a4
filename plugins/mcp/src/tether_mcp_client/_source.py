"""Each server entry as a tether tool source, its tools as tether tools, and the change notice.

A server's tools become tools named ``SERVER__TOOL`` (see docs/mcp.md), with the server's JSON
Schema as their parameters, checked by tether before a call is sent. The tools are built once
per listing of the server: composing an agent against a warm server costs a lookup.

What lives as long as a runtime is the runtime's (:data:`SERVERS`, through
:meth:`tether.runtime.Runtime.state`): its connections, one per distinct server, shared by every
plugin instance (every layer), every agent and every ``tether acp`` session of the runtime, and
what each agent was told of its servers' tools. The module keeps no state of its own.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.types import Tool as McpTool

from tether.agents import StepContext, Tool, ToolContext, ToolError, ToolSource
from tether.errors import AgentError, ErrorCode, TetherError
from tether.models import Message
from tether.runtime import StateKey

from ._capabilities import Sampled
from ._connection import Connection, ServerUnavailable
from ._results import render_result
from ._settings import SEPARATOR, ServerSettings

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.runtime import Runtime

__all__ = (
    "SERVERS",
    "RuntimeServers",
    "ServerSource",
    "announce_changes",
    "connection_for",
    "connections",
    "sources_for",
    "tool_name",
)

#: What model APIs accept as a tool name (OpenAI's and Anthropic's rule).
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class RuntimeServers:
    """tether-mcp-client's state in one runtime (:data:`SERVERS`): the connections, and what
    each agent was told of its servers' tools (:func:`announce_changes`). Closed with the
    runtime: a server not stopped by then (one never started) is marked stopped, so a later
    call fails instead of starting a process per request."""

    def __init__(self) -> None:
        self.connections: dict[tuple[object, ...], Connection] = {}
        """By :meth:`ServerSettings.connection_key` and timeouts."""
        self.seen: weakref.WeakKeyDictionary[Agent, dict[Connection, _Seen]] = (
            weakref.WeakKeyDictionary()
        )
        """Per agent (held weakly: it goes with the agent), its servers as it last saw them."""
        self.sampled: weakref.WeakKeyDictionary[Agent, list[Sampled]] = weakref.WeakKeyDictionary()
        """Per agent, the sampling requests its calls answered that its log does not hold yet
        (:func:`record_sampling` writes them at its next step)."""

    async def aclose(self) -> None:
        """Mark every connection stopped (their owner tasks, in the runtime's task group,
        have stopped the servers by now), and release the models they sampled with."""
        for connection in self.connections.values():
            connection.close()
            await connection.features.aclose()


#: Where the runtime keeps tether-mcp-client's state.
SERVERS: StateKey[RuntimeServers] = StateKey(
    "tether-mcp-client servers", lambda runtime: RuntimeServers()
)


def connection_for(runtime: Runtime, config: ServerSettings) -> Connection:
    """The runtime's connection to the server ``config`` starts or reaches: one per distinct
    way of starting it, shared by every entry (in any layer) that starts it the same way."""
    pool = runtime.state(SERVERS).connections
    key = (
        *config.connection_key(),
        config.startup_timeout,
        config.timeout,
        config.call_cap,
        config.log_level,
    )
    connection = pool.get(key)
    if connection is None:
        connection = pool[key] = Connection(config, runtime)
    return connection


def connections(runtime: Runtime) -> list[Connection]:
    """The runtime's connections so far."""
    return list(runtime.state(SERVERS).connections.values())


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``."""
    return f"{server}{SEPARATOR}{tool}"


@dataclass(frozen=True, eq=False)
class McpCall:
    """What runs when the model calls one MCP tool."""

    connection: Connection
    config: ServerSettings
    """The entry the tool was built for (its name and filters; the connection may be shared
    by another entry of the same name in another layer)."""
    tool: str
    label: str
    max_chars: int
    max_image_bytes: int
    listing: tuple[McpTool, ...] = field(repr=False)
    """The server's listing the tool was built from (what the change notice compares)."""
    version: int = 0
    as_task: bool = False
    """The server requires the tool to run as a task (``execution.taskSupport: required``)."""

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """The tool's function (a coroutine function, so tether awaits it on the loop)."""
        refused: list[str] = []
        result = await self.connection.call(
            self.tool,
            arguments,
            context.agent,
            refused=refused,
            on_progress=context.progress,
            as_task=self.as_task,
        )
        try:
            return render_result(
                result,
                max_chars=self.max_chars,
                label=self.label,
                max_image_bytes=self.max_image_bytes,
            )
        except ToolError as exc:
            if not refused:
                raise
            # The server's words, then what tether refused it (why the tool failed).
            raise ToolError(f"{exc} [tether refused the server {'; '.join(refused)}]") from None


class ServerSource:
    """One server entry of one plugin instance, as a :class:`tether.agents.ToolSource`."""

    def __init__(self, config: ServerSettings, owner: str = "mcp") -> None:
        self.config = config
        self._owner = owner
        self._built: weakref.WeakKeyDictionary[
            Runtime, tuple[tuple[McpTool, ...], tuple[Tool, ...]]
        ] = weakref.WeakKeyDictionary()
        self.source = ToolSource(
            name=f"mcp:{config.name}",
            list_tools=self.list_tools,
            eager=config.start == "eager",
            description=_describe(config),
        )

    async def list_tools(self, runtime: Runtime) -> tuple[Tool, ...]:
        """The entry's tools as tether tools, starting the server when needed."""
        connection = connection_for(runtime, self.config)
        try:
            listing = await connection.tools()
        except ServerUnavailable as exc:
            raise AgentError(
                ErrorCode.TOOL_SOURCE_FAILED,
                str(exc),
                plugin=self._owner,
                where=f'plugin "{self._owner}", server "{self.config.name}"',
                remedy="fix the server's command, url or settings; `tether mcp list` shows "
                "every server's status"
                if self._owner == "mcp"
                else "fix the server's command, url or settings",
            ) from None
        built = self._built.get(runtime)
        if built is not None and built[0] is listing:
            return built[1]
        tools = build_tools(self.config, connection, listing)
        self._built[runtime] = (listing, tools)
        return tools


def sources_for(servers: Iterable[ServerSettings], owner: str = "mcp") -> list[ToolSource]:
    """Tool sources for ``servers`` (what ``tether acp`` gives a session's agent for the MCP
    servers its client names)."""
    return [ServerSource(config, owner).source for config in servers]


def build_tools(
    config: ServerSettings, connection: Connection, listing: tuple[McpTool, ...]
) -> tuple[Tool, ...]:
    """``listing``'s tools as tether tools, filtered and named by ``config``."""
    offered = [tool.name for tool in listing]
    if connection.version == 0:
        # A misspelling shows in the server's first listing; a tool it drops later (a
        # list_changed) leaves its name in the settings, which must not stop every compose.
        _check_names(config, offered)
    tools: list[Tool] = []
    for remote in listing:
        if config.include is not None and remote.name not in config.include:
            continue
        if remote.name in config.exclude:
            continue
        name = tool_name(config.name, remote.name)
        if not _TOOL_NAME.match(name):
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'the MCP server "{config.name}" offers the tool {remote.name!r}, whose tether '
                f"name {name!r} is not one model APIs accept (1-64 letters, digits, '_' or '-')",
                where=f'server "{config.name}"',
                remedy=f'leave it out (exclude = ["{remote.name}"]) or give the server a '
                "shorter name",
            )
        annotations = remote.annotations
        read_only = annotations is not None and annotations.read_only_hint is True
        # A read-only tool is idempotent too; a writing one only when it says so.
        idempotent = read_only or (annotations is not None and annotations.idempotent_hint is True)
        parameters = dict(remote.input_schema)
        parameters.setdefault("type", "object")
        call = McpCall(
            connection=connection,
            config=config,
            tool=remote.name,
            label=name,
            max_chars=config.max_result_chars,
            max_image_bytes=config.max_image_bytes,
            listing=listing,
            version=connection.version,
            # "optional" is called plainly (the answer comes at once, as from any tool).
            as_task=remote.execution is not None and remote.execution.task_support == "required",
        )
        try:
            tool = Tool(
                name=name,
                description=remote.description or remote.title or "",
                run=call.run,
                parameters=parameters,
                safe=config.trust_read_only and read_only,
                idempotent=config.trust_read_only and idempotent,
                needs_approval=config.approves(remote.name),
            )
        except TetherError as exc:
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'the MCP server "{config.name}" offers the tool {remote.name!r} with an input '
                f"schema tether cannot use: {exc.message}",
                where=f'server "{config.name}"',
                remedy=f'leave it out (exclude = ["{remote.name}"]) or fix the server',
            ) from exc
        tools.append(tool)
    return tuple(tools)


def _check_names(config: ServerSettings, offered: list[str]) -> None:
    """A name in ``include``, ``exclude`` or ``needs_approval`` the server does not offer is
    a misspelling (it would silently change nothing)."""
    named = [*(config.include or ()), *config.exclude]
    if not isinstance(config.needs_approval, bool):
        named.extend(config.needs_approval)
    unknown = sorted(set(named) - set(offered))
    if unknown:
        raise AgentError(
            ErrorCode.TOOL_INVALID,
            f'the settings of MCP server "{config.name}" name tool(s) it does not offer: '
            f"{', '.join(unknown)}",
            where=f'server "{config.name}" (include, exclude, needs_approval)',
            remedy=f"its tools: {', '.join(offered) or 'none'} (names without the prefix)",
        )


def _describe(config: ServerSettings) -> str:
    if config.command is not None:
        return " ".join([config.command, *config.args])
    return config.url or ""


# ---------------------------------------------------------------------------- list_changed


@dataclass
class _Seen:
    """What one agent was told of one server's tools."""

    config: ServerSettings
    listing: tuple[McpTool, ...]
    version: int
    config_names: frozenset[str]
    """The server's tools the agent has (their own names)."""


async def announce_changes(context: StepContext) -> list[Message] | None:
    """The change notice (a pre-step): when a server an agent uses announces new tools
    (``tools/list_changed``), the agent reads what changed in an appended message. Its tool
    list stays as composed (byte-identical for the session, so the provider's prompt cache
    keeps hitting): added tools come with the next session, removed ones fail when called.
    What the agent saw is kept in its runtime (:data:`SERVERS`); an agent without one (a bare
    ``Agent`` built from parts) is not told."""
    agent = context.agent
    runtime = agent.runtime
    if runtime is None:
        return None
    known = runtime.state(SERVERS).seen
    seen = known.get(agent)
    if seen is None:
        seen = known[agent] = _servers_of(agent)
    if not seen:
        return None
    messages: list[Message] = []
    for connection, state in seen.items():
        if connection.version == state.version or connection.listing is None:
            continue
        text = _change_text(state, connection.listing)
        state.listing, state.version = connection.listing, connection.version
        if text:
            messages.append(Message(role="user", content=text))
    return messages or None


def _servers_of(agent: Agent) -> dict[Connection, _Seen]:
    seen: dict[Connection, _Seen] = {}
    for tool in agent.tools:
        call = getattr(tool.run, "__self__", None)
        if not isinstance(call, McpCall):
            continue
        state = seen.get(call.connection)
        if state is None:
            state = _Seen(call.config, call.listing, call.version, frozenset())
            seen[call.connection] = state
        state.config_names = state.config_names | {call.tool}
    return seen


def _change_text(state: _Seen, listing: tuple[McpTool, ...]) -> str | None:
    config = state.config
    server = config.name
    old = {tool.name: tool for tool in state.listing}
    new = {tool.name: tool for tool in listing}
    added = sorted(
        name
        for name in set(new) - set(old)
        if (config.include is None or name in config.include) and name not in config.exclude
    )
    removed = sorted(name for name in state.config_names if name not in new)
    changed = sorted(
        name
        for name in state.config_names
        if name in new and new[name].model_dump() != old[name].model_dump()
    )
    if not (added or removed or changed):
        return None
    lines = [f'The MCP server "{server}" changed its tools during this session.']
    if added:
        names = ", ".join(tool_name(server, name) for name in added)
        lines.append(
            f"New: {names}. They are not in this session's tool list and cannot be called "
            "here; a new session lists them."
        )
    if removed:
        names = ", ".join(tool_name(server, name) for name in removed)
        lines.append(f"Removed: {names}. Calls to them will fail; do not use them.")
    if changed:
        names = ", ".join(tool_name(server, name) for name in changed)
        lines.append(
            f"Changed: {names}. They are still called with the parameters listed here, "
            "which the server may now refuse."
        )
    return "<system-reminder>\n" + "\n".join(lines) + "\n</system-reminder>"
