"""The registry that resolves tools through a scope chain. The tools themselves (``Tool``,
``ToolSource``, ``ToolFilter``, what a tool runs with and returns) are :mod:`tether.contracts`'s,
re-exported here and by :mod:`tether.agents` under the same names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..contracts import (
    Tool,
    ToolContext,
    ToolError,
    ToolFilter,
    ToolOutput,
    ToolSource,
)
from ..contracts._tools import kernel_schema, schema_problem
from ..errors import AgentError, ErrorCode

if TYPE_CHECKING:
    from ..contracts import ToolSchema
    from ._agent import Agent

__all__ = (
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFilter",
    "ToolOutput",
    "ToolRegistry",
    "ToolSource",
    "kernel_schema",
    "schema_problem",
)


class ToolRegistry:
    """Tools by name in profile order. Build one per scope with :meth:`from_layers`.

    Nearest layer wins a name; inside a layer, the first registration wins and a later
    duplicate is an error (two plugins of one layer claiming one tool name).
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._conditional: tuple[Tool, ...] = ()
        self._schemas: dict[tuple[bool, ...], tuple[ToolSchema, ...]] = {}
        for tool in tools:
            self.add(tool)

    @classmethod
    def from_layers(cls, layers: Iterable[Iterable[tuple[str, Tool]]]) -> ToolRegistry:
        """Merge ``(owner, tool)`` layers given nearest first: the nearest tool of a name
        wins; two tools of one name in one layer are an error, unless they are the same tool
        object (a kernel tool two plugins both offer)."""
        registry = cls()
        for layer in layers:
            owners: dict[str, tuple[str, Tool]] = {}
            for owner, tool in layer:
                if tool.name in owners and owners[tool.name][1] is tool:
                    continue  # one tool offered by two plugins (the kernel's task tools)
                if tool.name in owners:
                    raise AgentError(
                        ErrorCode.TOOL_INVALID,
                        f'tool "{tool.name}" is registered by both "{owners[tool.name][0]}" '
                        f'and "{owner}" in one layer',
                        remedy="remove one of the plugins from that layer or rename the tool",
                    )
                owners[tool.name] = (owner, tool)
                registry._tools.setdefault(tool.name, tool)
        registry._changed()
        return registry

    def _changed(self) -> None:
        self._conditional = tuple(t for t in self._tools.values() if t.available is not None)
        self._schemas.clear()

    def add(self, tool: Tool) -> None:
        """Register ``tool``; a second tool with the same name is an error."""
        if tool.name in self._tools:
            raise AgentError(
                ErrorCode.TOOL_INVALID,
                f'tool "{tool.name}" is registered twice',
                remedy="rename one of them",
            )
        self._tools[tool.name] = tool
        self._changed()

    def get(self, name: str, agent: Agent | None = None) -> Tool | None:
        """The tool called ``name``; with ``agent``, only if it is available to that agent."""
        tool = self._tools.get(name)
        if tool is None or agent is None or tool.available is None:
            return tool
        return tool if tool.available(agent) else None

    def names(self, agent: Agent | None = None) -> list[str]:
        """Every tool's name; with ``agent``, the tools available to that agent."""
        if agent is None:
            return list(self._tools)
        return [name for name in self._tools if self.get(name, agent) is not None]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def restrict(
        self, tool_filter: ToolFilter, *, known: Iterable[str] | None = None
    ) -> ToolRegistry:
        """A narrower registry: the tools ``tool_filter`` permits, in registration order.

        A name the filter gives that this registry lacks is an error (``TOOL_FILTER_INVALID``,
        most likely a misspelling), unless it is in ``known``: the tools this registry could
        have had (an earlier narrowing took them away), which narrowing again leaves gone.
        """
        tool_filter.check_names([*self._tools, *(known or ())], available=list(self._tools))
        return ToolRegistry(tool for tool in self._tools.values() if tool_filter.permits(tool.name))

    def schemas(self, agent: Agent | None = None) -> tuple[ToolSchema, ...]:
        """The tool list a model sees, in registration order; with ``agent``, without the
        tools unavailable to it. Cached per availability, so an unchanged list is the same
        tuple of the same schemas."""
        conditional = self._conditional
        # Most registries have no conditional tool: then no key is computed at all.
        key = (
            tuple(t.available(agent) for t in conditional)  # type: ignore[misc]
            if conditional and agent is not None
            else ()
        )
        schemas = self._schemas.get(key)
        if schemas is None:
            off = {t.name for t, on in zip(self._conditional, key, strict=False) if not on}
            schemas = tuple(t.schema() for t in self._tools.values() if t.name not in off)
            self._schemas[key] = schemas
        return schemas
