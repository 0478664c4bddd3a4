"""``tether acp`` fronting a cluster: the profile's plugins offer a session host (tether-temporal
does), so each prompt goes to the host, a worker runs its turn, and this server streams the turn
to the client from the session's log in the shared store.

What a client sees is what it sees from a local ``tether acp``, with these differences: a
tool that needs approval cannot ask this client (the worker has no one to ask, and refuses it);
the client's MCP servers and ``cwd`` do not reach the workers (their tools are the profile's,
run where the worker runs); answers stream as they arrive when the store relays their pieces
(:class:`tether.store.DeltaRelay`: tether-postgres does), else each arrives whole once stored.
``session/cancel`` interrupts the turn on the worker: it ends ``aborted``, and a prompt whose
turn had not begun is dropped, never run later.
"""

from __future__ import annotations

import logging
import math
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
from tether.runtime import SessionHost, follow_turn, relayed_deltas, turn_began
from tether.store import Event, SessionStore, StoredEvent, TurnEnded, TurnStarted

if TYPE_CHECKING:
    from tether.loading import Kernel

from ._protocol import (
    SESSION_NOT_FOUND,
    LiveAnswer,
    MessageIds,
    initialize_response,
    prompt_text,
    replay,
    request_error,
    stop_reason,
    working_directory,
)

__all__ = ("ClusterAcpAgent",)

log = logging.getLogger("tether_acp")

#: Seconds a cancel waits for the cluster to stop the turn.
INTERRUPT_GRACE = 30.0
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


class ClusterAcpAgent:
    """The ACP ``Agent`` side of ``tether acp`` on a profile whose sessions run on a session
    host: prompts go to ``host``, turns are read from ``store``."""

    def __init__(
        self,
        kernel: Kernel,
        store: SessionStore,
        host: SessionHost,
        agent_name: str | None = None,
    ) -> None:
        self.kernel = kernel
        self.store = store
        self.host = host
        self.agent_name = resolve_agent_name(kernel, agent_name)
        limits = build_preset(kernel, self.agent_name).limits or AgentLimits()
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
        session = _ClusterSession(new_header().id, new=True)
        self._sessions[session.id] = session
        return NewSessionResponse(session_id=session.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        working_directory(cwd)
        _no_client_servers(mcp_servers)
        try:
            events = await self.store.events(session_id)
        except TetherError as exc:
            raise request_error(exc) from None
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _ClusterSession(session_id, new=False)
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
        cancel = anyio.Event()
        session.running.add(cancel)  # before any await: a cancel from now on reaches it
        try:
            async with session.turns:
                if cancel.is_set() or self._input_ended:
                    return PromptResponse(stop_reason="cancelled")
                return await self._turn(session, text, cancel, trace_from(kwargs))
        finally:
            session.running.discard(cancel)

    async def _turn(
        self,
        session: _ClusterSession,
        text: str,
        cancel: anyio.Event,
        trace: dict[str, str] | None = None,
    ) -> PromptResponse:
        """Send ``text`` through the cluster and stream its turn; ``trace``: the client's
        trace context (the prompt's ``_meta``), which the worker's turn continues."""
        store = self.store
        after = 0 if session.new else await _log_length(store, session.id)
        # Listening for the answers' pieces before anything is sent: none is missed.
        async with relayed_deltas(store, session.id) as deltas:
            try:
                message_id = await self.host.send(
                    session.id, text, agent=self.agent_name, new=session.new, trace=trace
                )
            except TetherError as exc:
                raise request_error(exc) from None
            session.new = False
            return await self._stream(session, message_id, after, deltas, cancel)

    async def _stream(
        self,
        session: _ClusterSession,
        message_id: str,
        after: int,
        deltas: Any,
        cancel: anyio.Event,
    ) -> PromptResponse:
        """Stream the turn of ``message_id`` to the client until it ends (or was cancelled
        before it began)."""
        store = self.store
        live = LiveAnswer(MessageIds(session.id))
        send, receive = anyio.create_memory_object_stream[object](math.inf)
        ours = False  # whether the follower reached the turn's start

        def hear(stored: StoredEvent) -> None:
            nonlocal ours
            event = stored.event
            if isinstance(event, TurnStarted) and event.message_id == message_id:
                ours = True
            if ours:  # an earlier turn's events (a notice, another client's) are not this one's
                send.send_nowait(event)

        async def follow() -> None:
            await follow_turn(
                store,
                session.id,
                message_id,
                after=after,
                hear=hear,
                deltas=deltas,
                hear_delta=send.send_nowait,
            )

        async def interrupt() -> None:
            await cancel.wait()
            # Shielded: once asked, the interrupt is seen through even if the turn's end is
            # read meanwhile (its prompt answered), so the session is left as it says.
            with anyio.CancelScope(shield=True), anyio.move_on_after(INTERRUPT_GRACE):
                await self.host.interrupt(session.id)  # returns once the turn has stopped
                if not await turn_began(store, session.id, message_id):
                    # Not begun: it must not run later (what a local server does too).
                    await self.host.cancel(session.id)
                    send.send_nowait(_NOT_BEGUN)

        outcome: PromptResponse | acp.RequestError | None = None
        with send, receive:
            async with anyio.create_task_group() as group:
                group.start_soon(follow)
                group.start_soon(interrupt)
                async for item in receive:
                    if item is _NOT_BEGUN:
                        outcome = PromptResponse(stop_reason="cancelled")
                        break
                    if isinstance(item, ModelDelta):
                        updates = live.delta(item)
                    else:
                        event = cast(Event, item)
                        updates = live.event(event)
                    for update in updates:
                        await self._client.session_update(session_id=session.id, update=update)
                    if isinstance(item, TurnEnded):
                        try:
                            reason = stop_reason(session.id, self.max_steps, item)
                            outcome = PromptResponse(stop_reason=reason)
                        except acp.RequestError as exc:
                            outcome = exc
                        break
                group.cancel_scope.cancel()
        if isinstance(outcome, acp.RequestError):
            raise outcome
        assert outcome is not None
        return outcome

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            log.warning("session/cancel for %s, which is not open", session_id[:200])
            return
        for cancelled in session.running:
            cancelled.set()


def _no_client_servers(mcp_servers: Any) -> None:
    if mcp_servers:
        log.warning(
            "the client's MCP servers are not used: this profile's sessions run on a cluster, "
            "whose workers use the profile's tools"
        )


async def _log_length(store: SessionStore, session_id: str) -> int:
    try:
        return len(await store.events(session_id))
    except TetherError as exc:
        raise request_error(exc) from None
