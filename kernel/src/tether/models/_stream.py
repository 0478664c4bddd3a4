"""Streaming: the pieces of an answer a model yields before the answer itself.

A model that streams has a method ``stream(request)``: an async iterator of :class:`ModelDelta`
(text, reasoning, tool-call argument pieces, as they arrive) ending with the whole
:class:`~tether.models.ModelResponse`. A model without one is streamed as its one final answer
(:func:`stream_answer`). Deltas are for listeners only: the session log keeps one event per
message, the final answer (no store write per delta).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, cast, runtime_checkable

from ..contracts import ModelRequest, ModelResponse
from ..errors import ErrorCode, ModelError

__all__ = ("DeltaKind", "ModelDelta", "StreamingModel", "stream_answer", "streamed")

DeltaKind = Literal["text", "reasoning", "tool_call", "retry", "tool_progress"]


@dataclass(frozen=True, slots=True)
class ModelDelta:
    """One piece of an answer as it arrives."""

    kind: DeltaKind
    """``text`` (of the answer), ``reasoning`` (DeepSeek's ``reasoning_content``),
    ``tool_call`` (a piece of a call's argument text), ``retry``: the step's request failed
    recoverably and is sent again after a pause (what arrived before is not part of the
    answer), or ``tool_progress``: not a piece of an answer but how a running tool call is
    going (:meth:`tether.agents.ToolContext.progress`; ``text`` says it, ``name`` is the
    tool, ``call_id`` the call)."""
    text: str = ""
    """The new text; for ``retry``, why the attempt failed (one line, the model's name left
    out; may be empty)."""
    index: int = 0
    """For ``tool_call``: which call of the answer (0 for the first)."""
    name: str | None = None
    """For ``tool_call``: the tool's name, on the first delta of a call."""
    wait: float = 0.0
    """For ``retry``: the seconds the turn loop pauses before sending the request again."""
    attempt: int = 0
    """For ``retry``: which retry this is (1 for the first; 0 when not known, e.g. a retry
    relayed from an agent elsewhere)."""
    retries: int = 0
    """For ``retry``: the most retries the step may make (``AgentLimits.model_retries``)."""
    call_id: str = ""
    """For ``tool_progress``: the id of the call (empty when not known, e.g. relayed from
    another process)."""


@runtime_checkable
class StreamingModel(Protocol):
    """A model that streams its answers (see the module)."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Deltas as they arrive, then the whole answer, last."""
        ...


async def stream_answer(
    model: object, request: ModelRequest, on_delta: Callable[[ModelDelta], None]
) -> ModelResponse:
    """``model``'s answer to ``request``, handing each delta to ``on_delta`` as it arrives
    (a model without ``stream`` answers through ``request`` and gives none)."""
    if not isinstance(model, StreamingModel):
        return await model.request(request)  # type: ignore[attr-defined, no-any-return]
    answer: ModelResponse | None = None
    async for streamed in model.stream(request):
        item = cast(object, streamed)  # a plugin's model: checked, not trusted
        if answer is not None:
            break  # the answer is last: nothing after it counts
        if isinstance(item, ModelDelta):
            on_delta(item)
        elif isinstance(item, ModelResponse):
            answer = item
        else:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"model {getattr(model, 'name', '?')} streamed {type(item).__name__}, not a "
                "ModelDelta or ModelResponse",
                remedy="yield tether.models.ModelDelta pieces, then the ModelResponse",
            )
    if answer is None:
        raise ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"model {getattr(model, 'name', '?')} ended its stream without an answer",
            remedy="a streaming model must yield its ModelResponse last",
            recoverable=True,
        )
    return answer


async def streamed(
    ask: Callable[[Callable[[ModelDelta], None]], Awaitable[ModelResponse]],
) -> AsyncIterator[ModelDelta | ModelResponse]:
    """A model's ``stream`` from work that hands its deltas to a callback as they arrive
    (a remote agent's connection): ``ask(hand)`` runs in a task group of this generator, each
    delta it hands is yielded, then its answer. An exception ``ask`` raises is raised here, as
    ``request`` would raise it (not as a group).

    Safe across the ``yield`` for :func:`stream_answer`, which awaits nothing between two items
    and reads the stream to its end: a cancellation reaches the generator where it waits,
    inside the group, and ``ask`` is cancelled with it."""
    import anyio

    send, receive = anyio.create_memory_object_stream[ModelDelta](math.inf)
    outcome: list[ModelResponse | Exception] = []

    def hand(delta: ModelDelta) -> None:  # must never raise: called by the connection
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            send.send_nowait(delta)

    async def run() -> None:
        with send:
            try:
                outcome.append(await ask(hand))
            except Exception as exc:  # raised below, not as a group
                outcome.append(exc)

    with receive:
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            async for delta in receive:
                yield delta
    answer = outcome[0]
    if isinstance(answer, Exception):
        raise answer
    yield answer
