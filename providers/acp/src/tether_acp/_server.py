"""tether served as an ACP agent on stdio: ``tether acp [--profile P] [--agent A] [--model M]``.

An editor (or another tether, whose profile names ``tether acp`` as an ACP child) drives one of
the profile's agents over the Agent Client Protocol, version 1:

* ``initialize``: protocol version 1; ``loadSession``; prompts of text (and resource links,
  which every ACP agent must accept: they reach the model as markdown links).
* ``session/new``: a new stored session of the agent; its ACP session id is the tether session
  id, so ``tether sessions show ID`` and ``tether run --session ID`` find it. ``cwd`` must be
  an absolute path to a directory (the spec's rule), else the answer is "invalid params".
  ``mcpServers`` (stdio and ``http`` entries) become tool sources of the session's agent alone,
  through tether-mcp-client (:mod:`tether_acp._mcp`); a server that does not start fails the
  request.
* ``session/load``: reopens a stored session as ``tether run --session`` does (a turn a crash
  left open is closed first, and continuable children holding unrun messages are recovered) and
  replays its conversation as ``session/update`` notifications before answering: the person's
  messages as ``user_message_chunk``, the answers as ``agent_message_chunk`` (each whole, in
  one chunk; reasoning is not stored, so not replayed), tool calls as ``tool_call`` and their
  results as ``tool_call_update``. Replayed message ids come from the log (a person's message
  keeps its inbox id; an answer's id is derived from its session, its turn and its place in the
  turn, the id it streamed with), so every load of a session gives the same ids.
* ``session/prompt``: the text becomes a follow-up of the session's agent; what the agent says
  and logs until the turn started by that message ends is streamed. While a prompt runs, the
  server listens to the agent's deltas, so its model streams (:mod:`tether.models` streaming):
  each piece of an answer's text goes out as an ``agent_message_chunk`` and each piece of its
  reasoning as an ``agent_thought_chunk`` as it arrives, all pieces of one answer with the
  ``messageId`` the answer gets in the log (its reasoning with an id of its own, derived from
  the answer's). When the answer is logged, only what its pieces did not carry is sent (all of
  it for a model that cannot stream, none when they carried it all). Tool-call argument
  pieces are not sent: each tool call goes out whole, as ``tool_call`` (``pending``), once
  logged; ``in_progress`` when the kernel runs it (a tool that needs approval: once allowed);
  its result as ``tool_call_update``, ``completed`` or ``failed`` with the result text and its
  images (image content blocks). A status never goes back.

  A prompt that arrives while another prompt of the session is running a turn steers it
  (``Agent.steer``, :mod:`tether_acp._steering`): the turn's next model request carries it,
  and it answers when that turn ends, with the turn's stop reason and usage, sending no
  updates of its own (the prompt whose turn it is streams the whole turn). A steer that
  arrives after the turn's last step becomes the next turn, which its prompt streams. A
  prompt whose ``_meta`` holds ``{"tether/queue": true}`` waits instead and runs as a turn of
  its own after the running one. Each prompt streams only the turn its own message started,
  so no update goes out twice.

  A step whose request is sent again after some pieces went out (a ``retry`` delta) cannot
  take them back (ACP has no retraction): one more chunk says so, :data:`RETRY_MARKER` with
  ``_meta`` ``{"tether/retry": true}`` (an ``agent_message_chunk`` of the answer's message
  when some text went out, else an ``agent_thought_chunk``), and the new attempt streams on in
  the same message. A person sees that the text before the marker was dropped; a client that
  knows the mark (a parent tether, :mod:`tether_acp._client`) drops that text itself. A retry
  before anything went out sends nothing. The log, and so ``session/load``, holds only the
  answer.
* ``session/cancel``: aborts the running turn (the agent's ``interrupt``): every pending prompt
  of the session answers ``cancelled`` (the running one, those steering it, those queued),
  tool calls that did not finish get ``failed``. A message no turn had taken yet (a steer, a
  queued prompt's) is withdrawn from the inbox and never runs (``inbox/discarded`` in the log);
  a child's notice waiting there stays.

* ``session/set_mode`` and ``session/set_config_option``: the session's mode (how this
  server, the permission host, decides its questions: ``ask`` the client, ``allow`` or ``deny``
  without asking; offered when the agent's approval is ``ask``; recorded as an ``acp/mode``
  descriptor) and model (one of the profile's agents' model specs, offered when there are two or
  more; the agent is composed again on it before the session's next turn, and the kernel
  records it in the header). ``session/new`` and ``session/load`` answer with both.

Stop reasons: ``completed`` -> ``end_turn``; ``max-tokens`` -> ``max_tokens``, or
``max_turn_requests`` when the turn used all its model requests (``max_steps``); ``refusal`` ->
``refusal``; ``aborted`` -> ``cancelled``. A turn that ends with ``error`` (a model request
failed, a hook broke, the store refused the turn's end) is answered with a JSON-RPC error
(code -32603), not ``end_turn``: the turn did not complete, the ACP spec reports failures as
errors, and a client (an editor, or a parent tether delegating here) must be able to tell a
failure from an answer. The error's message is tether's one-line error; its ``data`` holds
``{"stopReason": "error", "sessionId", "turn"}``. The session stays usable: the next prompt
continues it.

The wire is guarded (:mod:`tether_acp._server_io`): a malformed line is answered with a JSON-RPC
error when it is a request whose id can be read, dropped (and logged on standard error)
otherwise, and the server keeps serving; a line is at most 50 MiB.

Every tether agent is entered (``async with``) and left in a task of its own, owned by the task
group of :func:`serve`, for as long as the ACP connection lives. When standard input ends, the
client sends nothing more: running turns are aborted (their prompts answer ``cancelled``, and a
prompt whose turn had not begun is not run), the other requests in progress get
:data:`~tether_acp._server_io.END_GRACE` seconds to answer, then every agent is left and the
command exits.

Only ACP messages go to standard output: :func:`serve` keeps the real standard output for the
protocol and points file descriptor 1 at standard error (and 0 at ``/dev/null``), so a stray
``print`` in a plugin, or a subprocess a tool starts, cannot corrupt the stream or eat input.

Callers (:mod:`tether_acp._callers`, docs/callers.md): every session this server creates and
every prompt it takes has a caller: the one running ``tether acp`` (``TETHER_CALLER``, else
the OS user), or, when the profile trusts the client (``[plugin.acp.serve] trust_meta_caller``),
the caller the client names in ``_meta["tether/caller"]`` of ``session/new``, ``session/load``
or ``session/prompt`` (a prompt without one runs with its session's). A caller that cannot be
read is answered "invalid params" (``CALLER_INVALID``); one a gate refuses, error -32003
(``CALLER_REFUSED``), the refusal as its message: no session is created, no message accepted.

Permission requests: the server is its kernel's permission host. A served agent's tool that
needs approval is asked about after its ``tool_call`` went out, with that tool call's id (the
client knows which call it is about). A question a descendant forwards up (an ACP child with
``permission = "ask"``, any depth below a session of this connection) has no tool call in the
served session: it is announced as a ``tool_call`` of its own (``pending``), asked about with
that id, and closed with the answer (``completed`` when allowed, ``failed`` when refused). Both
go to this connection's client as ``session/request_permission`` on the session at the root of
the asker's chain, and the answer comes back down; a client that fails to answer refuses.

Not done: ``sse`` and ``acp`` MCP server entries (skipped with a warning), ``session/list``,
the unstable ``session/close`` / ``resume`` / ``fork``, and ``session/set_model`` (removed from
ACP for ``session/set_config_option``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import stat
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import acp
import anyio
import pydantic
from acp.helpers import update_current_mode
from acp.schema import (
    CancelNotification,
    ConfigOptionUpdate,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOptionKind,
    PromptResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolKind,
)
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from tether.agents import PermissionQuestion, asking_root, check_servable, trace_from
from tether.errors import TetherError
from tether.models import ModelDelta, ToolCall
from tether.runtime import Runtime
from tether.store import (
    AssistantMessage,
    DescriptorEvent,
    Event,
    InboxDiscarded,
    SessionStore,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

from ._callers import ClientCallers, process_caller, serve_settings
from ._mcp import client_tool_sources, mcp_available
from ._protocol import (
    INVALID_PARAMS,
    PROTOCOL_VERSION,
    RETRY_MARKER,
    SESSION_NOT_FOUND,
    CallFate,
    LiveAnswer,
    MessageIds,
    Update,
    forwarded_names,
    initialize_response,
    prompt_text,
    replay,
    request_error,
    stop_reason,
    turn_error,
    working_directory,
)
from ._server_io import LINE_LIMIT, ByteSink, ByteSource, LineGuard
from ._steering import Course, queues
from ._usage import prompt_usage

if TYPE_CHECKING:
    from tether.agents import Agent
    from tether.contracts import Caller, ToolSource
    from tether.loading import Kernel

__all__ = ("PROTOCOL_VERSION", "RETRY_MARKER", "TetherAcpAgent", "serve")

log = logging.getLogger("tether.acp.server")


STDIO_LIMIT = LINE_LIMIT
"""The longest JSON-RPC line read from standard input: 50 MiB (the SDK's default)."""


#: The notifications a client may send, and their parameters.
_NOTIFICATIONS = {"session/cancel": CancelNotification}

MODE_DESCRIPTOR = "acp/mode"
"""The descriptor a session's log records a mode change with: ``{"mode": ID}``."""

#: The session modes: how this server, the permission host, answers the questions of a
#: session whose agent asks (``approval = "ask"``). No mode loosens an agent whose own policy
#: is ``deny``: the kernel never asks for it.
MODES: tuple[tuple[str, str, str], ...] = (
    ("ask", "Ask", "Tools that need approval ask you first"),
    ("allow", "Allow", "Tools that need approval run without asking"),
    ("deny", "Deny", "Tools that need approval are refused without asking"),
)


class _Signal:
    """A marker put on a prompt's event stream next to the agent's events."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


_IDLE = _Signal("idle")
"""The agent went idle (its turns are over, or it was interrupted before it began one)."""
_LEFT = _Signal("left")
"""The agent was left (the server is shutting down)."""
_WITHDRAWN = _Signal("withdrawn")
"""A ``session/cancel`` took the prompt's message back from the inbox before a turn took it."""

RECORD_GRACE = 10.0
"""Seconds a cancelled prompt may take to record that its message was withdrawn."""


@dataclass(eq=False)
class _Prompt:
    """One ``session/prompt`` in progress."""

    send: Callable[[object], None]
    cancelled: bool = False
    message_id: str | None = None
    """Its message, once accepted."""
    host: _Prompt | None = None
    """The prompt streaming the turn that took this one's message at a step (a steer)."""
    withdrawn: list[InboxDiscarded] = field(default_factory=lambda: list[InboxDiscarded]())
    """Its message, taken back from the inbox and not recorded as such yet."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set once it sent all it sends: a steer its turn took answers after that."""


@dataclass(eq=False)
class _Session:
    """An ACP session: a tether agent held open by a host task until ``release`` is set."""

    agent: Agent
    cwd: Path
    sources: Sequence[ToolSource] = ()
    caller: Caller | None = None
    """Who sends the session's prompts that name no caller (its ``session/new`` or
    ``session/load``'s)."""
    guardrails: tuple[str, ...] = ()
    """The guardrails a delegating tether forwarded (``_meta["tether/guardrails"]``), kept to
    compose the agent again."""
    release: anyio.Event = field(default_factory=anyio.Event)
    left: anyio.Event = field(default_factory=anyio.Event)
    mode: str = "ask"
    """The session mode (:data:`MODES`), when the session offers modes."""
    wanted_model: str | None = None
    """A model the client chose that the session does not run yet (it will from its next
    turn)."""
    switching: bool = False
    """The agent is being replaced (a model switch): its hold ends, the session goes on."""
    turns: anyio.Lock = field(default_factory=anyio.Lock)
    """Held by a prompt that does not steer, until its turn ends: such prompts run one at a
    time."""
    prompts: set[_Prompt] = field(default_factory=lambda: set[_Prompt]())
    """Prompts accepted and not answered yet (running, steering, or waiting for ``turns``)."""
    streaming: _Prompt | None = None
    """The prompt streaming the running turn (the one whose message started it), if one is."""
    calls: dict[str, ToolCall] = field(default_factory=lambda: dict[str, ToolCall]())
    """The tool calls of the running turn."""
    streamer: dict[str, _Prompt | None] = field(
        default_factory=lambda: dict[str, "_Prompt | None"]()
    )
    """Per tool call: the prompt that heard it, and so sends its ``tool_call``."""
    announced: set[str] = field(default_factory=lambda: set[str]())
    """Tool calls whose ``tool_call`` went out."""
    asking: set[str] = field(default_factory=lambda: set[str]())
    """Tool calls with a permission request open."""
    progress: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) when a ``tool_call`` went out, or the streaming prompt stopped."""

    @property
    def id(self) -> str:
        return self.agent.session_id

    def steerable(self) -> bool:
        """Whether a prompt arriving now steers the running turn: a prompt streams it, and
        no cancel is stopping it (a prompt sent right after a cancel is a turn of its own)."""
        loop = self.agent.loop
        return self.streaming is not None and loop.in_turn and not loop.parked

    def _prompt_of(self, message_id: str | None) -> _Prompt | None:
        if message_id is None:
            return None
        return next((p for p in self.prompts if p.message_id == message_id), None)

    def heard(self, event: Event) -> None:
        """The session's own listener (it hears each event before the prompts do): which
        prompt streams the turn and its tool calls, and which turn took a steer."""
        match event:
            case TurnStarted(message_id=message_id):
                self.calls.clear()
                self.streamer.clear()
                self.announced.clear()
                owner = self._prompt_of(message_id)
                if owner is not self.streaming:
                    self.streaming = owner
                    self._progress()
            case UserMessage(message_id=message_id):
                steer = self._prompt_of(message_id)
                if steer is not None and steer is not self.streaming:
                    steer.host = self.streaming  # it answers once that prompt sent all
            case TurnEnded():
                if self.streaming is not None:  # no prompt streams what comes next yet
                    self.streaming = None
                    self._progress()
            case AssistantMessage(tool_calls=calls):
                for call in calls:
                    self.calls[call.id] = call
                    self.streamer[call.id] = self.streaming
            case _:
                pass

    def sent(self, call_ids: Iterable[str]) -> None:
        """The streaming prompt sent these calls' ``tool_call``."""
        self.announced.update(call_ids)
        self._progress()

    def stop_streaming(self, prompt: _Prompt) -> None:
        if self.streaming is prompt:
            self.streaming = None
            self._progress()

    async def streamed(self, call_id: str) -> bool:
        """Wait until the prompt that heard ``call_id`` sent its ``tool_call``; whether it did
        (``False``: no prompt heard it, or it stopped before it got there)."""
        while call_id not in self.announced:
            streamer = self.streamer.get(call_id)
            if streamer is None or streamer is not self.streaming:
                return False
            await self.progress.wait()
        return True

    def call_for(self, question: PermissionQuestion) -> ToolCall | None:
        """The running turn's tool call ``question`` is about."""
        if question.tool_call_id in self.calls:  # the served agent's own call: the kernel says
            return self.calls[question.tool_call_id]
        free = [c for c in self.calls.values() if c.id not in self.asking]
        exact = [c for c in free if _approval_title(c) == question.title]
        named = [c for c in free if question.title.startswith(c.name + "(")]
        return next(iter(exact or named), None)

    def _progress(self) -> None:
        self.progress.set()
        self.progress = anyio.Event()


class TetherAcpAgent:
    """The ACP ``Agent`` side of ``tether acp``: one profile's agent over one connection.

    Not a subclass of :class:`acp.Agent` (a protocol), so that the methods it lacks answer
    "Method not found". ``host`` is the task group that owns the agents' tasks: it must outlive
    the connection, and :meth:`release_all` must be called before it exits.
    """

    def __init__(
        self,
        runtime: Runtime,
        agent_name: str | None = None,
        model_spec: str | None = None,
        *,
        host: TaskGroup,
        callers: ClientCallers | None = None,
    ) -> None:
        if runtime.store is None:
            raise ValueError("TetherAcpAgent needs a runtime with a session store")
        self.callers = callers if callers is not None else ClientCallers(None, trust=False)
        """Who sends (the process's caller, and whether a client's ``_meta`` caller counts)."""
        self.runtime = runtime
        self.kernel = runtime.kernel
        self.store: SessionStore = runtime.store
        self.agent_name = agent_name
        self.model_spec = model_spec
        self._host = host
        self._client: Any = None
        self._sessions: dict[str, _Session] = {}
        self._closing = False
        self._input_ended = False

    # ---------------------------------------------------------------- connection

    def on_connect(self, conn: Any) -> None:
        self._client = conn
        if self.runtime.permission_host is None:
            self.runtime.permission_host = self.ask_client

    async def ask_client(self, question: PermissionQuestion) -> str | None:
        """Forward a permission question to this connection's client, on the ACP session at
        the root of the asking session's chain: a served agent's tool that needs approval, or a
        descendant ACP child with ``permission = "ask"``. The option the client picked, or
        ``None`` when it cancelled, failed to answer, or no session is found. A question that
        asks for information (an MCP server's elicitation) is not forwarded yet: ``None``, which
        the asker reads as declined."""
        if question.elicitation is not None:
            return None
        root = await asking_root(self.store, question.session, self._sessions)
        session = self._sessions.get(root) if root is not None else None
        if session is None or self._client is None:
            return None
        try:
            if question.session == session.id:
                return await self._ask_for_call(session, question)
            return await self._ask_with_own_call(session, question)
        except (acp.RequestError, ConnectionError, pydantic.ValidationError) as exc:
            log.warning(
                "session %s: the client did not answer the permission request for %s (%s: %s);"
                " refused",
                session.id,
                question.title,
                type(exc).__name__,
                exc,
            )
            return None

    async def _ask_for_call(self, session: _Session, question: PermissionQuestion) -> str | None:
        """Ask about one of the served agent's own tool calls, once its ``tool_call`` is out."""
        call = session.call_for(question)
        if call is None:  # not a call of the running turn: announce it as a call of its own
            return await self._ask_with_own_call(session, question)
        session.asking.add(call.id)
        try:
            streamed = await session.streamed(call.id)
            if not streamed:  # no prompt streams this turn: the server announces the call
                start = acp.start_tool_call(
                    call.id, call.name, status="pending", raw_input=dict(call.arguments)
                )
                await self._notify(session.id, start)
            choice = await self._request(session, question, call.id)
            allowed = choice is not None and _allows(question, choice)
            if allowed:  # it runs now: pending -> in_progress (its result closes it)
                await self._notify(session.id, acp.update_tool_call(call.id, status="in_progress"))
            elif not streamed:  # refused, and no prompt streams its result
                await self._notify(session.id, acp.update_tool_call(call.id, status="failed"))
            return choice
        finally:
            session.asking.discard(call.id)

    async def _ask_with_own_call(
        self, session: _Session, question: PermissionQuestion
    ) -> str | None:
        """Ask about a tool call the served session does not have (a descendant's): it is
        announced as a ``tool_call`` of its own first, and closed with the answer."""
        call_id = f"permission-{uuid.uuid4().hex}"
        title = f"{question.title} ({question.who})"
        kind = cast("ToolKind | None", question.kind)  # ACP's kinds; pydantic checks it
        await self._notify(
            session.id, acp.start_tool_call(call_id, title, kind=kind, status="pending")
        )
        choice: str | None = None
        try:
            choice = await self._request(session, question, call_id)
        finally:
            allowed = choice is not None and _allows(question, choice)
            verdict = f"allowed ({choice})" if allowed else f"refused ({choice or 'no answer'})"
            update = acp.update_tool_call(
                call_id,
                status="completed" if allowed else "failed",
                content=[acp.tool_content(acp.text_block(verdict))],
            )
            with anyio.CancelScope(shield=True):
                await self._notify(session.id, update)
        return choice

    async def _request(
        self, session: _Session, question: PermissionQuestion, call_id: str
    ) -> str | None:
        from acp.schema import PermissionOption, ToolCallUpdate

        if session.mode != "ask":  # the session's mode answers: allow or deny without asking
            wanted = "allow" if session.mode == "allow" else "reject"
            return next((o for o, _, kind in question.options if kind.startswith(wanted)), None)
        response = await self._client.request_permission(
            session_id=session.id,
            tool_call=ToolCallUpdate(
                tool_call_id=call_id,
                title=f"{question.title} ({question.who})",
                # ACP's kinds (tether's own questions use them too); pydantic checks them.
                kind=cast("ToolKind | None", question.kind),
                status="pending",
            ),
            options=[
                PermissionOption(
                    option_id=option_id, name=name, kind=cast(PermissionOptionKind, kind)
                )
                for option_id, name, kind in question.options
            ],
        )
        outcome = response.outcome
        if outcome.outcome != "selected":
            return None
        choice = getattr(outcome, "option_id", None)
        if choice not in [option_id for option_id, _, _ in question.options]:
            log.warning(
                "session %s: the client chose %r, which was not offered; refused",
                session.id,
                choice,
            )
            return None
        return choice

    async def _notify(self, session_id: str, update: Update) -> None:
        """Send a ``session/update``; once the client is gone, updates are dropped."""
        try:
            await self._client.session_update(session_id=session_id, update=update)
        except ConnectionError:
            log.debug("session %s: an update was dropped (the connection is closed)", session_id)

    def release_all(self) -> None:
        """Let every open agent leave its ``async with`` (their host tasks then end), and
        any agent still being opened leave as soon as it is open."""
        self._closing = True
        for session in self._sessions.values():
            session.release.set()

    def input_ended(self) -> None:
        """The client sends nothing more: running turns are aborted (their prompts answer
        ``cancelled``) and prompts that have not begun are not run."""
        self._input_ended = True
        for session_id in [*self._sessions]:
            self._cancel(session_id)

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        # The client's HTTP MCP servers are passed on when tether-mcp-client is installed (stdio
        # ones are every agent's to take).
        return initialize_response(mcp_http=mcp_available())

    # ---------------------------------------------------------------- sessions

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        directory = working_directory(cwd)
        rails = forwarded_names(kwargs)
        session = await self._open(None, directory, mcp_servers, self._caller(kwargs), rails)
        return NewSessionResponse(
            session_id=session.id,
            modes=self._modes(session),
            config_options=self._config_options(session),
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        directory = working_directory(cwd)
        rails = forwarded_names(kwargs)
        session = self._sessions.get(session_id)
        if session is None:
            caller = self._caller(kwargs)
            session = await self._open(session_id, directory, mcp_servers, caller, rails)
        else:
            checked = {g.name for g in session.agent.spec.guardrails}
            if not set(rails) <= checked:
                raise acp.RequestError(
                    INVALID_PARAMS,
                    f"session {session_id} is open, and not checked by the guardrails "
                    f"{', '.join(sorted(set(rails) - checked))} this request forwards; load it "
                    "once it is closed",
                )
            # Open already: a caller the request names sends its prompts from now on.
            session.caller = self._caller(kwargs, session.caller)
            if mcp_servers:
                log.warning(
                    "session/load of %s, which is open: its tools stay as they are (the MCP "
                    "servers of this request are not used)",
                    session_id,
                )
        try:
            events = await self.store.events(session_id)
        except TetherError as exc:
            raise request_error(exc) from None
        ids = MessageIds(session.id, turn=0)
        for stored in events:
            event = stored.event
            if _records_mode(event):
                session.mode = str(event.data["mode"])  # the last one recorded holds
            for update in replay(event, ids):
                await self._notify(session.id, update)
        return LoadSessionResponse(
            modes=self._modes(session), config_options=self._config_options(session)
        )

    def _caller(self, meta: dict[str, Any], fallback: Caller | None = None) -> Caller | None:
        """Who sends a request with ``meta`` (its ``_meta``): see :mod:`tether_acp._callers`."""
        try:
            return self.callers.of(meta, fallback)
        except TetherError as exc:  # CALLER_INVALID: invalid params
            raise request_error(exc) from None

    async def _open(
        self,
        session_id: str | None,
        cwd: Path,
        mcp_servers: Any = None,
        caller: Caller | None = None,
        guardrails: tuple[str, ...] = (),
    ) -> _Session:
        """Compose and hold the agent of ``session_id`` (``None``: a new session) for
        ``caller`` (a new session's initiator; a gate may refuse it), with the MCP servers the
        client names as tool sources of its own (:mod:`tether_acp._mcp`), checked also by the
        ``guardrails`` a delegating tether forwarded (one this profile does not offer:
        ``GUARDRAIL_INVALID``, and no session)."""
        sources = client_tool_sources(mcp_servers, cwd)  # invalid params: nothing started
        model = self.model_spec
        try:
            if session_id is not None and model is not None:
                # A stored session keeps the model it records (the one a client chose);
                # --model is the model of the sessions that record none.
                header = await self.store.header(session_id)
                if header.model is not None:
                    model = None
            agent = await self.runtime.compose(
                agent=self.agent_name,
                model=model,
                session_id=session_id,
                tool_sources=sources,
                cwd=cwd,  # the directory its tools act in
                caller=caller,
                guardrails=guardrails,
            )
        except TetherError as exc:
            raise request_error(exc) from None
        session = _Session(agent, cwd, sources, caller, guardrails)
        try:
            await self._host.start(self._hold, session, session_id is not None)
        except TetherError as exc:
            raise request_error(exc) from None
        return session

    async def _hold(
        self, session: _Session, restored: bool, *, task_status: TaskStatus[None]
    ) -> None:
        """Hold ``session``'s agent open until it is released (a task of the host group):
        :meth:`Runtime.hold` restores its log (a turn a crash left open is closed), recovers
        its children after a crash (``restored``) and closes its model on leaving. A model
        switch (``session.switching``) releases one agent and holds the next: the session
        stays open."""
        agent = session.agent
        release, left = session.release, session.left
        started = False
        unlisten = agent.listen(session.heard)
        try:
            async with self.runtime.hold(agent, recover=restored):
                self._sessions[session.id] = session
                started = True
                task_status.started()
                if self._closing:
                    release.set()
                await release.wait()
        except Exception:
            if not started:
                raise  # the session/new or session/load that opened it fails
            log.exception("session %s: leaving the agent failed", session.id)
        finally:
            unlisten()
            left.set()
            if not session.switching:
                if self._sessions.get(session.id) is session:
                    del self._sessions[session.id]
                for prompt in [*session.prompts]:
                    prompt.send(_LEFT)

    # ---------------------------------------------------------------- modes and models

    def _modes(self, session: _Session) -> SessionModeState | None:
        """The session's modes: offered when its agent asks before a tool that needs approval
        (``approval = "ask"``), the only agents whose questions reach this server's client."""
        if session.agent.spec.approval != "ask":
            return None
        return SessionModeState(
            current_mode_id=session.mode,
            available_modes=[
                SessionMode(id=mode, name=name, description=description)
                for mode, name, description in MODES
            ],
        )

    def _models(self, session: _Session) -> dict[str, str]:
        """The models a session may run, ``{spec: description}``: the model of each agent of
        the profile, ``--model``'s, and the one the session runs."""
        models: dict[str, list[str]] = {}
        current = self._current_model(session)
        if current is not None:
            models.setdefault(current, [])
        if self.model_spec is not None:
            models.setdefault(self.model_spec, []).append("tether acp --model")
        for name in self.kernel.agents:
            table = self.kernel.profile.agent.get(name)
            if table is not None and table.model is not None:
                models.setdefault(table.model, []).append(f"agent {name}")
        return {
            spec: f"the model of {', '.join(owners)}" if owners else "the model the session runs"
            for spec, owners in models.items()
        }

    def _current_model(self, session: _Session) -> str | None:
        """The spec the session runs (or will from its next turn): the client's last choice,
        else the one its header records, else its agent's profile model."""
        if session.wanted_model is not None:
            return session.wanted_model
        agent = session.agent
        return agent.header.model or agent.spec.model_spec or self._profile_model(agent.name)

    def _profile_model(self, agent: str | None) -> str | None:
        table = self.kernel.profile.agent.get(agent) if agent is not None else None
        return table.model if table is not None else None

    def _config_options(self, session: _Session) -> list[Any] | None:
        """The session's config options: its mode (when it has modes) and its model (when
        there is more than one to choose from), as ACP's select options."""
        options: list[Any] = []
        modes = self._modes(session)
        if modes is not None:
            options.append(
                SessionConfigOptionSelect(
                    id="mode",
                    name="Mode",
                    description="How tools that need approval are decided",
                    category="mode",
                    type="select",
                    current_value=modes.current_mode_id,
                    options=[
                        SessionConfigSelectOption(
                            value=m.id, name=m.name, description=m.description
                        )
                        for m in modes.available_modes
                    ],
                )
            )
        models = self._models(session)
        current = self._current_model(session)
        if len(models) > 1 and current is not None:
            options.append(
                SessionConfigOptionSelect(
                    id="model",
                    name="Model",
                    description="The model that answers, from the session's next turn",
                    category="model",
                    type="select",
                    current_value=current,
                    options=[
                        SessionConfigSelectOption(value=spec, name=spec, description=description)
                        for spec, description in models.items()
                    ],
                )
            )
        return options or None

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        session = self._session(session_id)
        await self._set_mode(session, mode_id)
        options = self._config_options(session)
        if options:  # the mode is one of them: keep a client that shows them in step
            update = ConfigOptionUpdate(
                session_update="config_option_update", config_options=options
            )
            await self._notify(session.id, update)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        if config_id == "mode" and isinstance(value, str):
            await self._set_mode(session, value)
            await self._notify(session.id, update_current_mode(session.mode))
        elif config_id == "model" and isinstance(value, str):
            await self._set_model(session, value)
        else:
            offered = [o.id for o in self._config_options(session) or []]
            raise acp.RequestError(
                INVALID_PARAMS,
                f"no config option {json.dumps(config_id)[:200]} takes {json.dumps(value)[:200]}"
                f" here; the options of this session: {', '.join(offered) or 'none'}",
                {"configId": config_id[:200]},
            )
        return SetSessionConfigOptionResponse(config_options=self._config_options(session) or [])

    async def _set_mode(self, session: _Session, mode_id: str) -> None:
        """Make ``mode_id`` the session's mode, recorded in its log (a ``session/load`` keeps
        it); it decides the questions asked from now on."""
        modes = self._modes(session)
        known = [m.id for m in modes.available_modes] if modes is not None else []
        if mode_id not in known:
            offered = ", ".join(known) if known else "none (its agent's approval is not ask)"
            raise acp.RequestError(
                INVALID_PARAMS,
                f"no mode {json.dumps(mode_id)[:200]} here; the modes of this session: {offered}",
                {"modeId": mode_id[:200]},
            )
        if mode_id == session.mode:
            return
        session.mode = mode_id
        try:
            await session.agent.lease.record(
                DescriptorEvent(kind=MODE_DESCRIPTOR, data={"mode": mode_id})
            )
        except TetherError as exc:
            raise request_error(exc) from None

    async def _set_model(self, session: _Session, spec: str) -> None:
        """Make ``spec`` the model of the session from its next turn: at once when no turn
        runs, else before the next prompt's turn. The agent is composed again on the model
        (the kernel records it in the session's header, with a ``model`` descriptor)."""
        models = self._models(session)
        if spec not in models or len(models) < 2:
            offered = ", ".join(models) if len(models) > 1 else "none (one model only)"
            raise acp.RequestError(
                INVALID_PARAMS,
                f"no model {json.dumps(spec)[:200]} here; the models of this session: {offered}",
                {"value": spec[:200]},
            )
        session.wanted_model = spec
        if not session.turns.locked() and session.agent.status == "idle":
            async with session.turns:
                await self._switch_model(session)

    async def _switch_model(self, session: _Session) -> None:
        """Run the session on the model the client chose (with ``session.turns`` held): once
        the session is quiet, its agent is left and composed again on that model; what fails
        leaves it on the model it had."""
        spec = session.wanted_model
        old = session.agent
        current = old.header.model or old.spec.model_spec or self._profile_model(old.name)
        if spec is None or spec == current:
            session.wanted_model = None
            return
        await self.runtime.settle(old)  # its children and tasks end first: nothing is lost
        try:
            agent = await self.runtime.compose(
                agent=self.agent_name,
                model=spec,
                session_id=session.id,
                tool_sources=session.sources,
                cwd=session.cwd,
                caller=session.caller,
                guardrails=session.guardrails,
            )
        except TetherError as exc:
            session.wanted_model = None
            raise request_error(exc) from None
        session.wanted_model = None
        await self._replace(session, agent)
        log.info("session %s: model %s -> %s (the client's choice)", session.id, current, spec)

    async def _replace(self, session: _Session, agent: Agent) -> None:
        """Leave ``session``'s agent and hold ``agent`` on the same session instead."""
        session.switching = True
        try:
            session.release.set()
            await session.left.wait()
            session.agent = agent
            session.release, session.left = anyio.Event(), anyio.Event()
            if self._closing:
                session.release.set()
            try:
                await self._host.start(self._hold, session, True)
            except TetherError as exc:
                session.left.set()
                if self._sessions.get(session.id) is session:
                    del self._sessions[session.id]
                raise request_error(exc) from None
        finally:
            session.switching = False

    # ---------------------------------------------------------------- turns

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        text = prompt_text(prompt)
        caller = self._caller(kwargs, session.caller)
        send, receive = anyio.create_memory_object_stream[object](math.inf)

        def push(item: object) -> None:  # an agent listener: must never raise
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                send.send_nowait(item)

        state = _Prompt(push)
        session.prompts.add(state)  # before any await: a cancel from now on reaches it
        try:
            with receive, send:
                if not queues(kwargs) and session.steerable():
                    # Another prompt's turn runs: this one steers it (no lock, no await
                    # before the steer is sent).
                    return await self._turn(session, state, text, receive, caller, steer=True)
                async with session.turns:
                    if state.cancelled or session.left.is_set() or self._input_ended:
                        return PromptResponse(stop_reason="cancelled")
                    if session.wanted_model is not None:  # chosen while a turn ran
                        await self._switch_model(session)
                    return await self._turn(
                        session, state, text, receive, caller, trace=trace_from(kwargs)
                    )
        finally:
            session.prompts.discard(state)

    async def _turn(
        self,
        session: _Session,
        state: _Prompt,
        text: str,
        receive: MemoryObjectReceiveStream[object],
        caller: Caller | None = None,
        *,
        steer: bool = False,
        trace: dict[str, str] | None = None,
    ) -> PromptResponse:
        """Send ``text``, as a steer of the running turn (``steer``) or as a turn of its own,
        and answer when the turn that takes it ends (:mod:`tether_acp._steering`), streaming
        that turn when it is its own; ``caller``: who sends it (a gate may refuse it: then
        nothing is accepted); ``trace``: the client's trace context (the prompt's ``_meta``)."""
        agent = session.agent
        armed = False  # idle callbacks count once the message is in the inbox
        live = LiveAnswer(MessageIds(session.id), _fates(agent))
        course = Course()

        def idle() -> None:
            if armed:
                state.send(_IDLE)

        # Listening before sending: no event of the turn that takes the message is missed.
        unlisten = agent.listen(state.send)
        # Deltas share the events' stream, so an answer's pieces go out before the answer.
        undeltas = agent.listen_deltas(state.send)
        unidle = agent.loop.on_idle(idle)
        try:
            try:
                if steer:
                    message_id = await agent.steer(text, caller=caller)
                else:
                    message_id = await agent.followup(text, trace=trace, caller=caller)
            except TetherError as exc:  # the store refused the message, or a gate the caller
                raise request_error(exc) from None
            # No await since it was put in the inbox: no turn has taken it yet.
            state.message_id = course.message_id = message_id
            armed = True
            if state.cancelled:  # the cancel came while the message was being accepted
                return await _take_back(agent, state)
            async for item in receive:
                if item is _LEFT:
                    return PromptResponse(stop_reason="cancelled")
                if item is _WITHDRAWN:
                    return await _take_back(agent, state)
                if item is _IDLE:
                    if agent.status != "idle":
                        continue  # woken again (by a message sent meanwhile)
                    if not course.began and (state.cancelled or agent.fault is None):
                        # Interrupted before a turn took it: the message must not run later.
                        return await _take_back(agent, state)
                    if agent.fault is not None:  # the store refused to record the turn
                        raise turn_error(session.id, course.turn, str(agent.fault))
                    continue  # not reached: the turn's end comes before the idle after it
                if isinstance(item, ModelDelta):
                    if course.streams:
                        for update in live.delta(item):
                            await self._notify(session.id, update)
                    continue
                event = cast(Event, item)
                verdict = course.hear(event)
                if verdict == "dropped":
                    return PromptResponse(stop_reason="cancelled")
                if verdict == "other":
                    continue
                if course.streams:
                    for update in live.event(event):
                        await self._notify(session.id, update)
                    if isinstance(event, AssistantMessage) and event.tool_calls:
                        session.sent(call.id for call in event.tool_calls)
                if verdict == "ends":
                    if state.host is not None and state.host is not state:
                        await state.host.done.wait()  # its turn's updates go out first
                    ended = cast(TurnEnded, event)
                    return PromptResponse(
                        stop_reason=stop_reason(session.id, agent.spec.limits.max_steps, ended),
                        usage=prompt_usage(ended.usage),
                    )
            raise AssertionError("the prompt's event stream closed")  # pragma: no cover
        finally:
            unidle()
            undeltas()
            unlisten()
            session.stop_streaming(state)
            state.done.set()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if not self._cancel(session_id):
            log.warning("session/cancel for %s, which is not open", session_id[:200])

    def _cancel(self, session_id: str) -> bool:
        """Answer every pending prompt of the session ``cancelled``: the running turn is
        aborted (the prompts it took answer at its end), and the messages no turn has taken
        yet are withdrawn at once, so that none of them runs later."""
        session = self._sessions.get(session_id)
        if session is None:
            return False
        agent = session.agent
        for state in session.prompts:
            state.cancelled = True
        agent.interrupt()
        for state in session.prompts:
            if state.message_id is not None:
                withdrawn = agent.inbox.withdraw((state.message_id,))
                if withdrawn:
                    state.withdrawn += withdrawn
                    state.send(_WITHDRAWN)
        return True

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            shown = json.dumps(session_id[:200])
            raise acp.RequestError(
                SESSION_NOT_FOUND,
                f"session {shown} is not open here; use session/new or session/load",
                {"sessionId": session_id[:200]},
            )
        return session


# -------------------------------------------------------------------- approvals


def _records_mode(event: Event) -> TypeGuard[DescriptorEvent]:
    """Whether ``event`` records a mode change (:data:`MODE_DESCRIPTOR`) to a known mode."""
    return (
        isinstance(event, DescriptorEvent)
        and event.kind == MODE_DESCRIPTOR
        and any(event.data.get("mode") == mode for mode, _, _ in MODES)
    )


def _fates(agent: Agent) -> Callable[[ToolCall], tuple[CallFate, bool]]:
    """What the kernel will do with each of ``agent``'s tool calls (see :data:`CallFate`),
    and whether its tool is safe: the order of :func:`tether.agents.run_tool`'s checks."""

    def fate(call: ToolCall) -> tuple[CallFate, bool]:
        tool = agent.tools.get(call.name, agent)
        if tool is None or call.invalid_arguments is not None:
            return "refused", False
        policy = agent.spec.tool_policy
        if policy is not None and not policy.permits(call.name) and not tool.keep_on_restrict:
            return "refused", tool.safe
        if tool.needs_approval and agent.spec.approval != "allow":
            host = agent.runtime.permission_host if agent.runtime is not None else None
            if agent.spec.approval == "deny" or host is None:
                return "refused", tool.safe
            return "asks", tool.safe
        return "runs", tool.safe

    return fate


async def _take_back(agent: Agent, state: _Prompt) -> PromptResponse:
    """Answer ``cancelled`` for a prompt whose message no turn took: the message is withdrawn
    from the inbox (if a cancel did not already) and recorded as discarded (``inbox/discarded``),
    so it never runs, not even after a restart."""
    if state.message_id is not None:
        state.withdrawn += agent.inbox.withdraw((state.message_id,))
    withdrawn, state.withdrawn = state.withdrawn, []
    if withdrawn:
        try:
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + RECORD_GRACE):
                await agent.lease.append(*withdrawn)
        except TetherError as exc:
            log.warning(
                "session %s: could not record that a cancelled prompt's message was withdrawn: %s",
                agent.session_id,
                exc,
            )
    return PromptResponse(stop_reason="cancelled")


def _approval_title(call: ToolCall) -> str:
    """The title the kernel gives a permission question about ``call``."""
    return f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)[:300]})"


def _allows(question: PermissionQuestion, choice: str) -> bool:
    return any(
        option_id == choice and kind.startswith("allow") for option_id, _, kind in question.options
    )


# -------------------------------------------------------------------- serving


async def serve(
    kernel: Kernel,
    *,
    agent_name: str | None = None,
    model_spec: str | None = None,
    streams: tuple[ByteSink, ByteSource] | None = None,
    line_limit: int = LINE_LIMIT,
) -> None:
    """Serve ``kernel``'s agent over ACP until the client's input ends.

    ``streams`` is ``(sink to the client, source from the client)``, e.g. an
    :class:`asyncio.StreamWriter` and :class:`asyncio.StreamReader`; by default the process's
    standard output and input (see the module docstring). ``line_limit`` is the longest line
    read, in bytes. The agent and model spec are checked first: a wrong name fails here (a
    :class:`tether.TetherError`), before any ACP message.
    """
    from tether.runtime import profile_session_host, profile_store

    check_servable(kernel, agent_name, model_spec)
    callers = ClientCallers(process_caller(), trust=serve_settings(kernel).trust_meta_caller)
    session_host = profile_session_host(kernel)
    if session_host is not None:
        await _serve_cluster(kernel, session_host, agent_name, streams, line_limit, callers)
        return
    store = profile_store(kernel)
    try:
        sink, source = streams if streams is not None else await _stdio()
        async with Runtime.open(kernel, store) as runtime, anyio.create_task_group() as host:
            server = TetherAcpAgent(runtime, agent_name, model_spec, host=host, callers=callers)
            guard = LineGuard(
                source,
                sink,
                notifications=_NOTIFICATIONS,
                limit=line_limit,
                on_end=server.input_ended,
            )
            try:
                await acp.run_agent(cast(acp.Agent, server), guard)
            finally:
                server.release_all()
    finally:
        await store.aclose()


async def _serve_cluster(
    kernel: Kernel,
    session_host: Any,
    agent_name: str | None,
    streams: tuple[ByteSink, ByteSource] | None,
    line_limit: int,
    callers: ClientCallers | None = None,
) -> None:
    """``serve`` on a profile whose sessions run on a session host (a cluster): prompts go to
    the host, turns are streamed from the shared store (:mod:`tether_acp._cluster`)."""
    from tether.runtime import profile_store

    from ._cluster import ClusterAcpAgent

    store = profile_store(kernel)
    try:
        sink, source = streams if streams is not None else await _stdio()
        # Nothing is hosted here (the workers hold the sessions): the runtime only follows.
        server = ClusterAcpAgent(Runtime(kernel, store), session_host, agent_name, callers)
        guard = LineGuard(
            source, sink, notifications=_NOTIFICATIONS, limit=line_limit, on_end=server.input_ended
        )
        await acp.run_agent(cast(acp.Agent, server), guard)
    finally:
        await session_host.aclose()
        await store.aclose()


async def _stdio() -> tuple[ByteSink, ByteSource]:
    """Streams on the real standard output and input, which nothing else may use from now on:
    descriptor 1 becomes a copy of standard error and descriptor 0 reads ``/dev/null``."""
    loop = asyncio.get_running_loop()
    if os.name != "posix":  # pragma: no cover - the SDK's own stdio handling
        from acp.stdio import stdio_streams

        reader, writer = await stdio_streams(limit=STDIO_LIMIT)
        return writer, reader
    sys.stdout.flush()
    protocol_in = os.fdopen(os.dup(0), "rb", buffering=0)
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    source: ByteSource
    if _is_stream(protocol_in):
        reader = asyncio.StreamReader(limit=STDIO_LIMIT)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), protocol_in)
        source = reader
    else:  # a file (tether acp < requests.jsonl)
        source = _FileSource(protocol_in)
    protocol = asyncio.streams.FlowControlMixin()
    if _is_stream(protocol_out):
        transport, _ = await loop.connect_write_pipe(lambda: protocol, protocol_out)
    else:  # a file (tether acp > replies.jsonl): writes do not block
        transport = _FileTransport(protocol_out)
    return asyncio.StreamWriter(transport, protocol, None, loop), source


def _is_stream(file: Any) -> bool:
    mode = os.fstat(file.fileno()).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _FileSource:
    """Reads a regular file in a worker thread (the event loop cannot watch a file), one
    chunk at a time, as the server asks for it."""

    def __init__(self, file: Any) -> None:
        self._file = file

    async def read(self, n: int, /) -> bytes:
        return await anyio.to_thread.run_sync(self._file.read, n)


class _FileTransport(asyncio.WriteTransport):
    """Writes straight to a regular file (asyncio's pipe transports refuse files)."""

    def __init__(self, file: Any) -> None:
        super().__init__()
        self._file = file
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[self._file.write(view) :]

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._file.close()
