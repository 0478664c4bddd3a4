"""A tether agent served over A2A: ``tether a2a serve [--profile P] [--agent A]``.

One of the profile's agents answers A2A 1.0 requests in both of A2A's HTTP bindings (JSON-RPC
at ``/``, HTTP+JSON under ``/rest``), under uvicorn, on the a2a-sdk's own request handler
(``SendMessage``, ``SendStreamingMessage``, ``GetTask``, ``ListTasks``, ``CancelTask``,
``SubscribeToTask``). tether supplies the three parts the SDK leaves to an agent: who runs a
task (:class:`TetherExecutor`), where tasks are kept (:class:`SessionTaskStore`) and how a
request finds its conversation (:class:`Contexts`).

* **A context is a tether session** of the served agent, in the profile's store: a message
  without ``contextId`` starts a new session, and the task's ``contextId`` is the session id
  (``tether sessions show ID`` shows the conversation). A message with the ``contextId`` of
  such a session continues it, from this process or after a restart (a turn a crash left open
  is closed first, as ``tether run --session`` does). A ``contextId`` this server did not hand
  out is refused ("invalid params"): the spec lets an agent refuse a client's own ids.
* **A task is one turn**: the message's text becomes a follow-up of the session's agent, and
  the turn's answer is the task's artifact ``answer``. Text parts are joined by newlines, data
  parts given as JSON, URL parts as markdown links, raw parts of text (``text/*``, JSON, XML,
  YAML) as their UTF-8 text; other raw bytes are refused (``ContentTypeNotSupportedError``).
  Tasks of one context run one after another.
* **Streaming**: the answer's pieces go out as artifact updates while the model writes them
  (``append``); a step that calls tools, or a request sent again (``retry``), starts the
  artifact over (an update without ``append`` replaces it, which A2A defines). When the turn
  ends, one last update (``lastChunk``, without ``append``) carries the whole answer: the
  task keeps it as one part.
* **How a turn ends**: ``completed`` and ``max-tokens`` complete the task (the answer as it
  is); ``refusal`` rejects it; ``error`` fails it, with tether's one-line error as the status
  message; ``aborted`` (``CancelTask``, or the server stopping) cancels it.
* **Questions**: the server is its runtime's permission host. A tool that needs approval (of
  the served agent, or of a child below it) makes the running task ``input-required``, its
  status message the question and its choices; the next message on the task answers it (an
  option's id or name, or yes/no words; anything else refuses) and the turn goes on in that
  task. Until then the context takes no other task (refused, saying which task waits).
* **A message on a working task steers its turn** (:mod:`tether_a2a._steering`): a message
  naming the task whose turn runs (no question open) is that turn's steer; one that comes
  after the turn's last step is the task's next turn. The task ends when its last turn does.
* **Tasks are kept in the session's log** (descriptors ``a2a/task``): when a task is created,
  and when it reaches a final state (its artifacts included). ``GetTask``, ``ListTasks`` and
  a follow-up read them after a restart. A task whose last record is not final belonged to a
  process that stopped while it ran: it is reported ``failed``, saying so. A context that runs
  no task for ``idle_close`` seconds is closed, and its tasks leave memory.
* **Authentication** (``[plugin.a2a.serve]``): bearer tokens from the environment and/or an
  ``authenticator`` callable; the card declares the bearer scheme. A caller sees only its own
  tasks and contexts (the SDK scopes tasks by the caller's name, and a context keeps its
  owner). The card itself is public.
* **Callers** (docs/callers.md): the authenticated caller ``NAME`` is the tether caller
  ``a2a:NAME`` (``via`` ``a2a``) with the name and claims ``[plugin.a2a.serve] callers`` gives
  it (:mod:`tether_a2a._callers`). A new context's session records it as its initiator, and
  each task's message runs with its sender's caller. A caller a gate refuses is answered with
  HTTP 403 and the refusal as the error's message; nothing is written (no session, no task,
  no message).
* **Trace context**: the ``traceparent``, ``tracestate`` and ``baggage`` headers of the
  request that sent a message go with it to the turn it starts (a tracing plugin continues
  the caller's trace).

Not done: push notifications, the gRPC binding, an extended card, and serving a profile whose
sessions run on a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import importlib
import inspect
import json
import logging
import math
import re
import signal
import socket
import sys
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import anyio
from a2a.auth.user import User
from a2a.helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext, RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
)
from anyio.abc import TaskGroup
from anyio.abc import TaskStatus as AnyioTaskStatus
from google.protobuf import json_format

from tether import __version__
from tether.agents import (
    PermissionQuestion,
    asking_root,
    check_servable,
    resolve_agent_name,
    trace_from,
)
from tether.errors import ErrorCode, PluginError, TetherError
from tether.models import ModelDelta, Usage
from tether.runtime import Runtime
from tether.store import (
    AssistantMessage,
    DescriptorEvent,
    InboxDiscarded,
    MessageSource,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

from ._callers import Callers, admit_new, caller_error, refusal_answer
from ._dialect import Fasta2aDialect
from ._http import (
    BACKLOG,
    HEADER_LIMIT,
    Admission,
    BodyReader,
    Limits,
    Listener,
    Notes,
    Room,
    protocol_class,
    quiet_accept_errors,
    refuse,
    too_large,
)
from ._model import GUARDRAILS_METADATA, USAGE_KEY
from ._settings import CARD_PATH, ServeSettings

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.loading import Kernel

__all__ = (
    "ANSWER_ARTIFACT",
    "TASK_DESCRIPTOR",
    "Contexts",
    "SessionTaskStore",
    "TetherExecutor",
    "agent_card",
    "serve",
)

log = logging.getLogger("tether.a2a.server")

#: The descriptor kind a served session records its A2A tasks in.
TASK_DESCRIPTOR = "a2a/task"
#: What a session id (so a context id of this server) looks like.
SESSION_ID = re.compile(r"ses_[0-9a-f]{16}")
#: The descriptor kind a served session records its owner in (the caller that started it).
OWNER_DESCRIPTOR = "a2a/owner"
#: The artifact a task's answer is.
ANSWER_ARTIFACT = "answer"
#: The task states written to the log (a task is also written when it is created).
_FINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)
#: Where the HTTP+JSON (REST) binding is served, under the base URL (JSON-RPC is at ``/``).
REST_PATH = "/rest"
#: How long a caller may keep the card (it changes only when the server restarts).
CARD_CACHE = "public, max-age=300"
#: Media types of raw parts taken as UTF-8 text (besides ``text/*``).
TEXT_MEDIA = frozenset({"application/json", "application/xml", "application/yaml"})
#: The media types a served agent takes, and answers in (its card's modes).
INPUT_MODES = ("text/plain", "application/json")
OUTPUT_MODES = ("text/plain",)
#: The states a task ends in.
_TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
#: What a task that was running when its server stopped says.
STOPPED = "the A2A server stopped before this task ended (its turn was closed on restart)"


# -------------------------------------------------------------------- contexts


@dataclass(eq=False)
class _Context:
    """An A2A context: a tether session held open by a host task until ``release`` is set."""

    agent: Agent
    owner: str
    release: anyio.Event = field(default_factory=anyio.Event)
    running: _Running | None = None
    """The task whose turn runs (or waits for an answer): one task of a context at a time."""
    freed: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) when the running task's turn ended."""
    last: float = field(default_factory=anyio.current_time)
    """When a request last used it, or its last task ended (``anyio.current_time()``)."""

    def used(self) -> None:
        self.last = anyio.current_time()

    @property
    def id(self) -> str:
        return self.agent.session_id

    def done(self, running: _Running) -> None:
        """``running``'s turn ended: the next task of the context may run."""
        if self.running is running:
            self.running = None
            self.last = anyio.current_time()
            self.freed.set()
            self.freed = anyio.Event()


class _Caller(User):
    """The caller a stored task or context belongs to (the SDK scopes tasks by this name)."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name


def _owner(call: ServerCallContext) -> str:
    return call.user.user_name


#: The source of a task's message (a person's follow-up).
_SENT = MessageSource(kind="user")


class Contexts(RequestContextBuilder):
    """Finds (or starts) the tether session of each message, and holds the sessions open.

    ``host`` is the task group that owns the sessions' tasks: it must outlive the server, and
    :meth:`release_all` must be called before it exits.
    """

    def __init__(
        self,
        runtime: Runtime,
        agent_name: str | None,
        model_spec: str | None,
        *,
        host: TaskGroup,
        idle_close: float = 600.0,
        callers: Callers | None = None,
    ) -> None:
        if runtime.store is None:
            raise ValueError("tether a2a serve needs a runtime with a session store")
        self.runtime = runtime
        self.callers = callers if callers is not None else Callers(ServeSettings())
        """Who each authenticated caller is (its name to its tether caller)."""
        self.store = runtime.store
        self.agent_name = resolve_agent_name(runtime.kernel, agent_name)
        self.model_spec = model_spec
        self.tasks: SessionTaskStore | None = None
        self._host = host
        if runtime.permission_host is None:
            runtime.permission_host = self.ask
        self._open: dict[str, _Context] = {}
        self._opening: dict[str, anyio.Lock] = {}
        self._closing = False
        self.idle_close = idle_close
        """Seconds a context may run no task before it is closed."""

    def get(self, context_id: str) -> _Context | None:
        return self._open.get(context_id)

    def start(self, function: Callable[[str], Coroutine[Any, Any, None]], argument: str) -> None:
        """Run ``function(argument)`` in the host group (it outlives the request)."""
        self._host.start_soon(function, argument)

    async def ask(self, question: PermissionQuestion) -> str | None:
        """The permission host: a question of a served agent (or of a child below it) goes
        to the client as the running task's ``input-required`` status; the next message on
        the task answers it (:func:`choice`). ``None`` (refused) when no task runs there, one
        question is open already, or the task is cancelled; also for a question that asks for
        information (an MCP server's elicitation), which is not forwarded yet (declined)."""
        if question.elicitation is not None:
            return None
        root = await asking_root(self.store, question.session, self._open)
        opened = self._open.get(root) if root is not None else None
        running = opened.running if opened is not None else None
        if running is None or running.updater is None or running.question is not None:
            return None
        running.question, running.reply = question, None
        running.replied = anyio.Event()
        running.push(_ASKED)
        try:
            await running.replied.wait()
        finally:
            running.question = None
        return choice(question, running.reply)

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if params is not None:
            # Refused before a session or a task exists: what tether cannot take, then what
            # no task can start from.
            _message_text(params.message)
            _check_message(params.message)
            if task_id and not context_id:
                context_id = session_of(task_id)  # the handler checked the task is there
            owner = _owner(context)
            rails = forwarded_names(params.message)
            if not context_id:  # the caller's first message, before its session is created
                self._admit_new(owner)
            opened = await self.open(context_id or None, owner, rails)
            context_id = opened.id
            running = opened.running
            answers = running is not None and running.question is not None
            if running is not None and running.question is not None and task_id != running.task_id:
                raise InvalidParamsError(
                    message=f"task {running.task_id} of this context waits for input: answer it "
                    "(a message with its taskId) or cancel it first"
                )
            if not answers:  # a message the agent takes: its sender asked before the task exists
                self._admit(opened, owner)
            task_id = task_id or f"{context_id}.{uuid.uuid4().hex}"
        return RequestContext(
            call_context=context, request=params, task_id=task_id, context_id=context_id, task=task
        )

    async def steer(self, opened: _Context, running: _Running, message: Message, owner: str) -> str:
        """Give ``message`` (on ``running``'s task, whose turn runs) to the running turn as a
        steer of ``owner``'s: its next step takes it, or, after its last step, it is the
        task's next turn (``Agent.steer``). Refused (HTTP 403) as a follow-up would be, before
        anything is written. The steer's message id."""
        text = _message_text(message)
        _check_message(message)
        running.steering += 1
        try:
            message_id = await opened.agent.steer(text, caller=self.callers.of(owner))
        except BaseException as exc:
            running.steer_settled(None)
            if isinstance(exc, TetherError):
                raise caller_error(exc) or InternalError(message=str(exc)) from None
            raise
        filed = Message()
        filed.CopyFrom(message)
        filed.task_id, filed.context_id = running.task_id, opened.id
        running.steer_settled(message_id, filed)
        if running.updater is None:  # the task was cancelled while it was being accepted
            await running.discard()
        opened.used()
        return message_id

    def _admit(self, opened: _Context, owner: str) -> None:
        """Whether the session's gates admit ``owner``'s message (as ``followup`` will ask
        them), before the a2a-sdk makes its task: a refused message leaves nothing (not even a
        failed task) behind."""
        try:
            opened.agent.inbox.source(_SENT, self.callers.of(owner), "followup")
        except TetherError as exc:
            raise caller_error(exc) or InternalError(message=str(exc)) from None

    def _admit_new(self, owner: str) -> None:
        """Whether the agent's gates admit ``owner``'s first message, before its session is
        created (:func:`admit_new`)."""
        try:
            gates = self.runtime.preset(self.agent_name).caller_gates
            admit_new(gates, self.agent_name, self.callers.of(owner))
        except TetherError as exc:
            raise caller_error(exc) or InternalError(message=str(exc)) from None

    async def open(
        self, context_id: str | None, owner: str, guardrails: tuple[str, ...] = ()
    ) -> _Context:
        """The open context ``context_id`` (``None``: a new one) for ``owner``, checked also by
        the ``guardrails`` a delegating tether forwarded (docs/guardrails.md)."""
        if context_id is None:
            return await self._start(None, owner, guardrails)
        if not SESSION_ID.fullmatch(context_id):
            raise _unknown_context(context_id)  # not an id this server hands out
        async with self._lock(context_id):
            opened = self._open.get(context_id)
            if opened is None:
                opened = await self._start(context_id, owner, guardrails)
            opened.used()  # not closed as idle while this request goes on
        if opened.owner != owner:
            raise _unknown_context(context_id)
        missing = set(guardrails) - {g.name for g in opened.agent.spec.guardrails}
        if missing:
            raise InvalidParamsError(
                message=f"context {context_id} is open, and not checked by the guardrails "
                f"{', '.join(sorted(missing))} this message forwards (metadata "
                f'"{GUARDRAILS_METADATA}"); send it once the context is closed'
            )
        return opened

    @contextlib.asynccontextmanager
    async def _lock(self, context_id: str) -> AsyncGenerator[None]:
        """Held while ``context_id`` is opened or closed (one of them at a time)."""
        lock = self._opening.setdefault(context_id, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._opening.pop(context_id, None)  # not kept for every id ever asked about

    async def _start(
        self, session_id: str | None, owner: str, guardrails: tuple[str, ...] = ()
    ) -> _Context:
        if self._closing:
            raise InternalError(message="the A2A server is stopping")
        if session_id is not None:
            try:
                header = await self.store.header(session_id)
            except TetherError as exc:
                if exc.code is ErrorCode.SESSION_NOT_FOUND:
                    raise _unknown_context(session_id) from None
                raise InternalError(message=str(exc)) from None
            if header.agent != self.agent_name or header.parent_session is not None:
                raise _unknown_context(session_id)
            recorded = await _recorded_owner(self, session_id)
            if recorded is None or recorded != owner:
                raise _unknown_context(session_id)
        try:
            agent = await self.runtime.compose(
                agent=self.agent_name,
                model=self.model_spec,
                session_id=session_id,
                label=None if session_id is not None else "a2a",
                caller=self.callers.of(owner),  # a new session's initiator
                guardrails=guardrails,  # forwarded: GUARDRAIL_INVALID when not offered here
            )
        except TetherError as exc:
            if exc.code is ErrorCode.GUARDRAIL_INVALID:
                raise InvalidParamsError(message=str(exc)) from None
            raise caller_error(exc) or InternalError(message=str(exc)) from None
        opened = _Context(agent, owner)
        try:
            await self._host.start(self._hold, opened, session_id is not None)
        except TetherError as exc:
            raise InternalError(message=str(exc)) from None
        return opened

    async def _hold(
        self, opened: _Context, restored: bool, *, task_status: AnyioTaskStatus[None]
    ) -> None:
        """Hold ``opened``'s agent open until it is released (a task of the host group):
        :meth:`Runtime.hold` restores its log (a turn a crash left open is closed), recovers
        its children after a crash (``restored``) and closes its model on leaving."""
        agent = opened.agent
        started = False
        try:
            async with self.runtime.hold(agent, recover=restored):
                if restored:  # what the stopped server left parked belongs to failed tasks
                    await agent.cancel(keep_inbox=False)
                else:
                    await agent.lease.record(
                        DescriptorEvent(kind=OWNER_DESCRIPTOR, data={"owner": opened.owner})
                    )
                self._open[opened.id] = opened
                started = True
                task_status.started()
                if self._closing:
                    opened.release.set()
                await self._until_idle(opened)
        except Exception:
            if not started:
                raise
            log.exception("context %s: leaving the agent failed", opened.id)
        finally:
            if self._open.get(opened.id) is opened:
                del self._open[opened.id]

    async def _until_idle(self, opened: _Context) -> None:
        """Wait until ``opened`` is released, or has run no task for :attr:`idle_close`
        seconds: then it is closed (a later message opens it again from the store) and its
        tasks leave memory (they are read from its log again when asked about)."""
        while not opened.release.is_set():
            left = opened.last + self.idle_close - anyio.current_time()
            with anyio.move_on_after(max(0.0, left)):
                await opened.release.wait()
            if opened.release.is_set() or opened.running is not None:
                continue
            if anyio.current_time() - opened.last < self.idle_close:
                continue
            async with self._lock(opened.id):
                idle = anyio.current_time() - opened.last >= self.idle_close
                if opened.running is None and idle and self._open.get(opened.id) is opened:
                    del self._open[opened.id]
                    if self.tasks is not None:
                        await self.tasks.forget(opened.id)
                    return

    async def cancel_all(self) -> None:
        """The server stops: every task that runs or waits for input is cancelled (and
        written so), then its turn interrupted."""
        for opened in [*self._open.values()]:
            running = opened.running
            if running is not None:
                await running.cancel()
                opened.agent.interrupt()
                if self.tasks is not None:  # written now: the SDK's queues close next
                    await self.tasks.cancelled(running.task_id, opened.id)

    def release_all(self) -> None:
        """Let every open agent leave its ``async with`` (their host tasks then end)."""
        self._closing = True
        for opened in self._open.values():
            if opened.running is not None:
                opened.running.replied.set()
            opened.agent.interrupt()
            opened.release.set()


async def _recorded_owner(contexts: Contexts, session_id: str) -> str | None:
    """The caller that started the served session ``session_id`` (``None``: not one this
    server started)."""
    for stored in await contexts.store.events(session_id, limit=64):
        event = stored.event
        if isinstance(event, DescriptorEvent) and event.kind == OWNER_DESCRIPTOR:
            owner = event.data.get("owner")
            return owner if isinstance(owner, str) else None
    return None


def _unknown_context(context_id: str) -> InvalidParamsError:
    shown = json.dumps(context_id[:200])
    return InvalidParamsError(
        message=f"context {shown} is not known here; send the message without contextId to "
        "start a new conversation"
    )


def session_of(task_id: str) -> str:
    """The session (context) a task id of this server names (``SESSION.HEX``)."""
    return task_id.rpartition(".")[0] or task_id


def forwarded_names(message: Message) -> tuple[str, ...]:
    """The guardrail names a message's ``metadata["tether/guardrails"]`` forwards (none when
    it names none); invalid params when they are not a list of names."""
    if GUARDRAILS_METADATA not in message.metadata.fields:
        return ()
    names: object = json_format.MessageToDict(message.metadata).get(GUARDRAILS_METADATA)
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):  # pyright: ignore[reportUnknownVariableType]
        raise InvalidParamsError(
            message=f'metadata["{GUARDRAILS_METADATA}"] must be a list of guardrail names, '
            f"not {names!r:.80}"
        )
    return tuple(dict.fromkeys(cast("list[str]", names)))


def _check_message(message: Message) -> None:
    """Refuse ("invalid params") a message a task cannot start from: not the user's, without
    parts, or with an empty text part (what the SDK's task helper would fail on later)."""
    if message.role != Role.ROLE_USER:
        role = Role.Name(message.role) if message.role in Role.values() else str(message.role)
        raise InvalidParamsError(
            message=f"a message to the agent has role ROLE_USER, not {role} (message.role)"
        )
    if not message.parts:
        raise InvalidParamsError(message="a message needs at least one part (message.parts)")
    for index, part in enumerate(message.parts):
        if part.HasField("text") and not part.text:
            raise InvalidParamsError(message=f"message.parts[{index}].text is empty")


def _message_text(message: Message) -> str:
    """What a message says to the agent: text as is, data as JSON, URLs as markdown links."""
    pieces: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            value = json_format.MessageToDict(part.data)
            pieces.append(json.dumps(value, ensure_ascii=False))
        elif kind == "url":
            pieces.append(f"[{part.filename or part.url}]({part.url})")
        else:
            pieces.append(_raw_text(part.raw, part.media_type))
    return "\n".join(pieces)


def _raw_text(raw: bytes, media_type: str) -> str:
    """A raw part of text (``text/*``, JSON, XML, YAML) as its UTF-8 text."""
    media = media_type.partition(";")[0].strip().lower()
    if media.startswith("text/") or media in TEXT_MEDIA:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            problem = f"a raw part of media type {media!r} is not UTF-8"
    else:
        problem = f"tether takes text: a raw part of media type {media or 'unknown'!r} is not taken"
    raise ContentTypeNotSupportedError(
        message=f"{problem} (send text, data, a URL, or raw text/* in UTF-8)"
    )


# -------------------------------------------------------------------- tasks


class SessionTaskStore(TaskStore):
    """A2A tasks kept in the log of the session they belong to (descriptors ``a2a/task``).

    What the SDK saves goes to an in-memory store (the owner-scoped reads and ``ListTasks``
    paging are the SDK's own); a task is written to the log when it is created and when it
    reaches a final state (or asks). A session's stored tasks are read into memory when it is
    first asked about (``GetTask``, ``ListTasks`` of its context, a follow-up), and leave it
    when the context is closed as idle. A ``ListTasks`` of every context reads the logs of
    the sessions not in memory for that call only.
    """

    def __init__(self, contexts: Contexts) -> None:
        self.contexts = contexts
        contexts.tasks = self
        self._memory = InMemoryTaskStore()
        self._written: dict[str, int] = {}
        """Per task in memory: the state last written to the log."""
        self._sessions: dict[str, dict[str, str]] = {}
        """Per session with tasks in memory: their ids and owners."""
        self._loaded: set[str] = set()
        """Sessions whose log was read into memory."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._memory.save(task, context)
        owner = _owner(context)
        self._sessions.setdefault(task.context_id, {})[task.id] = owner
        state = task.status.state
        if task.id in self._written and (state not in _FINAL or self._written[task.id] == state):
            return
        opened = self.contexts.get(task.context_id)
        if opened is None:
            log.warning("task %s: its context is not open; not written", task.id[:200])
            return
        data = {"owner": owner, "task": json_format.MessageToDict(task)}
        await opened.agent.lease.record(DescriptorEvent(kind=TASK_DESCRIPTOR, data=data))
        self._written[task.id] = state

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        await self._load(session_of(task_id))
        return await self._memory.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        if params.context_id:
            await self._load(params.context_id)
            return await self._memory.list(params, context)
        every = InMemoryTaskStore()  # for this call only: the logs of every served session
        agent = self.contexts.agent_name
        for header in await self.contexts.store.sessions():
            if header.agent != agent or header.parent_session is not None:
                continue
            # What memory holds of a session is newer than its log: a task this process saved
            # is in memory before its record is in the log (an open context's, not yet read).
            held = self._sessions.get(header.id, {})
            if header.id not in self._loaded:
                for owner, task in await self._read(header.id):
                    if task.id not in held:
                        await every.save(task, ServerCallContext(user=_Caller(owner)))
            for task_id, owner in [*held.items()]:
                caller = ServerCallContext(user=_Caller(owner))
                task = await self._memory.get(task_id, caller)
                if task is not None:
                    await every.save(task, caller)
        return await every.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        # Forgotten here only: the session's log keeps its record.
        await self._memory.delete(task_id, context)

    async def cancelled(self, task_id: str, session_id: str) -> None:
        """Record ``task_id`` cancelled, unless it ended (the server stops)."""
        owner = self._sessions.get(session_id, {}).get(task_id)
        if owner is None:
            return
        caller = ServerCallContext(user=_Caller(owner))
        task = await self._memory.get(task_id, caller)
        if task is None or task.status.state in _TERMINAL:
            return
        ended = Task()
        ended.CopyFrom(task)
        ended.status.Clear()
        ended.status.state = TaskState.TASK_STATE_CANCELED
        ended.status.timestamp.GetCurrentTime()
        await self.save(ended, caller)

    async def forget(self, session_id: str) -> None:
        """``session_id``'s context was closed: its tasks leave memory (not the log)."""
        self._loaded.discard(session_id)
        for task_id, owner in self._sessions.pop(session_id, {}).items():
            self._written.pop(task_id, None)
            await self._memory.delete(task_id, ServerCallContext(user=_Caller(owner)))

    async def _load(self, session_id: str) -> None:
        if session_id in self._loaded or not SESSION_ID.fullmatch(session_id):
            return
        found = await self._read(session_id)
        if session_id in self._loaded:
            return  # read meanwhile by another request
        self._loaded.add(session_id)
        known = self._sessions.setdefault(session_id, {})
        for owner, task in found:
            if task.id in known:
                continue  # saved by this process meanwhile: what memory holds is newer
            known[task.id] = owner
            self._written[task.id] = task.status.state
            await self._memory.save(task, ServerCallContext(user=_Caller(owner)))

    async def _read(self, session_id: str) -> list[tuple[str, Task]]:
        """The tasks ``session_id``'s log records (the last record of each), with owners."""
        try:
            events = await self.contexts.store.events(session_id)
        except TetherError as exc:
            if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                raise InternalError(message=str(exc)) from None
            return []
        found: dict[str, tuple[str, Task]] = {}
        for stored in events:
            event = stored.event
            if isinstance(event, DescriptorEvent) and event.kind == TASK_DESCRIPTOR:
                task = _stored_task(event.data)
                if task is not None:
                    found[task.id] = (str(event.data.get("owner", "")), task)
        live = self.contexts.get(session_id)
        running = live.running.task_id if live is not None and live.running else None
        for _, task in found.values():
            if task.status.state not in _TERMINAL and task.id != running:
                # It ran (or waited) when the server that had it stopped.
                task.status.CopyFrom(_failed_status(STOPPED))
        return [*found.values()]


def _stored_task(data: Mapping[str, Any]) -> Task | None:
    try:
        return json_format.ParseDict(data.get("task") or {}, Task(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError) as exc:
        log.warning("a stored A2A task could not be read (%s); skipped", exc)
        return None


def _failed_status(reason: str) -> TaskStatus:
    status = TaskStatus(state=TaskState.TASK_STATE_FAILED)
    status.message.CopyFrom(
        Message(role=Role.ROLE_AGENT, message_id=uuid.uuid4().hex, parts=[new_text_part(reason)])
    )
    status.timestamp.GetCurrentTime()
    return status


# -------------------------------------------------------------------- turns


class _Signal:
    """A marker put on a running turn's event stream next to the agent's events."""

    def __init__(self, name: str) -> None:
        self.name = name


_IDLE = _Signal("idle")
"""The agent went idle."""
_ASKED = _Signal("asked")
"""The turn asks a question (a tool that needs approval): the task goes input-required."""
_SETTLED = _Signal("settled")
"""A steer being accepted was refused (or failed): a turn end held for it may be written."""


@dataclass(frozen=True)
class _Steered:
    """A steer of the task was accepted: its message joins the task's history."""

    message: Message


class _Running:
    """The turn of one task, from its message to its end.

    Its pump (a task of the host group) reads the agent's events and writes what they mean
    through :attr:`updater`, the updater of the ``execute`` call waiting on it: the first one,
    then, after a question, the one that brings the answer. A task that waits for input has no
    ``execute`` waiting; a cancelled one has none either (what is left is dropped).
    """

    def __init__(self, opened: _Context, task_id: str) -> None:
        self.opened = opened
        self.task_id = task_id
        self._send, self._receive = anyio.create_memory_object_stream[object](math.inf)
        self.updater: TaskUpdater | None = None
        self.paused = anyio.Event()
        """Set when the waiting ``execute`` may return (a question was asked, or it ended)."""
        self.answer = _Answer()
        self.message_id: str | None = None
        self.question: PermissionQuestion | None = None
        self.reply: str | None = None
        self.replied = anyio.Event()
        self.steers: set[str] = set()
        """The message ids of the task's steers accepted and not yet claimed (nor discarded):
        while one is left when a turn ends, it is the next turn, of this task."""
        self.steering = 0
        """Steers of the task being accepted now: a turn that ends meanwhile waits for them."""
        self.ending = False
        """The pump writes the task's end: it takes no more steers."""
        self._armed = False
        agent = opened.agent
        self._stops = [agent.listen(self.push), agent.listen_deltas(self.push)]
        self._stops.append(agent.loop.on_idle(self._idle))

    def push(self, item: object) -> None:  # an agent listener: must never raise
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(item)

    def _idle(self) -> None:
        if self._armed:
            self.push(_IDLE)

    def attach(self, updater: TaskUpdater) -> None:
        """``updater``'s ``execute`` waits on the turn now."""
        self.updater = updater
        self.paused = anyio.Event()

    @property
    def steerable(self) -> bool:
        """Whether a message on the task steers its turn now: an ``execute`` waits on it (it
        was not cancelled), no question is open (the next message answers that), and its
        end is not being written."""
        return self.updater is not None and self.question is None and not self.ending

    def steer_settled(self, message_id: str | None, message: Message | None = None) -> None:
        """A steer counted in :attr:`steering` was accepted as ``message_id`` (its A2A
        ``message`` joins the history), or refused (``None``)."""
        self.steering -= 1
        if message_id is not None and message is not None:
            self.steers.add(message_id)
            self.push(_Steered(message))
        else:
            self.push(_SETTLED)

    async def pump(self, message_id: str) -> None:
        agent = self.opened.agent
        self.message_id, self._armed = message_id, True
        if agent.status == "idle":
            self.push(_IDLE)  # it may have gone idle before it was armed
        turn: int | None = None
        held: TurnEnded | None = None  # a turn's end, held while a steer is being accepted
        usage = Usage()
        try:
            with self._receive, self._send:
                async for item in self._receive:
                    if isinstance(item, _Steered) or item is _SETTLED:
                        if isinstance(item, _Steered):
                            await self._write(_steered, item.message)
                        if agent.status == "idle":
                            self.push(_IDLE)  # one heard while it was being accepted was skipped
                        if held is None or self.steering:
                            continue
                        item, held = held, None  # the steers settled: the end it waited for
                    if item is _ASKED:
                        if self.question is not None:
                            await self._write(_requires_input, self.question)
                        self.paused.set()
                    elif item is _IDLE:
                        if agent.status != "idle" or self.steering or held is not None:
                            continue  # woken again (by a message sent meanwhile), or to be
                        if agent.fault is not None:  # the store refused to record the turn
                            await self._write(_fail, str(agent.fault))
                            return
                        if turn is not None:  # its end would have come before: it was lost
                            await self._write(_fail, "the turn ended without its end recorded")
                            return
                        # Interrupted before its turn (or its steers' turn) began: the
                        # messages must not run later.
                        await self.discard()
                        await self._write(_cancel)
                        return
                    elif isinstance(item, ModelDelta):
                        if turn is not None:  # not another turn's (a notice's) pieces
                            await self._write(self.answer.delta, item)
                    elif isinstance(item, TurnStarted) and (
                        item.message_id == message_id or item.message_id in self.steers
                    ):
                        turn = item.turn
                        self.steers.discard(item.message_id or "")
                        self.answer.new_turn()
                    elif isinstance(item, UserMessage | InboxDiscarded):
                        self.steers.discard(item.message_id)  # claimed by a step, or dropped
                    elif turn is not None and isinstance(item, AssistantMessage):
                        self.answer.step(item)
                    elif turn is not None and isinstance(item, TurnEnded) and item.turn == turn:
                        if self.steering:
                            held = item  # a steer being accepted may be this task's next turn
                            continue
                        usage += item.usage
                        if self.steers and item.stop_reason != "aborted":
                            turn = None  # its steers that came too late are the next turns
                            if agent.status == "idle":
                                self.push(_IDLE)  # unless they were left parked
                            continue
                        self.ending = True
                        if self.steers:  # aborted: they must not run later
                            await self.discard()
                        ended = item.model_copy(update={"usage": usage})
                        await self._write(self.answer.end, ended)
                        return
        finally:
            self.ending = True
            for stop in self._stops:
                stop()
            self.replied.set()  # a question still open is refused
            self.opened.done(self)
            self.paused.set()

    async def discard(self) -> None:
        """Drop what the agent has queued (the task's message or steers that did not run):
        ``inbox/discarded``, never run later."""
        try:
            await self.opened.agent.cancel(keep_inbox=False)
        except Exception as exc:
            log.warning("task %s: its messages were not discarded (%s)", self.task_id[:200], exc)

    def abandon(self) -> None:
        """The task's message was never accepted: no pump runs; stop listening."""
        for stop in self._stops:
            stop()
        self._receive.close()
        self._send.close()
        self.opened.done(self)

    async def cancel(self) -> None:
        """Write the task cancelled (through the updater the pump writes with, so only one
        end is written) and let nothing more be written; a question waiting is refused."""
        updater, self.updater = self.updater, None
        self.replied.set()
        if updater is not None:
            try:
                await updater.cancel()
            except Exception as exc:  # it ended meanwhile (its end is written), or the queue closed
                log.debug("task %s: not cancelled (%s)", self.task_id[:200], exc)

    async def _write(self, write: Callable[..., Awaitable[None]], *arguments: Any) -> None:
        """``write(updater, *arguments)`` through the waiting ``execute``'s updater."""
        updater = self.updater
        if updater is None:
            return  # nobody waits (cancelled): dropped
        try:
            await write(updater, *arguments)
        except Exception as exc:  # the request's queue closed under it (the server stops)
            log.debug("task %s: an update was dropped (%s)", self.task_id[:200], exc)


class TetherExecutor(AgentExecutor):
    """Runs each task as one turn of its context's agent, streaming the answer's pieces; a
    question the turn asks (a tool that needs approval) makes the task input-required, and
    the next message on the task answers it."""

    def __init__(self, contexts: Contexts) -> None:
        self.contexts = contexts

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id, message = context.task_id, context.context_id, context.message
        if task_id is None or context_id is None or message is None:
            raise InternalError(message="a task without a message")
        owner = _owner(context.call_context)
        opened = self.contexts.get(context_id)
        if opened is None:
            opened = await self.contexts.open(context_id, owner)
        if context.current_task is None:  # the SDK wants the task before its updates
            await event_queue.enqueue_event(new_task_from_user_message(message))
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = _message_text(message)
        running = opened.running
        if running is not None and running.task_id == task_id and running.question is not None:
            running.attach(updater)  # the answer to the task's question
            await updater.start_work()
            running.reply = text
            running.replied.set()
        else:
            while opened.running is not None:  # one task of a context at a time
                await opened.freed.wait()
            running = opened.running = _Running(opened, task_id)
            running.attach(updater)
            headers = context.call_context.state.get("headers")
            trace = trace_from(cast("Mapping[str, object]", headers)) if headers else None
            try:
                await updater.start_work()
                sender = self.contexts.callers.of(owner)  # admitted already (Contexts.build)
                message_id = await opened.agent.followup(text, trace=trace, caller=sender)
            except BaseException as exc:  # cancelled meanwhile, or the store refused it
                running.abandon()
                if isinstance(exc, TetherError):
                    raise caller_error(exc) or InternalError(message=str(exc)) from None
                raise
            self.contexts.start(running.pump, message_id)
        try:
            await running.paused.wait()
        finally:
            if not running.paused.is_set():  # cancelled: CancelTask, or the server stops
                running.updater = None
                opened.agent.interrupt()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        opened = self.contexts.get(context_id)
        running = opened.running if opened is not None else None
        if opened is not None and running is not None and running.task_id == task_id:
            await running.cancel()
            if running.steers or running.steering:
                await opened.agent.cancel(keep_inbox=False)  # its steers must not run later
            else:
                opened.agent.interrupt()
        # Otherwise its turn is over (its end is written, or being written): the SDK closes
        # out a task that is still not final.


def _says(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


async def _requires_input(updater: TaskUpdater, question: PermissionQuestion) -> None:
    await updater.requires_input(_says(updater, _asking(question)))


async def _fail(updater: TaskUpdater, reason: str) -> None:
    await updater.failed(_says(updater, reason))


async def _cancel(updater: TaskUpdater) -> None:
    await updater.cancel()


async def _steered(updater: TaskUpdater, message: Message) -> None:
    """A steer joins the task's history: the SDK moves a status's message into the history
    when the next status comes, so the steer is the message of one ``working`` status (a
    stream sees the steer taken), and the next ``working`` status files it."""
    await updater.update_status(TaskState.TASK_STATE_WORKING, message)
    await updater.update_status(TaskState.TASK_STATE_WORKING)


def _asking(question: PermissionQuestion) -> str:
    """The status message of a task whose turn asks ``question``."""
    choices = ", ".join(f"{option} ({name})" for option, name, _ in question.options)
    return f"{question.title} needs approval ({question.who}). Answer with one of: {choices}."


#: Answers that mean the first option of a kind.
_YES = frozenset({"yes", "y", "ok", "allow", "approve", "approved", "go ahead"})
_NO = frozenset({"no", "n", "deny", "denied", "reject", "refuse", "stop"})


def choice(question: PermissionQuestion, reply: str | None) -> str | None:
    """The option ``reply`` picks: an option's id or name, or yes/no words for the first
    allowing or rejecting option; ``None`` (refused) for anything else."""
    if reply is None:
        return None
    said = reply.strip().strip(".!").lower()
    for option, name, _ in question.options:
        if said in (option.lower(), name.lower()):
            return option
    wanted = "allow" if said in _YES else "reject" if said in _NO else None
    if wanted is None:
        return None
    return next((option for option, _, kind in question.options if kind.startswith(wanted)), None)


class _Answer:
    """The artifact ``answer`` of one task, streamed piece by piece."""

    def __init__(self) -> None:
        self._fresh = True  # the next piece starts the artifact over
        self._answer = ""  # the turn's last answer without tool calls

    async def delta(self, updater: TaskUpdater, delta: ModelDelta) -> None:
        if delta.kind == "retry":
            self._fresh = True
        elif delta.kind == "text" and delta.text:
            await updater.add_artifact(
                [new_text_part(delta.text)],
                artifact_id=ANSWER_ARTIFACT,
                name=ANSWER_ARTIFACT,
                append=not self._fresh,
            )
            self._fresh = False

    def new_turn(self) -> None:
        """A turn of the task begins (a steer that came after the last one's last step): its
        answer starts the artifact over."""
        self._fresh = True
        self._answer = ""

    def step(self, message: AssistantMessage) -> None:
        if message.tool_calls:  # not the answer: the next step's text replaces it
            self._fresh = True
            self._answer = ""
        else:
            self._answer = message.content

    async def end(self, updater: TaskUpdater, event: TurnEnded) -> None:
        if event.stop_reason == "aborted":
            await updater.cancel()
            return
        # The turn's usage, on the final status (the SDK merges it into the task's metadata).
        used = usage_metadata(event.usage)
        if event.stop_reason == "error":
            reason = _says(updater, event.error or "the turn failed")
            await updater.update_status(TaskState.TASK_STATE_FAILED, reason, metadata=used)
            return
        # The whole answer replaces the pieces (``append`` false): the task keeps it as one
        # part, and a client that streamed sees the pieces were this answer.
        answer = self._answer
        await updater.add_artifact(
            [new_text_part(answer)],
            artifact_id=ANSWER_ARTIFACT,
            name=ANSWER_ARTIFACT,
            append=False,
            last_chunk=True,
        )
        if event.stop_reason == "refusal":
            refused = _says(updater, answer or "the agent refused")
            await updater.update_status(TaskState.TASK_STATE_REJECTED, refused, metadata=used)
        else:
            await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=used)


def usage_metadata(usage: Usage) -> dict[str, Any] | None:
    """A task's ``usage`` metadata (:data:`tether_a2a._model.USAGE_KEY`): the turn's tokens,
    as its model reported them; ``None`` when it reported none."""
    if not (usage.input_tokens or usage.output_tokens):
        return None
    counts = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if usage.cached_input_tokens:
        counts["cached_input_tokens"] = usage.cached_input_tokens
    if usage.cache_write_input_tokens:
        counts["cache_write_input_tokens"] = usage.cache_write_input_tokens
    return {USAGE_KEY: counts}


# -------------------------------------------------------------------- card and auth


async def agent_card(
    runtime: Runtime, agent_name: str | None, url: str, settings: ServeSettings
) -> AgentCard:
    """The card of the served agent: its name and description, the skills its catalog lists
    (those the model may load), its JSON-RPC (``url``) and HTTP+JSON interfaces, streaming,
    and the bearer scheme when callers must authenticate."""
    kernel = runtime.kernel
    name = resolve_agent_name(kernel, agent_name)
    table = kernel.profile.agent.get(name) if name is not None else None
    description = (table.description if table is not None else None) or (
        f"A tether agent ({name or 'the profile'}'s)"
    )
    scope = kernel.agent_scope(name) if name is not None else None
    catalog = await runtime.skills.list(scope=scope)
    # Each skill says its modes (the card's own): optional in the spec, required by fasta2a's
    # card schema (pydantic-ai's A2A client).
    modes: dict[str, Any] = {"input_modes": INPUT_MODES, "output_modes": OUTPUT_MODES}
    skills = [
        AgentSkill(id=s.name, name=s.name, description=s.description, tags=["skill"], **modes)
        for s in catalog.summaries
        if s.invocation.model_invocable
    ]
    if not skills:  # the card needs one: the agent itself
        skills = [
            AgentSkill(
                id=name or "agent",
                name=name or "agent",
                description=description,
                tags=["agent"],
                **modes,
            )
        ]
    card = AgentCard(
        name=settings.name or name or "tether",
        description=description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(
                url=url.rstrip("/") + REST_PATH,
                protocol_binding="HTTP+JSON",
                protocol_version="1.0",
            ),
            # The same endpoints speak A2A 0.3 (the a2a-sdk's compatibility layer): these two
            # make the card's 0.3 fields (url, preferredTransport, protocolVersion,
            # additionalInterfaces), which 0.3 clients (strands, fasta2a) need.
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
            AgentInterface(
                url=url.rstrip("/") + REST_PATH,
                protocol_binding="HTTP+JSON",
                protocol_version="0.3",
            ),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=INPUT_MODES,
        default_output_modes=OUTPUT_MODES,
        skills=skills,
    )
    if settings.authenticates:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        requirement = SecurityRequirement()
        requirement.schemes["bearer"].SetInParent()
        card.security_requirements.append(requirement)
    return card


def card_routes(card: AgentCard) -> list[Any]:
    """The route of the card (``/.well-known/agent-card.json``), in two forms:

    * to a caller that says ``A2A-Version: 1.x``, the A2A 1.0 card as the spec's schema has it
      (its interfaces list the 0.3 ones too, as interfaces);
    * to any other caller (A2A 0.3 sends no version header), the same card with 0.3's fields
      beside 1.0's (``url``, ``preferredTransport``, ``protocolVersion``,
      ``additionalInterfaces``: the a2a-sdk's merged card), which 0.3 clients need (strands'
      a2a-sdk 0.3 requires ``url``). A 1.0 client that sends no version reads them as unknown
      fields; the conformance kit's 1.0 card schema refuses them, and it says its version.

    Each with the a2a-sdk's weak ``ETag`` (a matching ``If-None-Match`` gets 304), cached
    5 minutes, ``Vary: A2A-Version``."""
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    forms: dict[bool, dict[str, Any]] = {
        True: json_format.MessageToDict(card),
        False: agent_card_to_dict(card),
    }
    tags = {current: _card_tag(form) for current, form in forms.items()}

    async def answer(request: Request) -> Response:
        current = request.headers.get("a2a-version", "").strip().startswith("1.")
        headers = {"ETag": tags[current], "Cache-Control": CARD_CACHE, "Vary": "A2A-Version"}
        asked = [tag.strip() for tag in request.headers.get("if-none-match", "").split(",")]
        # RFC 9110 8.2.2: weak comparison (W/"x" matches "x"), and * matches any.
        if "*" in asked or tags[current].removeprefix("W/") in [
            tag.removeprefix("W/") for tag in asked if tag
        ]:
            return Response(status_code=304, headers=headers)
        return JSONResponse(forms[current], headers=headers)

    return [Route(CARD_PATH, answer, methods=["GET"])]


def _card_tag(card: Mapping[str, Any]) -> str:
    """A weak ETag of a card: the SHA-256 of its JSON with sorted keys, without its
    ``signatures`` (as the a2a-sdk's own card route makes it: a card signed anew per request
    is the same card)."""
    unsigned = {key: value for key, value in card.items() if key != "signatures"}
    body = json.dumps(unsigned, sort_keys=True, separators=(",", ":"))
    return f'W/"{hashlib.sha256(body.encode()).hexdigest()}"'


Authenticator = Callable[[Mapping[str, str]], "str | Awaitable[str | None] | None"]

#: The media types a JSON-RPC request may have (A2A 1.0, 9: "Content-Type: application/json
#: for requests and responses").
RPC_MEDIA = frozenset({"application/json"})
#: ... and an HTTP+JSON one: 11.1's ``application/json``, and the type 14.1 registers "for
#: the HTTP+JSON/REST binding" (``application/a2a+json``, which clients such as the a2a-sdk's
#: send).
REST_MEDIA = frozenset({"application/json", "application/a2a+json"})


def _is_rest(path: str) -> bool:
    return path == REST_PATH or path.startswith(REST_PATH + "/")


def _unsupported_media(rest: bool, media: str) -> Mapping[str, object]:
    """The binding's ContentTypeNotSupportedError for a request body of type ``media``
    (HTTP 415 either way: A2A 1.0, 5.4)."""
    shown = media[:100] or "none"
    if rest:
        from a2a.utils.error_handlers import build_rest_error_payload

        payload = build_rest_error_payload(
            ContentTypeNotSupportedError(
                message=f"HTTP+JSON requests are application/json (the body's type: {shown})"
            )
        )
        payload["error"]["code"] = 415  # the SDK's table says 400; 5.4 says 415
        return payload
    error = {
        "code": -32005,
        "message": f"A2A JSON-RPC requests are application/json (the body's type: {shown})",
    }
    return {"jsonrpc": "2.0", "id": None, "error": error}


#: The HTTP status of each A2A error in the HTTP+JSON binding, by its ErrorInfo reason (A2A
#: 1.0, 5.4), where the a2a-sdk's differs: it answers 400 for ContentTypeNotSupportedError
#: and TaskNotCancelableError, 500 for InvalidAgentResponseError.
REST_STATUS = {
    "CONTENT_TYPE_NOT_SUPPORTED": 415,
    "TASK_NOT_CANCELABLE": 409,
    "INVALID_AGENT_RESPONSE": 502,
}


def _rest_answer(send: Any) -> Any:
    """``send`` for an HTTP+JSON answer, made as A2A 1.0 says (the a2a-sdk's differ):

    * ``Content-Type: application/json``, 11.1's "application/json for requests and
      responses" (the SDK says ``application/a2a+json`` for its successes, ``application/json``
      for its errors);
    * an A2A error's HTTP status as the table of 5.4 maps it (:data:`REST_STATUS`), in the
      status line and the AIP-193 body's ``error.code``.
    """
    held: dict[str, Any] | None = None
    body: list[bytes] = []

    async def answer(message: Any) -> None:
        nonlocal held
        if message["type"] == "http.response.start":
            headers = [
                (key, b"application/json")
                if key.lower() == b"content-type" and value.startswith(b"application/a2a+json")
                else (key, value)
                for key, value in message.get("headers", ())
            ]
            message = {**message, "headers": headers}
            if message.get("status", 200) >= 400:
                held = message  # its status may change: sent with the body
                return
        elif message["type"] == "http.response.body" and held is not None:
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            start, whole = _rest_status(held, b"".join(body))
            held = None
            await send(start)
            await send({"type": "http.response.body", "body": whole})
            return
        await send(message)

    return answer


def _rest_status(start: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bytes]:
    """``start`` and ``body`` of an HTTP+JSON error with the status 5.4 gives its reason."""
    try:
        data: Any = json.loads(body)
        error = cast("dict[str, Any]", data["error"])
        details = cast("list[Any]", error.get("details") or [])
    except (ValueError, KeyError, TypeError):
        return start, body
    reasons = [cast("dict[str, Any]", d).get("reason") for d in details if isinstance(d, dict)]
    status = next(
        (REST_STATUS[r] for r in reasons if isinstance(r, str) and r in REST_STATUS), None
    )
    if status is None or status == start.get("status"):
        return start, body
    error["code"] = status
    whole = json.dumps(data).encode()
    headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(whole)).encode()))
    return {**start, "status": status, "headers": headers}, whole


def load_authenticator(spec: str) -> Authenticator:
    """The callable ``module:attribute`` names."""
    module_name, _, attribute = spec.partition(":")
    module = importlib.import_module(module_name)
    found = getattr(module, attribute)
    if not callable(found):
        raise TypeError(f"{spec} is not callable")
    return cast(Authenticator, found)


class Guard:
    """An ASGI wrapper in front of the A2A routes. A request must be JSON (else HTTP 415), of a
    declared length (411) of at most ``max_body`` (413), refused before its body is read.
    When callers authenticate (``tokens``: token -> caller name, and/or ``authenticate``,
    which names the caller of a request's headers), an unknown caller gets HTTP 401 with
    ``WWW-Authenticate: Bearer`` and a known one becomes the request's user (the SDK scopes
    tasks by it). The card is public."""

    def __init__(
        self,
        app: Any,
        tokens: Mapping[str, str] | None = None,
        authenticate: Authenticator | None = None,
        *,
        max_body: int = 4 * 2**20,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.tokens = dict(tokens or {})
        self.authenticate = authenticate
        self.open = not self.tokens and authenticate is None
        self.modified = email.utils.formatdate(usegmt=True).encode()
        """When the card was made: its ``Last-Modified``."""

    def _dated(self, send: Any) -> Any:
        async def dated(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ())]}
                message["headers"].append((b"last-modified", self.modified))
            await send(message)

        return dated

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") == CARD_PATH:
            await self.app(scope, receive, self._dated(send))
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", ())
        }
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        length = headers.get("content-length", "")
        if scope.get("method") == "POST" and not length.isdigit():
            await refuse(send, 411, {"error": "a request needs a Content-Length"})
            return
        if scope.get("method") == "POST" and int(length) > self.max_body:
            await refuse(send, 413, too_large(self.max_body))
            return
        rest = _is_rest(scope.get("path", ""))
        if scope.get("method") == "POST" and media not in (REST_MEDIA if rest else RPC_MEDIA):
            await refuse(send, 415, _unsupported_media(rest, media))
            return
        if rest:
            send = _rest_answer(send)
        send = refusal_answer(send)  # a caller a gate refused: HTTP 403
        if self.open:
            await self.app(scope, receive, send)
            return
        caller = await self._caller(headers)
        if caller is None:
            await refuse(
                send,
                401,
                {"error": "authentication required (Authorization: Bearer TOKEN)"},
                [(b"www-authenticate", b"Bearer")],
            )
            return
        from starlette.authentication import AuthCredentials, SimpleUser

        scope["user"] = SimpleUser(caller)
        scope["auth"] = AuthCredentials(["authenticated"])
        await self.app(scope, receive, send)

    async def _caller(self, headers: Mapping[str, str]) -> str | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip() in self.tokens:
            return self.tokens[token.strip()]
        if self.authenticate is None:
            return None
        try:
            found = self.authenticate(headers)
            if inspect.isawaitable(found):
                found = await found
        except Exception:
            log.exception("the A2A authenticator failed; the request is refused")
            return None
        return found if isinstance(found, str) and found else None


# -------------------------------------------------------------------- serving


async def serve(
    kernel: Kernel,
    *,
    agent_name: str | None = None,
    model_spec: str | None = None,
    host: str | None = None,
    port: int | None = None,
    url: str | None = None,
) -> None:
    """Serve ``kernel``'s agent over A2A until the process is told to stop (SIGINT, SIGTERM).

    ``host``, ``port`` and ``url`` override ``[plugin.a2a.serve]``; port 0 takes a free one.
    Once listening, one line goes to standard error: ``tether a2a serve: NAME at URL``.
    """
    import uvicorn
    from a2a.server.routes import (
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
    from starlette.applications import Starlette

    from tether.runtime import profile_session_host, profile_store

    from ._steering import SteeringHandler

    settings = serve_settings(kernel)
    check_servable(kernel, agent_name, model_spec)
    if profile_session_host(kernel) is not None:
        raise _invalid(
            "tether a2a serve does not front a cluster's session host yet",
            "[tether] session_host",
            "serve the agent from a profile without a session host",
        )
    tokens = settings.tokens()
    known = Callers(settings)  # a name that cannot be a caller id stops the server here
    authenticate = None
    if settings.authenticator is not None:
        try:
            authenticate = load_authenticator(settings.authenticator)
        except Exception as exc:
            raise _invalid(
                f"the authenticator {settings.authenticator} could not be loaded: "
                f"{type(exc).__name__}: {exc}",
                "[plugin.a2a.serve] authenticator",
                "name a callable as module:function, importable where tether runs",
            ) from exc
    bind_host = host or settings.host
    bind_port = settings.port if port is None else port
    limits = Limits.of(settings)
    notes = Notes()
    sock = Listener(
        socket.AF_INET6 if ":" in bind_host else socket.AF_INET,
        socket.SOCK_STREAM,
        socket.IPPROTO_TCP,  # TCP_NODELAY is set on accepted sockets only for this protocol
    )
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind_host, bind_port))
    except OSError as exc:
        sock.close()
        raise _invalid(
            f"tether a2a serve cannot listen on {bind_host}:{bind_port}: {exc.strerror or exc}",
            "[plugin.a2a.serve] host, port (or --host, --port)",
            "choose another address or port (--port 0 takes a free one)",
        ) from None
    room = Room(limits, notes)
    sock.hold(room)  # connections counted, and a spare descriptor: see Listener
    bound = sock.getsockname()[1]
    shown_host = f"[{bind_host}]" if ":" in bind_host else bind_host
    public = (url or settings.url or f"http://{shown_host}:{bound}").rstrip("/") + "/"
    if not tokens and authenticate is None and bind_host not in ("127.0.0.1", "::1", "localhost"):
        log.warning(
            "serving on %s without authentication: anyone who reaches it can use the agent"
            " (set tokens_env or authenticator under [plugin.a2a.serve])",
            bind_host,
        )
    store = profile_store(kernel)
    try:
        async with Runtime.open(kernel, store) as runtime, anyio.create_task_group() as group:
            contexts = Contexts(
                runtime,
                agent_name,
                model_spec,
                host=group,
                idle_close=settings.idle_close,
                callers=known,
            )
            card = await agent_card(runtime, agent_name, public, settings)
            handler = SteeringHandler(
                TetherExecutor(contexts), SessionTaskStore(contexts), card, contexts
            )
            routes = [
                *card_routes(card),
                *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
                *create_rest_routes(handler, path_prefix=REST_PATH, enable_v0_3_compat=True),
            ]
            callers = {token: name for name, token in tokens.items()}
            reader = BodyReader(
                Fasta2aDialect(Starlette(routes=routes), rpc_path="/"),
                limits,
                notes,
                rpc_path="/",
                methods=JsonRpcDispatcher.METHOD_TO_MODEL,
                rest_error=_rest_error,
            )
            guard = Guard(reader, callers, authenticate, max_body=limits.max_body)
            config = uvicorn.Config(
                Admission(guard, limits, notes),
                log_level="warning",
                lifespan="off",
                timeout_graceful_shutdown=5,
                http=protocol_class(room),
                timeout_keep_alive=limits.keep_alive,
                h11_max_incomplete_event_size=HEADER_LIMIT,
                backlog=BACKLOG,
            )
            server = uvicorn.Server(config)
            # SIGINT and SIGTERM stop the server here (uvicorn's own handling would raise the
            # signal again once it stopped, and the process would not end as it should).
            server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
            loop = asyncio.get_running_loop()
            handler_before = loop.get_exception_handler()
            loop.set_exception_handler(quiet_accept_errors(notes))
            try:
                async with anyio.create_task_group() as serving:
                    serving.start_soon(_announce, server, card.name, public)
                    serving.start_soon(_stop_on_signal, server)
                    await server.serve(sockets=[sock])
                    serving.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await contexts.cancel_all()  # tasks that run or wait read canceled
                    await handler.aclose()
                    contexts.release_all()
                loop.set_exception_handler(handler_before)
    finally:
        sock.close()
        await store.aclose()


async def _stop_on_signal(server: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            server.should_exit = True
            return


async def _announce(server: Any, name: str, url: str) -> None:
    while not server.started:
        await anyio.sleep(0.01)
    print(f"tether a2a serve: {name} at {url}", file=sys.stderr, flush=True)


def _rest_error(problem: str) -> Mapping[str, object]:
    """The HTTP+JSON binding's error body for a body it cannot parse (the SDK's own shape)."""
    from a2a.utils.error_handlers import build_rest_error_payload

    return build_rest_error_payload(json_format.ParseError(problem))


def _invalid(problem: str, key: str, remedy: str) -> PluginError:
    return PluginError(
        ErrorCode.PLUGIN_SETTINGS_INVALID,
        f'invalid settings for plugin "a2a": {problem}',
        key=key,
        plugin="a2a",
        remedy=remedy,
    )


def serve_settings(kernel: Kernel) -> ServeSettings:
    """``[plugin.a2a.serve]`` of the profile (defaults when the plugin is not loaded)."""
    for plugin in kernel.plugins:
        if plugin.name == "a2a" and plugin.scope_id == "global":
            found = getattr(plugin.settings, "serve", None)
            if isinstance(found, ServeSettings):
                return found
    return ServeSettings()
