"""The answer a model streams now: its pieces told to whoever listens (``agent.loop``).

While anyone listens to an agent's deltas (:meth:`tether.agents.Agent.listen_deltas`, or the
runtime's shared listeners), its model's answers are streamed; the text that arrived so far
is kept, so that a turn cancelled mid-answer keeps what was said (a ``partial`` answer). Made
when first needed: most agents (a background child) are never listened to.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..models import ModelDelta

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("AnswerStream",)

log = logging.getLogger("tether.agents")


class AnswerStream:
    """The delta listeners of one agent and the text of the answer streaming now."""

    __slots__ = ("_listeners", "_owner", "_text")

    def __init__(self, agent: Agent) -> None:
        self._owner = weakref.ref(agent)
        self._listeners: tuple[Callable[[ModelDelta], None], ...] = ()
        self._text: list[str] | None = None

    @property
    def _agent(self) -> Agent:
        """The agent it works for, held weakly: the agent holds this, and a cycle would leave
        every finished agent (its history, its turn) to the cyclic collector."""
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    def listen(self, listener: Callable[[ModelDelta], None]) -> Callable[[], None]:
        """Tell ``listener`` each delta; returns an unsubscribe function."""
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            listeners = list(self._listeners)
            listeners.remove(listener)
            self._listeners = tuple(listeners)

        return unsubscribe

    @property
    def wanted(self) -> bool:
        """Whether anyone listens (the agent's answers are streamed then)."""
        if self._listeners:
            return True
        runtime = self._agent.runtime
        return runtime is not None and bool(runtime.delta_listeners)

    def begin(self) -> None:
        """An answer starts streaming."""
        self._text = []

    def end(self) -> str | None:
        """The answer is over (received, or cut); the text that arrived of it, if any."""
        text, self._text = self._text, None
        return "".join(text) if text else None

    def hear(self, delta: ModelDelta) -> None:
        """One piece of the answer: kept (text) and told to every listener."""
        text = self._text
        if text is not None:
            if delta.kind == "text":
                text.append(delta.text)
            elif delta.kind == "retry":
                text.clear()  # what arrived before the retry is not part of the answer
        agent = self._agent
        for listener in self._listeners:
            try:
                listener(delta)
            except Exception:  # a display's bug never breaks the answer it shows
                log.exception("a delta listener of session %s failed", agent.session_id)
        runtime = agent.runtime
        if runtime is not None:
            for shared in runtime.delta_listeners:
                try:
                    shared(agent, delta)
                except Exception:
                    log.exception("a runtime delta listener failed (session %s)", agent.session_id)
