"""``tether acp`` fronting a cluster: the profile's plugins offer a session host (tether-temporal
does), so each prompt goes to the host, a worker runs its turn, and this server streams the turn
to the client from the session's log in the shared store.

What a client sees is what it sees from a local ``tether acp``, with these differences: answers
arrive as whole messages (the pieces a model streams stay on the worker); a tool that needs
approval cannot ask this client (the worker has no one to ask, and refuses it); the client's MCP
servers and ``cwd`` do not reach the workers (their tools are the profile's, run where the
worker runs). ``session/cancel`` interrupts the turn on the worker: it ends ``aborted``, and a
prompt whose turn had not begun is dropped, never run later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import acp
import anyio
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
)

from tether import __version__
from tether.agents import AgentLimits, build_preset, new_header, resolve_agent_name
from tether.errors import TetherError
from tether.runtime import FOLLOW_POLL, SessionHost
from tether.store import SessionStore, StoredEvent, TurnEnded, TurnStarted

if TYPE_CHECKING:
    from tether.loading.kernel import Kernel

from ._server import (
    PROTOCOL_VERSION,
    _LiveAnswer,  # pyright: ignore[reportPrivateUsage]
    _MessageIds,  # pyright: ignore[reportPrivateUsage]
    _prompt_text,  # pyright: ignore[reportPrivateUsage]
    _replay,  # pyright: ignore[reportPrivateUsage]
    _request_error,  # pyright: ignore[reportPrivateUsage]
    _stop_reason,  # pyright: ignore[reportPrivateUsage]
    _working_directory,  # pyright: ignore[reportPrivateUsage]
)

__all__ = ("ClusterAcpAgent",)

log = logging.getLogger("tether_acp")

_SESSION_NOT_FOUND = -32002


@dataclass(eq=False)
class _ClusterSession:
    """An ACP session whose turns run on the cluster."""

    id: str
    new: bool
    """Not created on the cluster yet: its first prompt creates it."""
    turns: anyio.Lock = field(default_factory=anyio.Lock)
    """Held by the prompt whose turn runs: one prompt at a time."""
    cancelled: set[int] = field(default_factory=lambda: set[int]())
    """Prompts (by ``id()``) a ``session/cancel`` reached."""
    running: dict[int, anyio.Event] = field(default_factory=lambda: dict[int, anyio.Event]())
    """Per prompt: set when a cancel came."""


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
            for key, event in session.running.items():
                session.cancelled.add(key)
                event.set()

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(),
                mcp_capabilities=McpCapabilities(http=False),  # the workers' tools only
            ),
            agent_info=Implementation(name="tether", title="tether", version=__version__),
        )

    async def new_session(
        self, cwd: str, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        _working_directory(cwd)  # checked as a local server checks it
        _no_client_servers(mcp_servers)
        session = _ClusterSession(new_header().id, new=True)
        self._sessions[session.id] = session
        return NewSessionResponse(session_id=session.id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        _working_directory(cwd)
        _no_client_servers(mcp_servers)
        try:
            events = await self.store.events(session_id)
        except TetherError as exc:
            raise _request_error(exc) from None
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _ClusterSession(session_id, new=False)
        ids = _MessageIds(session_id, turn=0)
        for stored in events:
            for update in _replay(stored.event, ids):
                await self._client.session_update(session_id=session_id, update=update)
        return LoadSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._sessions.get(session_id)
        if session is None:
            raise acp.RequestError(
                _SESSION_NOT_FOUND,
                f"session {session_id[:200]!r} is not open here; use session/new or session/load",
                {"sessionId": session_id[:200]},
            )
        text = _prompt_text(prompt)
        key = object()
        cancel = anyio.Event()
        session.running[id(key)] = cancel
        try:
            async with session.turns:
                if id(key) in session.cancelled or self._input_ended:
                    return PromptResponse(stop_reason="cancelled")
                return await self._turn(session, text, id(key), cancel)
        finally:
            session.running.pop(id(key), None)
            session.cancelled.discard(id(key))

    async def _turn(
        self, session: _ClusterSession, text: str, key: int, cancel: anyio.Event
    ) -> PromptResponse:
        store = self.store
        after = 0 if session.new else await _log_length(store, session.id)
        try:
            message_id = await self.host.send(
                session.id, text, agent=self.agent_name, new=session.new
            )
        except TetherError as exc:
            raise _request_error(exc) from None
        session.new = False
        live = _LiveAnswer(_MessageIds(session.id))
        turn: int | None = None
        interrupted = False
        while True:
            for stored in await store.events(session.id, after=after):
                after = stored.seq
                event = stored.event
                if isinstance(event, TurnStarted) and event.message_id == message_id:
                    turn = event.turn
                if turn is None:
                    continue  # an earlier turn's events (a notice, another client's message)
                for update in live.event(event):
                    await self._client.session_update(session_id=session.id, update=update)
                if isinstance(event, TurnEnded) and event.turn == turn:
                    return PromptResponse(
                        stop_reason=_stop_reason(session.id, self.max_steps, event)
                    )
            if cancel.is_set() and not interrupted:
                interrupted = True
                await self.host.interrupt(session.id)  # returns once the turn has stopped
                if turn is None and not await _claimed(store, session.id, message_id):
                    # Not begun: it must not run later (what a local server does too).
                    await self.host.cancel(session.id)
                    return PromptResponse(stop_reason="cancelled")
                continue  # read the aborted turn's end
            with anyio.move_on_after(FOLLOW_POLL):
                await cancel.wait()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            log.warning("session/cancel for %s, which is not open", session_id[:200])
            return
        for key, event in session.running.items():
            session.cancelled.add(key)
            event.set()


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
        raise _request_error(exc) from None


async def _claimed(store: SessionStore, session_id: str, message_id: str) -> bool:
    """Whether a turn of ``message_id`` began in the session's log."""
    events: list[StoredEvent] = await store.events(session_id)
    return any(
        isinstance(s.event, TurnStarted) and s.event.message_id == message_id for s in events
    )
