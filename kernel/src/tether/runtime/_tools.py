"""The runtime's tools: what plugins offer and what tool sources list, composed per preset.

A :class:`ToolCatalog` belongs to one :class:`~tether.runtime.Runtime` (``runtime.tool_catalog``).
It lists tool sources (an MCP server's tools) concurrently and checks what they return, keeps
the registry it composed for each preset while the sources list the same tools, and knows every
tool name offered or listed in this runtime (what a tool filter may name).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, cast

import anyio

from ..agents._tools import ToolRegistry
from ..contracts import Tool, ToolSource
from ..errors import AgentError, ErrorCode, PluginError, TetherError
from ..ground import takes_keyword

if TYPE_CHECKING:
    from ..agents._compose import AgentPreset
    from ..contracts import Caller
    from ._runtime import Runtime

__all__ = ("ToolCatalog",)

#: What each tool source listed, in order.
_Listed = tuple[Sequence[Tool], ...]


class ToolCatalog:
    """The tools of one runtime; see the module docstring."""

    __slots__ = ("_composed", "_known", "_listed", "_runtime")

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._known: frozenset[str] | None = None
        self._listed: frozenset[str] = frozenset()
        self._composed: dict[str | None, tuple[_Listed, ToolRegistry]] = {}

    def known_names(self) -> frozenset[str]:
        """The name of every tool some plugin instance offers, in any scope, and of every tool
        a tool source has listed in this runtime: what a tool filter may name."""
        if self._known is None:
            self._known = frozenset(
                tool.name
                for plugin in self._runtime.kernel.plugins
                for tool in plugin.collect("tether_tools", Tool)
            )
        return self._known | self._listed

    def eager_sources(self) -> list[tuple[str, ToolSource]]:
        """``(plugin, source)`` for every eager tool source of every scope, in profile order."""
        return [
            (plugin.name, source)
            for plugin in self._runtime.kernel.plugins
            if plugin.implements("tether_tool_sources")
            for source in plugin.collect("tether_tool_sources", ToolSource)
            if source.eager
        ]

    async def compose(
        self,
        preset: AgentPreset,
        extra: Sequence[ToolSource] = (),
        *,
        caller: Caller | None = None,
    ) -> ToolRegistry:
        """The tool list an agent of ``preset`` gets when composed now: the preset's tools,
        with what each of its tool sources lists now merged into its layer (see
        :class:`tether.agents.ToolSource`). Without tool sources, the preset's own list.
        ``caller``: who the agent is composed for, given to the sources whose ``list_tools``
        takes a ``caller`` keyword (docs/callers.md); the list then stays fixed for the session.
        ``extra`` sources (a session's own, as ``tether acp`` passes its client's MCP
        servers) form a layer of their own, nearest of all.

        The sources are listed concurrently; the first that fails (in scope order) is raised.
        While every source returns the same sequence as last time, the list is the same
        :class:`ToolRegistry` object too."""
        if not preset.has_tool_sources and not extra:
            return preset.tools
        own = [("session", source) for source in extra]
        layered = list(preset.tool_sources) or [()]
        static = list(preset.tool_layers) or [()]
        if extra:  # a layer of their own, nearest: they hide a profile tool of one name
            layered.insert(0, tuple(own))
            static.insert(0, ())
        sources = [pair for layer in layered for pair in layer]
        listed = await self._list_all(sources, caller)
        cached = None if extra else self._composed.get(preset.name)
        if cached is not None and all(a is b for a, b in zip(cached[0], listed, strict=True)):
            return cached[1]
        found = iter(listed)
        layers: list[list[tuple[str, Tool]]] = []
        for fixed, dynamic in zip(static, layered, strict=True):
            layer = list(fixed)
            for owner, source in dynamic:
                layer.extend((f"{owner} ({source.name})", tool) for tool in next(found))
            layers.append(layer)
        registry = ToolRegistry.from_layers(layers)
        if not extra:  # a session's own sources are its alone: not kept
            self._composed[preset.name] = (listed, registry)
        self._listed = self._listed | {tool.name for tools in listed for tool in tools}
        return registry

    async def list_source(
        self, owner: str, source: ToolSource, caller: Caller | None = None
    ) -> Sequence[Tool]:
        """What ``source`` (offered by the plugin ``owner``) lists now for ``caller`` (given
        when its ``list_tools`` takes a ``caller`` keyword), checked: a failure is its own
        :class:`tether.TetherError` or ``TOOL_SOURCE_FAILED``; a result that is not a
        sequence of tools is ``PLUGIN_CONTRACT_VIOLATION``."""
        try:
            function: Callable[..., Awaitable[Sequence[Tool]]] = source.list_tools
            if takes_keyword(function, "caller"):
                listed = await function(self._runtime, caller=caller)
            else:
                listed = await function(self._runtime)
        except TetherError:
            raise
        except Exception as exc:
            raise AgentError(
                ErrorCode.TOOL_SOURCE_FAILED,
                f'tool source "{source.name}" of plugin "{owner}" could not list its tools: '
                f"{type(exc).__name__}: {exc}",
                plugin=owner,
                remedy="fix the source's settings, or what it runs (--debug shows the traceback)",
            ) from exc
        items = cast(object, listed)
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            raise _not_tools(owner, source, type(items).__name__, "not a sequence of ")
        for item in cast(Sequence[object], items):
            if not isinstance(item, Tool):
                raise _not_tools(owner, source, type(item).__name__, "not a ")
        return cast(Sequence[Tool], items)

    async def warm(self, pair: tuple[str, ToolSource]) -> None:
        """List an eager source once the runtime opens; a failure waits for the first compose
        (which lists again and raises it)."""
        with suppress(Exception):  # the compose that needs the tools reports it
            await self.list_source(*pair)

    async def _list_all(
        self, sources: Sequence[tuple[str, ToolSource]], caller: Caller | None
    ) -> _Listed:
        """What each source lists, concurrently; the first failure in order is raised."""
        if len(sources) == 1:
            return (await self.list_source(*sources[0], caller),)
        results: list[Sequence[Tool] | BaseException] = [()] * len(sources)

        async def one(index: int) -> None:
            try:
                results[index] = await self.list_source(*sources[index], caller)
            except Exception as exc:
                results[index] = exc

        async with anyio.create_task_group() as group:
            for index in range(len(sources)):
                group.start_soon(one, index)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return tuple(result for result in results if not isinstance(result, BaseException))


def _not_tools(owner: str, source: ToolSource, listed: str, what: str) -> PluginError:
    return PluginError(
        ErrorCode.PLUGIN_CONTRACT_VIOLATION,
        f'tool source "{source.name}" of plugin "{owner}" listed {listed}, '
        f"{what}tether.agents.Tool",
        plugin=owner,
        remedy="return a list or tuple of Tool from list_tools",
    )
