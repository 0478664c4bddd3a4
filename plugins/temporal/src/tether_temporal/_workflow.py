"""The session workflow: deterministic code only (it runs in Temporal's sandbox).

It holds no conversation: the session's log is in the tether store. It accepts messages (an
update that returns once the message is stored in the session's mailbox), and drives the
session (an activity that runs its queued turns on whichever worker picks it up) whenever a
message is waiting. A driver that dies is found out by its missing heartbeats and the drive is
retried on another worker, which takes the session's lease over and repairs the turn that was
cut (a tool call without a result is answered "interrupted, may or may not have run"; nothing
is run twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.workflow import ActivityCancellationType

__all__ = (
    "DRIVE",
    "FAIL",
    "OPEN",
    "POST",
    "DriveResult",
    "SessionMessage",
    "SessionStart",
    "SessionStatus",
    "SessionWorkflow",
    "workflow_id",
)

#: The activity names (workers register them under these; the workflow calls them by name).
OPEN = "tether.open_session"
POST = "tether.post_message"
DRIVE = "tether.drive_session"
FAIL = "tether.fail_waiting"


def workflow_id(session_id: str) -> str:
    """The id of the workflow that drives ``session_id``."""
    return f"tether-session/{session_id}"


def drive_queue(task_queue: str) -> str:
    """The task queue of the drive activities of ``task_queue``'s workflows: a queue of their
    own, so that a worker polls for at most ``max_sessions`` drives while it still takes the
    short activities (open, post) and workflow tasks."""
    return f"{task_queue}/drive"


@dataclass
class SessionStart:
    """What a client starts a session's workflow with (from its profile's settings)."""

    session_id: str
    agent: str | None = None
    label: str | None = None
    heartbeat_timeout: float = 5.0
    turn_timeout: float = 3600.0
    idle_timeout: float = 600.0
    seen: list[str] = field(default_factory=list[str])
    """Message ids already accepted (carried over a continue-as-new)."""
    caller: dict[str, Any] | None = None
    """Who submitted the message that starts the session (``tether.Caller`` as JSON: ``id``,
    ``name``, ``claims``): its initiator, vouched for by the cluster. ``None``: nobody known
    (and what a start written before callers were carried reads as)."""


@dataclass
class SessionMessage:
    """One message for the session: ``delivery`` ``turn`` (a follow-up), ``step`` (steer the
    running turn) or ``context`` (inject)."""

    message_id: str
    content: str
    delivery: str = "turn"
    sender: str | None = None
    trace: dict[str, str] | None = None
    """The sender's trace context (W3C keys), kept with the message in the log."""
    caller: dict[str, Any] | None = None
    """Who sent it (``tether.Caller`` as JSON: ``id``, ``name``, ``claims``): the message runs
    with this caller on the worker, vouched for by the cluster (``via`` ``cluster``).
    ``None``: nobody known (a message written before callers were carried reads so too)."""


@dataclass
class DriveResult:
    """What one drive did: the turns it ran and the stop reason of the last."""

    turns: int = 0
    stop_reason: str = "completed"
    worker: str = ""


@dataclass
class SessionStatus:
    session_id: str
    waiting: int
    driving: bool
    drives: int
    accepted: int


@workflow.defn(name="TetherSession")
class SessionWorkflow:
    @workflow.init
    def __init__(self, start: SessionStart) -> None:
        # The start input reaches __init__ too: an update sent with the start (update-with-
        # start) runs before run() does, and needs it.
        self._start = start
        self._opened = False
        self._waiting = 0
        self._driving = False
        self._drives = 0
        # Accepted message ids, oldest first (a dict keeps their order).
        self._seen: dict[str, None] = dict.fromkeys(start.seen)
        self._closing = False
        self._drive: workflow.ActivityHandle[DriveResult] | None = None
        self._refusal: dict[str, Any] | None = None
        """Why the session was not created (its starter's caller refused): the messages
        waiting for it are answered with it."""
        self._discard = False  # a cancel came while no drive ran: the next one drops what waits
        self._interrupting = False  # the running drive is cancelled by an interrupt, not a cancel

    @workflow.run
    async def run(self, start: SessionStart) -> DriveResult:
        await self._open(start)
        if self._refusal is not None:  # no session: the messages sent with the start fail
            await workflow.wait_condition(workflow.all_handlers_finished)
            return DriveResult(stop_reason="error")
        last = DriveResult()
        while True:
            try:
                await workflow.wait_condition(
                    lambda: self._waiting > 0 or self._closing,
                    timeout=timedelta(seconds=start.idle_timeout),
                )
            except TimeoutError:
                break  # idle: the next message starts the workflow again
            if self._closing and not self._waiting:
                break
            self._waiting = 0
            self._driving = True
            discard, self._discard = self._discard, False
            try:
                self._drive = workflow.start_activity(
                    DRIVE,
                    args=[start.session_id, discard],
                    result_type=DriveResult,
                    task_queue=drive_queue(workflow.info().task_queue),
                    start_to_close_timeout=timedelta(seconds=start.turn_timeout),
                    heartbeat_timeout=timedelta(seconds=start.heartbeat_timeout),
                    # A tether error another attempt cannot get past is raised non-retryable by
                    # the activity; anything else (a lease not expired yet, a dead worker) is
                    # tried again.
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=0.5),
                        backoff_coefficient=2.0,
                        maximum_interval=timedelta(seconds=10),
                    ),
                    # A cancel waits for the driver to end the turn (recorded ``aborted``):
                    # the next drive never races the one that is stopping.
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
                last = await self._drive
            except ActivityError as exc:
                if isinstance(exc.cause, CancelledError) and self._interrupting:
                    # Interrupted (a client's Ctrl-C): the driver aborted the turn and left
                    # what waits parked; the next message runs it, as in one process.
                    self._waiting = 0
                    last = DriveResult(stop_reason="aborted")
                elif isinstance(exc.cause, CancelledError):
                    # Cancelled (the cancel signal): the driver aborted the turn and parked
                    # what waits (a drive cancelled before a worker took it ran nothing), so
                    # one more drive drops what waits.
                    self._discard = True
                    self._waiting = max(self._waiting, 1)
                    last = DriveResult(stop_reason="aborted")
                else:
                    # A drive that failed for good (a tether error no attempt can get past: the
                    # worker cannot make the session's agent or model) does not end the
                    # session; the messages it could not run are answered with turns that end
                    # ``error`` saying why, so that whoever follows them (tether run, a parent)
                    # is told instead of waiting. The next message is driven afresh.
                    workflow.logger.warning("drive of %s failed: %s", start.session_id, exc.cause)
                    await self._fail_waiting(start.session_id, str(exc.cause or exc))
                    last = DriveResult(stop_reason="error")
            finally:
                self._driving = False
                self._drive = None
                self._interrupting = False
            self._drives += 1
            if workflow.info().is_continue_as_new_suggested() and not self._waiting:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    SessionStart(
                        session_id=start.session_id,
                        agent=start.agent,
                        label=start.label,
                        heartbeat_timeout=start.heartbeat_timeout,
                        turn_timeout=start.turn_timeout,
                        idle_timeout=start.idle_timeout,
                        seen=list(self._seen)[-1000:],  # the latest: a client retries soon
                        caller=start.caller,
                    )
                )
        await workflow.wait_condition(workflow.all_handlers_finished)
        return last

    async def _fail_waiting(self, session_id: str, error: str) -> None:
        try:
            await workflow.execute_activity(
                FAIL,
                args=[session_id, error],
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=5)),
            )
        except ActivityError as exc:
            workflow.logger.warning("could not answer %s's messages: %s", session_id, exc.cause)

    async def _open(self, start: SessionStart) -> None:
        if self._opened:
            return
        # A refusal (JSON, as the activity returned it), or None (so did a start before callers).
        refusal: dict[str, Any] | None = await workflow.execute_local_activity(
            OPEN,
            start,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
        )
        if refusal is not None:
            self._refusal = refusal
            return
        self._opened = True

    @workflow.update(name="send")
    async def send(self, message: SessionMessage) -> str:
        """Store ``message`` in the session's mailbox; return its id once it is stored."""
        if message.message_id in self._seen:
            return message.message_id  # sent again (a client retry): accepted once
        await workflow.wait_condition(lambda: self._opened or self._refusal is not None)
        if self._refusal is not None:
            raise ApplicationError(
                str(self._refusal.get("message", "refused")),
                self._refusal,
                type=str(self._refusal.get("class", "CallerError")),
                non_retryable=True,
            )
        await workflow.execute_local_activity(
            POST,
            args=[self._start.session_id, message],
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
        )
        self._seen[message.message_id] = None
        if message.delivery != "context":
            self._waiting += 1
        return message.message_id

    @send.validator
    def _check(self, message: SessionMessage) -> None:
        if self._closing:
            raise ApplicationError("the session's workflow is closing; send again", type="Closing")
        if not message.message_id or not message.content.strip():
            raise ApplicationError("a message needs an id and some text", type="BadMessage")
        if message.delivery not in ("turn", "step", "context"):
            raise ApplicationError(
                f"delivery must be turn, step or context, not {message.delivery!r}",
                type="BadMessage",
            )
        if message.caller is not None and not _sound_caller(message.caller):
            raise ApplicationError(
                "caller must be an object with an id (1 to 200 characters), and optionally a "
                "name and claims (an object)",
                type="BadMessage",
            )
        if message.trace is not None and not _sound_trace(message.trace):
            raise ApplicationError(
                "trace must map at most 8 trace-context keys (traceparent, tracestate, "
                "baggage...) to texts of at most 512 characters",
                type="BadMessage",
            )

    @workflow.signal(name="cancel")
    def cancel(self) -> None:
        """Stop the session's work: the running drive aborts its turn and drops the messages
        not begun (a one-shot child disposed of, a cancelled task); with no drive running,
        the next drive drops what waits instead of running it."""
        self._interrupting = False  # a cancel after an interrupt drops what waits too
        if self._drive is not None:
            self._drive.cancel()
        elif self._waiting:
            self._discard = True

    @workflow.update(name="interrupt")
    async def interrupt(self) -> None:
        """Abort the running turn (a client's Ctrl-C): the drive ends it ``aborted`` and the
        messages not begun stay parked until the next message; returns once the drive has
        stopped (the turn's end is stored). No drive running: nothing happens."""
        if self._drive is None:
            return
        drives = self._drives
        if not self._interrupting:
            self._interrupting = True
            self._drive.cancel()
        await workflow.wait_condition(lambda: self._drives > drives)

    @workflow.signal(name="close")
    def close(self) -> None:
        """End the workflow once the waiting messages have run."""
        self._closing = True

    @workflow.query(name="status")
    def status(self) -> SessionStatus:
        return SessionStatus(
            session_id=self._start.session_id,
            waiting=self._waiting,
            driving=self._driving,
            drives=self._drives,
            accepted=len(self._seen),
        )


def _sound_trace(trace: object) -> bool:
    """Whether a message's trace context has the form a tracer can read (a few short texts)."""
    if not isinstance(trace, dict) or len(trace) > 8:  # pyright: ignore[reportUnknownArgumentType]
        return False
    return all(
        isinstance(key, str) and isinstance(value, str) and 0 < len(value) <= 512
        for key, value in trace.items()  # pyright: ignore[reportUnknownVariableType]
    )


def _sound_caller(caller: object) -> bool:
    """Whether a message's caller has the form of a ``tether.Caller`` (checked in full where
    the message is stored)."""
    if not isinstance(caller, dict):
        return False
    given: dict[str, object] = caller  # pyright: ignore[reportUnknownVariableType]
    ident = given.get("id")
    return (
        isinstance(ident, str)
        and 0 < len(ident) <= 200
        and set(given) <= {"id", "name", "claims", "via"}
        and isinstance(given.get("claims", {}), dict)
    )
