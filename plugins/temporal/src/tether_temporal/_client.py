"""Clients of the cluster: send a message to a session (starting its workflow if needed), and
follow its log in the shared store until the message's turn has ended."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import anyio
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from tether.agents import new_header
from tether.contracts import Caller
from tether.errors import CallerError, ErrorCode
from tether.runtime import follow_turn
from tether.store import SessionStore, StoredEvent

from ._settings import Settings
from ._workflow import SessionMessage, SessionStart, SessionWorkflow, workflow_id

__all__ = ("caller_data", "new_message_id", "new_session_id", "send", "wait_for_turn")


def new_session_id() -> str:
    return new_header().id


def new_message_id() -> str:
    return f"msg_{os.urandom(8).hex()}"


async def send(
    client: Client,
    settings: Settings,
    session_id: str,
    content: str,
    *,
    agent: str | None = None,
    label: str | None = None,
    delivery: str = "turn",
    message_id: str | None = None,
    trace: Mapping[str, str] | None = None,
    caller: Caller | None = None,
) -> str:
    """Send ``content`` to ``session_id`` through its workflow, starting the workflow if it
    does not run; return the message id once the message is stored (durable).

    ``caller``: who sends it (the submitter). It travels with the message, and with the
    workflow's start (the initiator of a session the message creates); the worker's agent
    runs the message with it, vouched for by the cluster (``via`` ``cluster``).

    ``trace``: the sender's trace context (W3C keys, e.g. what
    ``opentelemetry.propagate.inject`` writes), stored with the message: the turn it starts
    on a worker continues that trace."""
    message = SessionMessage(
        message_id=message_id or new_message_id(),
        content=content,
        delivery=delivery,
        trace=dict(trace) if trace else None,
        caller=caller_data(caller),
    )
    session = SessionStart(
        session_id=session_id,
        agent=agent,
        label=label,
        heartbeat_timeout=settings.heartbeat_timeout,
        turn_timeout=settings.turn_timeout,
        idle_timeout=settings.idle_timeout,
        caller=caller_data(caller),
    )
    pause = 0.1
    while True:
        start = WithStartWorkflowOperation(  # one per call: an operation is sent only once
            SessionWorkflow.run,
            session,
            id=workflow_id(session_id),
            task_queue=settings.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        try:
            accepted = await client.execute_update_with_start_workflow(  # pyright: ignore[reportUnknownMemberType]
                "send",
                message,
                start_workflow_operation=start,
                id=message.message_id,
                result_type=str,
            )
        except RPCError as exc:
            # The workflow's task failed or timed out on a busy or dying worker: Temporal
            # schedules it again, and the same message (the same update id) is sent again.
            if not _not_ready(exc):
                raise
            await anyio.sleep(pause)
            pause = min(pause * 2, 2.0)
            continue
        except WorkflowUpdateFailedError as exc:
            refused = raised(exc)
            if refused is None:
                raise
            raise refused from None
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            # What the SDK makes of its caller's cancellation (which comes back at this
            # checkpoint) or of an RPC that timed out (the same message is sent again).
            await anyio.lowlevel.checkpoint()
            continue
        return str(accepted)


def caller_data(caller: Caller | None) -> dict[str, object] | None:
    """``caller`` as a message carries it: its id, name and claims (the worker vouches)."""
    if caller is None:
        return None
    return caller.model_dump(mode="json", exclude={"via"})


def raised(exc: BaseException) -> CallerError | None:
    """The ``CallerError`` a failed send carries (a caller the worker's gates refused, or one
    it could not read), raised again on this side; ``None`` for any other failure."""
    found: BaseException | None = exc
    while found is not None:
        if isinstance(found, ApplicationError) and found.type == "CallerError" and found.details:
            data = found.details[0]
            if isinstance(data, dict):
                given: dict[str, object] = data  # pyright: ignore[reportUnknownVariableType]
                code = str(given.get("code", ""))
                return CallerError(
                    ErrorCode(code) if code in ErrorCode.__members__ else ErrorCode.CALLER_REFUSED,
                    str(given.get("message") or found.message),
                    key=str(given["key"]) if given.get("key") else None,
                    remedy=str(given["remedy"]) if given.get("remedy") else None,
                )
        found = found.__cause__
    return None


def _not_ready(exc: BaseException) -> bool:
    """Whether ``exc`` says the workflow's task is in a failed state (try again)."""
    found: BaseException | None = exc
    while found is not None:
        if "Workflow Task in failed state" in str(found):
            return True
        found = found.__cause__
    return False


async def wait_for_turn(
    store: SessionStore,
    session_id: str,
    message_id: str,
    *,
    after: int = 0,
    hear: Callable[[StoredEvent], None] | None = None,
) -> str:
    """Read the session's log from ``after`` until the turn of ``message_id`` has ended
    (handing every event to ``hear``); its stop reason (:func:`tether.runtime.follow_turn`)."""
    stop, _ = await follow_turn(store, session_id, message_id, after=after, hear=hear)
    return stop
