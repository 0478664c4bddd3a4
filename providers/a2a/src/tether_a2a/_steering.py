"""Messages on a working task steer its turn (``tether a2a serve``; issue 43).

A2A continues a task with a message that names its ``taskId`` while it is not terminal. The
a2a-sdk's request handler queues such a message as the task's next ``execute``, which runs
only once the running one returns: the message waited for the turn's end and was dropped
when the task ended. :class:`SteeringHandler` is the SDK's handler with one change: a message
on a task whose turn runs (no question open, its end not being written) is given to that turn
as a steer (:meth:`tether_a2a._server.Contexts.steer`), and its request is answered with the
same task, followed as ``SubscribeToTask`` follows it:

* ``SendMessage``: the task once it ends (or asks: ``input-required``), its steer's own turn
  included; with ``returnImmediately``, the task as it is once the steer is in its history.
* ``SendStreamingMessage``: the task as it is (the first event), then its updates, until it
  ends or asks.

Every other message (a new task, the answer to a question, a task that ended, one that is not
the caller's) is the SDK's, exactly as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable
from typing import TYPE_CHECKING, cast

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Message, SendMessageRequest, Task, TaskStatusUpdateEvent
from a2a.utils.errors import UnsupportedOperationError
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length

from ._server import Contexts, SessionTaskStore, session_of

if TYPE_CHECKING:
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.context import ServerCallContext
    from a2a.server.events import Event
    from a2a.types import AgentCard

__all__ = ("SteeringHandler",)

#: The states a steering request's answer waits for (as a blocking ``SendMessage`` does).
_SETTLED_STATES = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES


class SteeringHandler(DefaultRequestHandler):
    """The a2a-sdk's request handler; a message on a task whose turn runs steers the turn."""

    def __init__(
        self, executor: AgentExecutor, tasks: SessionTaskStore, card: AgentCard, contexts: Contexts
    ) -> None:
        super().__init__(
            agent_executor=executor,
            task_store=tasks,
            agent_card=card,
            request_context_builder=contexts,
        )
        self.contexts = contexts
        self.tasks = tasks

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        steering = await self._steer(params, context, streaming=False)
        if steering is None:
            sending = cast(
                "Awaitable[Message | Task]",
                super().on_message_send(params, context),  # pyright: ignore[reportUnknownMemberType]
            )
            return await sending
        task_id, message_id, events = steering
        quick = params.configuration.return_immediately
        found: Task | None = None
        done = False
        async with contextlib.aclosing(events):
            async for event in events:
                if not isinstance(event, Task):
                    continue
                found = event
                done = event.status.state in _SETTLED_STATES or (
                    quick and any(m.message_id == message_id for m in event.history)
                )
                if done:
                    break
        if not done:  # the subscription ended first (its queue closed): the task as stored
            found = await self.tasks.get(task_id, context) or found
        if found is None:
            raise UnsupportedOperationError(message=f"task {task_id} is no longer available")
        return apply_history_length(found, params.configuration)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        steering = await self._steer(params, context, streaming=True)
        if steering is None:
            stream = cast(
                "AsyncGenerator[Event]",
                super().on_message_send_stream(params, context),  # pyright: ignore[reportUnknownMemberType]
            )
            async with contextlib.aclosing(stream):
                async for event in stream:
                    yield event
            return
        _, _, events = steering
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, Task):
                    yield apply_history_length(event, params.configuration)
                    if event.status.state in _SETTLED_STATES:
                        return
                    continue
                yield event
                if isinstance(event, TaskStatusUpdateEvent) and (
                    event.status.state in _SETTLED_STATES
                ):
                    return

    async def _steer(
        self, params: SendMessageRequest, context: ServerCallContext, *, streaming: bool
    ) -> tuple[str, str, AsyncGenerator[Event]] | None:
        """Steer the turn of the task ``params`` names, when it runs: its id, the steer's A2A
        message id and the task's events from before the steer (the first is the task
        itself). ``None``: not a steer (the SDK's own handling follows)."""
        validate_proto_required_fields(params)
        validate_history_length(params.configuration)
        message = params.message
        task_id = message.task_id
        if not task_id:
            return None
        opened = self.contexts.get(session_of(task_id))
        running = opened.running if opened is not None else None
        if opened is None or running is None or running.task_id != task_id:
            return None
        if running.question is not None:
            return None  # the answer to the task's question: the SDK's execute takes it
        stored = await self.tasks.get(task_id, context)  # only the caller's own task
        if stored is None or (message.context_id and message.context_id != stored.context_id):
            return None  # the SDK's error
        active = await self._active_task_registry.get(task_id)
        if active is None or active.is_finished:
            return None
        # Subscribed before the steer is given, so no update of its turn is missed.
        events = active.subscribe(
            include_initial_task=True, replace_status_update_with_task=not streaming
        )
        try:
            first = await anext(events)
        except (UnsupportedOperationError, StopAsyncIteration):
            return None  # it ended meanwhile: the SDK's error for an ended task
        try:
            if opened.running is not running or not running.steerable:
                if running.question is None:
                    async for _ in events:  # its end is being written: wait for it
                        pass
                await events.aclose()
                return None
            await self.contexts.steer(opened, running, message, context.user.user_name)
        except BaseException:
            await events.aclose()
            raise
        return task_id, message.message_id, _after(first, events)


async def _after(first: Event, events: AsyncGenerator[Event]) -> AsyncGenerator[Event]:
    """``first``, then ``events`` (closed with this generator)."""
    try:
        yield first
        async for event in events:
            yield event
    finally:
        await events.aclose()
