"""``tether acp`` fronting a cluster: the profile's plugins offer a session host (tether-temporal
does), so each prompt goes to the host, a worker runs its turn, and this server streams the turn
to the client from the session's log in the shared store.

What a client sees is what it sees from a local ``tether acp``, with these differences: a
tool that needs approval cannot ask this client (the worker has no one to ask, and refuses it);
the client's MCP servers and ``cwd`` do not reach the workers (their tools are the profile's,
run where the worker runs); answers stream as they arrive when the store relays their pieces
(:class:`tether.store.DeltaRelay`: tether-postgres does), else each arrives whole once stored.
``session/cancel`` interrupts the turn on the worker: it ends ``aborted``, and a prompt whose
turn had not begun is dropped, never run later. Each prompt's caller (as a local ``tether acp``
has it: :mod:`tether_acp._callers`) goes to the host with the message, so the worker's turn runs
for it (a host that takes no caller gets none).

Each prompt is one :meth:`tether.runtime.Runtime.follow` of the session: the runtime hands the
message to the host and follows its turn (:class:`tether.runtime.FollowedSession`); this module
only turns what it hears into ACP updates, and a cancel into ``interrupt(drop=True)``.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import acp
import anyio
from acp.schema import (
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
)

from tether.agents import AgentLimits, build_preset, new_header, resolve_agent_name, trace_from
from tether.errors import TetherError
from tether.models import ModelDelta
from tether.store import Event, StoredEvent, TurnEnded, TurnStarted

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from tether.contracts import Caller
    from tether.runtime import FollowedSession, Runtime, SessionHost

from ._callers import ClientCallers
from ._protocol import (
    INVALID_PARAMS,
    SESSION_NOT_FOUND,
    LiveAnswer,
    MessageIds,
    forwarded_names,
    initialize_response,
    prompt_text,
    replay,
    request_error,
    stop_reason,
    working_directory,
)
from ._usage import prompt_usage

__all__ = ("ClusterAcpAgent",)

log = logging.getLogger("tether_acp")

_NOT_BEGUN = object()
"""Put on a prompt's stream when its message was cancelled before its turn began."""


@dataclass(eq=False)
class _ClusterSession:
    """An ACP session whose turns run on the cluster."""

    id: str
    new: bool
    """Not created on the cluster yet: its first prompt creates it."""
    turns: anyio.Lock = field(default_factory=anyio.Lock)
    """Held by the prompt whose turn runs: one prompt at a time."""
    running: set[anyio.Event] = field(default_factory=lambda: set[anyio.Event]())
    """One event per prompt accepted and not answered yet: set when a cancel reaches it."""
    caller: Caller | None = None
    """Who sends the session's prompts that name no caller."""


class _Sending:
    """``host``, sending each message as ``caller`` (when the host takes a caller)."""

    def __init__(self, host: SessionHost, caller: Caller | None) -> None:
        self.host = host
        self.name = host.name
        self.caller = caller

    async def send(
        self,
        session_id: str,
        content: str,
        *,
        agent: str | None = None,
        new: bool = False,
        message_id: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        send: Any = self.host.send
        sender = {"caller": self.caller} if self.caller is not None and _takes_caller(send) else {}
        return await send(
            session_id, content, agent=agent, new=new, message_id=message_id, trace=trace, **sender
        )

    async def cancel(self, session_id: str) -> None:
        await self.host.cancel(session_id)

    async def interrupt(self, session_id: str) -> None:
        await self.host.interrupt(session_id)

    async def aclose(self) -> None:
        await self.host.aclose()


def _takes_caller(send: Any) -> bool:
    try:
        return "caller" in inspect.signature(send).parameters
    except (TypeError, ValueError):
        return False


class ClusterAcpAgent:
    """The ACP ``Agent`` side of ``tether acp`` on a profile whose sessions run on a session
    host: ``runtime`` follows each prompt's turn (:meth:`Runtime.follow`), which ``host`` runs,
    from its store."""

    def __init__(
        self,
        runtime: Runtime,
        host: SessionHost,
        agent_name: str | None = None,
        callers: ClientCallers | None = None,
    ) -> None:
        if runtime.store is None:
            raise ValueError(
                "ClusterAcpAgent: the runtime has no session store; give it the store the "
                "cluster's workers write to (profile_store(kernel))"
            )
        self.runtime = runtime
        self.store = runtime.store
        self.host = host
        self.callers = callers if callers is not None else ClientCallers(None, trust=False)
        self.agent_name = resolve_agent_name(runtime.kernel, agent_name)
        limits = build_preset(runtime.kernel, self.agent_name).limits or AgentLimits()
        self.max_steps = limits.max_steps
        self._client: Any = None
        self._sessions: dict[str, _ClusterSession] = {}
        self._input_ended = False

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    def input_ended(self) -> None:
        """The client sends nothing more: running prompts are cancelled."""
        self._input_ended = True
        for session in self._sessions.values():
            for cancelled in session.running:
                cancelled.set()

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return initialize_response(mcp_http=False)  # the workers' tools only

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        working_directory(cwd)  # checked as a local server checks it
        _no_client_servers(mcp_servers)
        _no_forwarded_guardrails(kwargs)
        session = _ClusterSession(new_header().id, new=True, caller=self._caller(kwargs))
        self._sessions[session.id] = session
        return NewSessionResponse(session_id=session.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        working_directory(cwd)
        _no_client_servers(mcp_servers)
        _no_forwarded_guardrails(kwargs)
        caller = self._caller(kwargs)
        try:
            events = await self.store.events(session_id)
        except TetherError as exc:
            raise request_error(exc) from None
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _ClusterSession(session_id, new=False)
        session.caller = caller
        ids = MessageIds(session_id, turn=0)
        for stored in events:
            for update in replay(stored.event, ids):
                await self._client.session_update(session_id=session_id, update=update)
        return LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._sessions.get(session_id)
        if session is None:
            raise acp.RequestError(
                SESSION_NOT_FOUND,
                f"session {session_id[:200]!r} is not open here; use session/new or session/load",
                {"sessionId": session_id[:200]},
            )
        text = prompt_text(prompt)
        caller = self._caller(kwargs, session.caller)
        cancel = anyio.Event()
        session.running.add(cancel)  # before any await: a cancel from now on reaches it
        try:
            async with session.turns:
                if cancel.is_set() or self._input_ended:
                    return PromptResponse(stop_reason="cancelled")
                return await self._turn(session, text, cancel, trace_from(kwargs), caller)
        finally:
            session.running.discard(cancel)

    async def _turn(
        self,
        session: _ClusterSession,
        text: str,
        cancel: anyio.Event,
        trace: dict[str, str] | None = None,
        caller: Caller | None = None,
    ) -> PromptResponse:
        """Send ``text`` through the cluster and stream its turn to the client until it ends
        (or was cancelled before it began); ``trace``: the client's trace context (the
        prompt's ``_meta``), which the worker's turn continues; ``caller``: who sends it."""
        items, received = anyio.create_memory_object_stream[object](math.inf)
        message_id: str | None = None
        ours = False  # whether the follower reached the turn's start

        def hear(stored: StoredEvent) -> None:
            nonlocal ours
            event = stored.event
            if isinstance(event, TurnStarted) and event.message_id == message_id:
                ours = True
            if ours:  # an earlier turn's events (a notice, another client's) are not this one's
                items.send_nowait(event)

        with items, received:
            try:
                async with self.runtime.follow(
                    _Sending(self.host, caller),
                    session.id,
                    agent=self.agent_name,
                    new=session.new,
                    hear=hear,
                    hear_delta=items.send_nowait,
                ) as followed:
                    message_id = await followed.send(text, trace=trace)
                    session.new = False
                    outcome = await self._stream(session, followed, cancel, items, received)
            except TetherError as exc:
                raise request_error(exc) from None
        if isinstance(outcome, acp.RequestError):
            raise outcome
        return outcome

    async def _stream(
        self,
        session: _ClusterSession,
        followed: FollowedSession,
        cancel: anyio.Event,
        items: MemoryObjectSendStream[object],
        received: MemoryObjectReceiveStream[object],
    ) -> PromptResponse | acp.RequestError:
        """Follow the turn sent last (what ``followed`` hears arrives on ``received``) and
        stream it to the client; a cancel interrupts it, dropping a message not begun."""
        live = LiveAnswer(MessageIds(session.id))
        following = anyio.CancelScope()

        async def follow() -> None:
            with following:
                await followed.turn()
            if following.cancel_called:
                # Shielded in there: once asked, the interrupt is seen through even if the
                # turn's end is read meanwhile (its prompt answered), so the session is left
                # as it says. Not begun: it must not run later (what a local server does too).
                await followed.interrupt(drop=True)
                if followed.dropped:
                    items.send_nowait(_NOT_BEGUN)
            if followed.running is not None:  # not ended within the grace: followed on
                await followed.turn()

        async def stop() -> None:
            await cancel.wait()
            following.cancel()

        outcome: PromptResponse | acp.RequestError | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            group.start_soon(stop)
            async for item in received:
                if item is _NOT_BEGUN:
                    outcome = PromptResponse(stop_reason="cancelled")
                    break
                if isinstance(item, ModelDelta):
                    updates = live.delta(item)
                else:
                    updates = live.event(cast(Event, item))
                for update in updates:
                    await self._client.session_update(session_id=session.id, update=update)
                if isinstance(item, TurnEnded):
                    try:
                        outcome = PromptResponse(
                            stop_reason=stop_reason(session.id, self.max_steps, item),
                            usage=prompt_usage(item.usage),
                        )
                    except acp.RequestError as exc:
                        outcome = exc
                    break
            group.cancel_scope.cancel()
        assert outcome is not None
        return outcome

    def _caller(self, meta: dict[str, Any], fallback: Caller | None = None) -> Caller | None:
        try:
            return self.callers.of(meta, fallback)
        except TetherError as exc:  # CALLER_INVALID: invalid params
            raise request_error(exc) from None

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            log.warning("session/cancel for %s, which is not open", session_id[:200])
            return
        for cancelled in session.running:
            cancelled.set()


def _no_forwarded_guardrails(meta: dict[str, Any]) -> None:
    """A delegating tether's forwarded guardrails are refused here (the workers open the
    sessions, and nothing would record them): the delegation fails instead of running
    unchecked. Serve the agent with a local ``tether acp`` to take them."""
    names = forwarded_names(meta)
    if names:
        raise acp.RequestError(
            INVALID_PARAMS,
            f"tether acp fronting a cluster does not apply forwarded guardrails "
            f"({', '.join(names)}); serve the agent with a local tether acp, or set "
            'guardrails = "exempt" on its entry in the delegating profile [GUARDRAIL_INVALID]',
            {"tetherCode": "GUARDRAIL_INVALID"},
        )


def _no_client_servers(mcp_servers: Any) -> None:
    if mcp_servers:
        log.warning(
            "the client's MCP servers are not used: this profile's sessions run on a cluster, "
            "whose workers use the profile's tools"
        )
