"""Plugin state that lives and closes with a runtime: :meth:`Runtime.state`.

A plugin that keeps something per runtime rather than per instance (tether-mcp-client's
connections, one per server, shared by every agent of the runtime and every layer of the
profile) declares a key once, as a module constant, and asks the runtime for the value:

    SERVERS = StateKey("tether-mcp-client servers", lambda runtime: Servers())

    def servers(runtime: Runtime) -> Servers:
        return runtime.state(SERVERS)  # made on first use, then the same object

A key is compared by identity (two keys of one name are two places, so two plugins never
collide), carries the type of its value (``runtime.state(SERVERS)`` is a ``Servers`` to the type
checker) and the factory that makes it, called with the runtime the first time the key is asked
for. The value lives as long as the runtime, and is collected with it: the module keeps only the
key, never a registry of runtimes.

Inside ``Runtime.open``, a value with ``async aclose()`` (:class:`ClosableState`) is closed when
the runtime closes: after the runtime's background work was cancelled and has ended, in the
reverse order the values were made, each shielded from cancellation (so ``aclose`` must end in
bounded time). Every value is closed even when one fails; failures are raised as
:class:`contextlib.AsyncExitStack` raises them (the last, with the earlier as its context), each
with a note naming its key. A runtime never opened, or closed already, closes nothing: its
values are collected with it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast, runtime_checkable

import anyio

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ("ClosableState", "RuntimeState", "StateKey")

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class StateKey(Generic[T]):
    """Where one plugin keeps one value in each runtime; see the module docstring. Declare it
    once (a module constant); it is compared by identity."""

    name: str
    """What the value is, for people (errors, notes): ``"tether-mcp-client servers"``."""
    factory: Callable[[Runtime], T]
    """Makes the value, given the runtime, the first time the key is asked for."""

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a StateKey needs a name that says whose state it is")
        if not callable(self.factory):
            raise TypeError(
                f'the factory of StateKey "{self.name}" is {type(self.factory).__name__}, '
                "not a callable that takes the runtime"
            )


@runtime_checkable
class ClosableState(Protocol):
    """A value of :meth:`Runtime.state` that holds something to release (processes,
    connections): the runtime awaits ``aclose()`` once when it closes (see the module
    docstring)."""

    async def aclose(self) -> None:
        """Release what the value holds; called once, shielded from cancellation."""
        ...


class RuntimeState:
    """The values of one runtime's state keys, and the closable ones to close."""

    __slots__ = ("_closable", "_making", "_values")

    def __init__(self) -> None:
        self._values: dict[StateKey[Any], object] = {}
        self._making: set[StateKey[Any]] = set()
        self._closable: list[tuple[StateKey[Any], ClosableState]] | None = []
        """In the order made; ``None`` once closed (a later value is not closed)."""

    def get(self, runtime: Runtime, key: StateKey[T]) -> T:
        """``key``'s value, made by its factory on first use."""
        try:
            return cast(T, self._values[key])
        except KeyError:
            pass
        if not isinstance(cast(object, key), StateKey):
            raise TypeError(
                f"runtime.state takes a tether.runtime.StateKey, not {type(key).__name__}"
            )
        if key in self._making:
            raise RuntimeError(
                f'the factory of state "{key.name}" asked the runtime for its own value'
            )
        self._making.add(key)
        try:
            value = key.factory(runtime)
        finally:
            self._making.discard(key)
        self._values[key] = value
        if self._closable is not None and isinstance(value, ClosableState):
            self._closable.append((key, value))
        return value

    async def aclose(self) -> None:
        """Close the closable values, last made first; see the module docstring."""
        closable, self._closable = self._closable, None
        if not closable:
            return
        with anyio.CancelScope(shield=True):
            async with AsyncExitStack() as stack:
                for key, value in closable:  # the stack calls them in reverse
                    stack.push_async_callback(_close, key, value)


async def _close(key: StateKey[Any], value: ClosableState) -> None:
    try:
        await value.aclose()
    except BaseException as exc:
        exc.add_note(f'while closing the runtime state "{key.name}"')
        raise
