"""The tracer contract: what a tracer is shown of the agents' work as it happens."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..agents import Agent
    from ._events import MessageSource, ToolResult, TurnEnded
    from ._messages import ModelRequest, ModelResponse, ToolCall

__all__ = ("Tracer", "TurnStart")

_EMPTY: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class TurnStart:
    """The turn a tracer is shown: its number and the message that started it."""

    turn: int
    message_id: str
    content: str
    source: MessageSource
    trace: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    """The trace context the message carried from its sender (W3C trace-context keys such as
    ``traceparent``), or empty."""
    resumed: bool = False
    """A turn a crash cut, going on in this process (:meth:`tether.runtime.Runtime.recover`)."""


@runtime_checkable
class Tracer(Protocol):
    """Sees the work of the agents it is given to as it happens (``tether_tracers``)."""

    def carry(self) -> Mapping[str, str]:
        """The caller's trace context, to travel with a message it sends to an agent (W3C
        trace-context keys: ``traceparent``, ``tracestate``); empty for none. Called in the
        sender's task when the message is accepted; must be cheap and never raise."""
        ...

    def turn(
        self, agent: Agent, start: TurnStart
    ) -> AbstractContextManager[Callable[[TurnEnded], None]]:
        """Entered around a turn, in the agent's task; the callable gets the turn's end."""
        ...

    def model_request(
        self, agent: Agent, step: int, request: ModelRequest
    ) -> AbstractContextManager[Callable[[ModelResponse], None]]:
        """Entered around one model request of a turn's ``step`` (its retries included); the
        callable gets the answer. A request that fails leaves with the model's error."""
        ...

    def tool_call(
        self, agent: Agent, call: ToolCall
    ) -> AbstractContextManager[Callable[[ToolResult], None]]:
        """Entered around one tool call, in the task that runs it (concurrent calls each in
        their own); the callable gets its result (an error result too: ``is_error``)."""
        ...
