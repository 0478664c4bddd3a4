"""Holding a session: the one way a process hosts a session it drives (:meth:`Runtime.hold`).

Every host of a session does the same five things around what it does with the session:
enter the agent (take the lease, move posted mail into the log, fold the log, close a turn a
crash left open, register in ``runtime.live_agents``), recover its continuable children after a
crash, serve what comes (prompts, mail other processes post: the keeper delivers it while the
session is held), settle, and on leaving release the lease and close a closable model
(:class:`tether.models.ClosableModel`). ``tether run`` (:meth:`Runtime.run_session`), ``tether
acp``, ``tether a2a serve``, ``tether sessions send``, a Temporal worker's drive and the
examples all hold their sessions here; what they do while the session is held is theirs.

``Runtime.hold(agent, *, recover=False, stop=None, close_model=True)``:

- Entering takes the session's lease (``SESSION_BUSY`` when another live process, or another
  store object of this one, drives it; ``SESSION_CONFLICT`` when the session is open in this
  runtime already), moves posted mail into the log, closes a turn a crash left open and
  registers the agent in ``runtime.live_agents``; with ``recover``, continuable children that
  hold accepted, unrun messages pick up again (:meth:`Runtime.recover`).
- While held, the block sends (:meth:`HeldSession.send`, :meth:`HeldSession.run`, or the
  agent's own API) and mail other processes post runs (the runtime's keeper inside
  ``Runtime.open``, else the agent's own).
- Leaving leaves the agent (a running turn records its end, hosted children end, the lease is
  released), then closes the model when it is a :class:`~tether.models.ClosableModel`
  (``close_model``), shielded, also when the block raised (a close that fails then is logged;
  the block's error propagates as raised). A store fault that stopped the agent is raised
  after a block that did not raise.
- ``stop`` (a cancel scope, entered around the recovery and the block) cuts the work short, as
  Ctrl-C does: the block is cancelled, the session left as above, and the code after the
  ``async with`` goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, TypeGuard

import anyio

from ..ground import implements
from ..models import ClosableModel

if TYPE_CHECKING:
    from anyio import CancelScope

    from ..agents import Agent
    from ..contracts import Caller
    from ..store import StopReason
    from ._runtime import Runtime

__all__ = ("COMPACT_GESTURE", "HeldSession", "SessionHold", "close_model")

log = logging.getLogger("tether.runtime")

#: The prompt that compacts a session instead of being sent (``tether run ... /compact``).
COMPACT_GESTURE = "/compact"


class HeldSession:
    """A session held open by :meth:`Runtime.hold`: its agent entered and registered, its
    children recovered when asked. Send to it with :meth:`send` (or through :attr:`agent`'s own
    API: ``followup``, ``listen``, ``interrupt``...); :meth:`settle` waits until it is quiet."""

    __slots__ = ("agent", "runtime")

    def __init__(self, runtime: Runtime, agent: Agent) -> None:
        self.runtime = runtime
        """The runtime that holds the session."""
        self.agent = agent
        """The session's agent, entered (``async with agent`` is done for you)."""

    @property
    def session_id(self) -> str:
        return self.agent.session_id

    async def send(
        self,
        prompt: str,
        *,
        caller: Caller | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str | None:
        """``prompt`` as the session's next message (a follow-up, run after what is queued);
        its message id. A prompt that is exactly ``/compact`` (:data:`COMPACT_GESTURE`) is
        not sent: once the turns of the messages before it have run, the session is
        compacted (:meth:`Agent.compact`), and ``None`` is returned. ``caller``: who sends it
        (default: the caller the agent was composed for; admitted by the session's gates,
        ``CALLER_REFUSED``: docs/callers.md). ``trace``: the sender's trace context (W3C
        keys), stored with the message."""
        if prompt.strip() == COMPACT_GESTURE:
            await self.agent.compact()
            return None
        return await self.agent.followup(prompt, caller=caller, trace=trace)

    async def run(self, prompts: Sequence[str]) -> StopReason:
        """Send ``prompts`` in order (:meth:`send`), then :meth:`settle`; the stop reason of
        the session's last turn."""
        for prompt in prompts:
            await self.send(prompt)
        await self.settle()
        return self.agent.loop.last_stop_reason

    async def settle(self) -> None:
        """Wait until the session is quiet: idle, its continuable children and one-shot
        tasks settled, with the turns their notices and results give
        (:meth:`Runtime.settle`)."""
        await self.runtime.settle(self.agent)


class SessionHold:
    """:meth:`Runtime.hold`'s context manager; see there. A class, not a generator: holding
    a session is on every fresh turn's path, and an ``asynccontextmanager`` costs a generator,
    its event-loop hooks and two wrappers each time (about 3 µs of a 90 µs turn)."""

    __slots__ = ("_agent", "_close", "_recover", "_runtime", "_stop")

    def __init__(
        self,
        runtime: Runtime,
        agent: Agent,
        *,
        recover: bool = False,
        stop: CancelScope | None = None,
        close: bool = True,
    ) -> None:
        self._runtime = runtime
        self._agent = agent
        self._recover = recover
        self._stop = stop
        self._close = close

    async def __aenter__(self) -> HeldSession:
        agent = self._agent
        try:
            await agent.__aenter__()
        except BaseException:
            if self._close:
                await _close(agent, failing=True)
            raise
        stop = self._stop
        if stop is not None or self._recover:
            try:
                if stop is not None:
                    try:
                        stop.__enter__()
                    except BaseException:
                        self._stop = None  # not entered: leaving does not exit it
                        raise
                if self._recover:
                    await self._runtime.recover(agent)
            except BaseException as exc:
                if await self.__aexit__(type(exc), exc, exc.__traceback__):
                    # ``stop`` cut the recovery short: the session is left, and there is no
                    # block to run.
                    raise RuntimeError(
                        f"session {agent.session_id} was stopped before it was held"
                    ) from exc
                raise
        return HeldSession(self._runtime, agent)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        agent, close = self._agent, self._close
        try:
            stop = self._stop
            if stop is not None and stop.__exit__(exc_type, exc, traceback):
                exc_type = exc = traceback = None  # its own cancellation: the block is cut short
            if await agent.__aexit__(exc_type, exc, traceback):
                exc_type = exc = traceback = None
        except BaseException as raised:
            if close:
                await _close(agent, failing=True)
            if raised is exc:
                return False  # the block's own error propagates as raised
            raise
        if exc is not None:
            if close:
                await _close(agent, failing=True)
            return False
        if close and _closable(agent.spec.model):
            await close_model(agent)
        if agent.lease.fault is not None:
            raise agent.lease.fault
        return True  # the block ended, or was cut short by ``stop``


async def _close(agent: Agent, *, failing: bool) -> None:
    if _closable(agent.spec.model):
        await close_model(agent, failing=failing)


async def close_model(agent: Agent, *, failing: bool = False) -> None:
    """Close ``agent``'s model when it is a :class:`~tether.models.ClosableModel`, shielded
    from cancellation (a host task being cancelled still releases the connections). A close
    that fails is raised, unless the session is failing already (``failing``): then it is
    logged, and the session's own error propagates."""
    model = agent.model
    if not _closable(model):
        return
    with anyio.CancelScope(shield=True):
        try:
            await model.aclose()
        except Exception:
            if not failing:
                raise
            log.exception("session %s: closing the model failed", agent.session_id)


def _closable(model: object) -> TypeGuard[ClosableModel]:
    """Whether the model's class is closable (``aclose`` is a method of its class), answered
    once per class: once the largest cost of holding a session."""
    return implements(model, ClosableModel)
