"""Tracers: what a plugin that records an agent's work as spans (``tether-otel``) is shown.

A tracer wraps three kinds of work in context managers the turn loop enters around it: a turn,
a model request, a tool call. Each is entered in the task that does the work and stays entered
across its awaits, so whatever the work starts (a child agent's turn inside a ``subagent``
call, a model request inside a turn) runs inside it: a tracer that keeps its current span in a
context variable nests them without being told. Each yields a callable the loop calls once with
the outcome (the turn's end, the model's answer, the tool's result) before leaving; an
exception that escapes the work leaves the block with that exception instead.

A message carries the trace context of whoever sent it (:meth:`Tracer.carry`, called when the
message is accepted, in the sender's task) to the turn it starts, which runs later in the
agent's own task: the tracer decides what the turn's span makes of it (its parent, or a link).

With no tracer (no plugin offers one) the loop enters nothing: the cost is one ``None`` check
per unit of work.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

from ..contracts import Tracer, TurnStart

if TYPE_CHECKING:
    from ..models import ModelRequest, ModelResponse, ToolCall
    from ..store import ToolResult, TurnEnded
    from ._agent import Agent

__all__ = ("Tracer", "TurnStart", "carry_trace", "current_trace", "tracer_of", "tracing")

_T = TypeVar("_T")


class _Tracers:
    """Several tracers as one: each entered in order, left in reverse."""

    def __init__(self, tracers: Sequence[Tracer]) -> None:
        self.tracers = tuple(tracers)

    def carry(self) -> Mapping[str, str]:
        carried: dict[str, str] = {}
        for tracer in self.tracers:
            carried.update(tracer.carry())
        return carried

    def turn(
        self, agent: Agent, start: TurnStart
    ) -> AbstractContextManager[Callable[[TurnEnded], None]]:
        return _all([tracer.turn(agent, start) for tracer in self.tracers])

    def model_request(
        self, agent: Agent, step: int, request: ModelRequest
    ) -> AbstractContextManager[Callable[[ModelResponse], None]]:
        return _all([tracer.model_request(agent, step, request) for tracer in self.tracers])

    def tool_call(
        self, agent: Agent, call: ToolCall
    ) -> AbstractContextManager[Callable[[ToolResult], None]]:
        return _all([tracer.tool_call(agent, call) for tracer in self.tracers])


@contextmanager
def _all(
    managers: Sequence[AbstractContextManager[Callable[[_T], None]]],
) -> Generator[Callable[[_T], None]]:
    with ExitStack() as stack:
        hear = [stack.enter_context(manager) for manager in managers]

        def tell(outcome: _T) -> None:
            for one in hear:
                one(outcome)

        yield tell


#: The tracer of the turn running in this task (and the tasks it starts): set by the turn loop.
_ACTIVE: ContextVar[Tracer | None] = ContextVar("tether_tracer", default=None)


@contextmanager
def tracing(tracer: Tracer) -> Generator[None]:
    """Within the block, :func:`current_trace` asks ``tracer`` (the turn loop enters it around
    each traced turn)."""
    token = _ACTIVE.set(tracer)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def current_trace() -> dict[str, str]:
    """The trace context of the work running here (a turn, its model request or tool call),
    as W3C trace-context keys, for a request to another process: a provider that talks to a
    remote agent sends it along (``tether-acp`` puts it in the prompt's ``_meta``). Empty when
    nothing traces this work."""
    tracer = _ACTIVE.get()
    if tracer is None:
        return {}
    return dict(tracer.carry())


#: The W3C trace-context keys tether carries between processes.
TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def trace_from(carrier: Mapping[str, object]) -> dict[str, str] | None:
    """The trace context another process sent (an ACP prompt's ``_meta``, an HTTP request's
    headers, lower-cased): the :data:`TRACE_KEYS` whose values are text of at most 512
    characters, or ``None``. Their form is the tracer's to check (a malformed one is dropped
    there, and the turn still runs)."""
    found = {
        key: value
        for key in TRACE_KEYS
        if isinstance(value := carrier.get(key), str) and 0 < len(value) <= 512
    }
    return found or None


def carry_trace(agent: Agent) -> dict[str, str] | None:
    """What a message ``agent`` accepts, or sends to another session (a child's task),
    carries of the caller's trace context: its tracer's :meth:`Tracer.carry`, or ``None``
    (no tracer, or nothing to carry)."""
    tracer = agent.spec.tracer
    if tracer is None:
        return None
    carried = tracer.carry()
    return dict(carried) if carried else None


def tracer_of(tracers: Sequence[Tracer]) -> Tracer | None:
    """One tracer for ``tracers`` (``None`` for none)."""
    if not tracers:
        return None
    if len(tracers) == 1:
        return tracers[0]
    return _Tracers(tracers)
