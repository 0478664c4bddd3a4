"""Scopes: the layers plugins register into, and the chain registries resolve through.

Plugins named at the top of a profile form the **global** layer; plugins under ``[agent.NAME]``
form that agent's layer, whose parent is the global layer; a child composed for a delegation gets
a layer of its own under its parent's. Registries (skills, tools, subagent providers) keep one
layer per scope and resolve a name through :meth:`Scope.chain`, nearest layer first: the nearest
layer wins a name regardless of anything a farther layer says.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ._registration import LoadedPlugin

__all__ = ("Scope", "ScopeKind")

ScopeKind = Literal["global", "agent", "child"]


class Scope:
    """One layer of plugin instances and a link to the layer that encloses it."""

    __slots__ = ("_plugins", "kind", "name", "parent")

    def __init__(
        self,
        name: str,
        kind: ScopeKind,
        parent: Scope | None = None,
        plugins: Iterable[LoadedPlugin] = (),
    ) -> None:
        if (kind == "global") != (parent is None):
            raise ValueError("exactly the global scope has no parent")
        self.name = name
        self.kind: ScopeKind = kind
        self.parent = parent
        self._plugins: tuple[LoadedPlugin, ...] = tuple(plugins)

    @property
    def id(self) -> str:
        """``global``, ``agent:main``, ``child:<session>``: unique along a chain."""
        return "global" if self.kind == "global" else f"{self.kind}:{self.name}"

    @property
    def path(self) -> str:
        """The chain farthest first, e.g. ``global > agent:main > child:c1``."""
        return " > ".join(scope.id for scope in reversed(self.chain()))

    @property
    def plugins(self) -> tuple[LoadedPlugin, ...]:
        """The plugin instances of this layer only, in profile order."""
        return self._plugins

    def chain(self) -> tuple[Scope, ...]:
        """This scope and every enclosing one, nearest first."""
        chain: list[Scope] = []
        scope: Scope | None = self
        while scope is not None:
            chain.append(scope)
            scope = scope.parent
        return tuple(chain)

    def child(self, name: str, plugins: Iterable[LoadedPlugin] = ()) -> Scope:
        """A new layer under this one (a delegated child's scope)."""
        return Scope(name, "child", self, plugins)

    def find_plugin(self, name: str) -> LoadedPlugin | None:
        """The nearest instance of plugin ``name`` along the chain, or ``None``."""
        for scope in self.chain():
            for plugin in scope._plugins:
                if plugin.name == name:
                    return plugin
        return None

    def visible_plugins(self) -> list[LoadedPlugin]:
        """Every instance visible from here: per name the nearest wins; nearest layer first."""
        seen: set[str] = set()
        visible: list[LoadedPlugin] = []
        for scope in self.chain():
            for plugin in scope._plugins:
                if plugin.name not in seen:
                    seen.add(plugin.name)
                    visible.append(plugin)
        return visible

    def layers(self) -> Iterator[tuple[Scope, tuple[LoadedPlugin, ...]]]:
        """``(scope, its plugins)`` nearest first: what a layered registry iterates."""
        for scope in self.chain():
            yield scope, scope._plugins

    def __repr__(self) -> str:
        names = ", ".join(plugin.name for plugin in self._plugins)
        return f"<Scope {self.path} [{names}]>"
