"""Where one ``session/prompt``'s message goes among its agent's turns (docs/acp.md).

A prompt that arrives while another prompt of the session is running a turn steers that turn
(``Agent.steer``) unless its ``_meta`` holds ``{"tether/queue": true}`` (:data:`QUEUE_META`),
which queues it as a turn of its own. Either way its message ends in one of three places,
which the events the prompt hears tell (:class:`Course`):

* a turn of its own (a ``turn/start`` naming its message): the prompt streams that turn, and
  only that turn, and answers at its ``turn/end``;
* a step of a turn another message started (its ``user/message`` claim inside that turn): the
  prompt sends nothing, and answers at that turn's ``turn/end``, with its stop reason and
  usage (the prompt whose turn it is streams the whole turn, the steered part included);
* nowhere (an ``inbox/discarded`` naming it: the session was cancelled before a turn took it):
  the prompt answers ``cancelled``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from tether.store import Event, InboxDiscarded, TurnEnded, TurnStarted, UserMessage

__all__ = ("QUEUE_META", "Course", "Verdict", "queues")

QUEUE_META = "tether/queue"
"""The ``_meta`` key of a ``session/prompt`` that waits for the running turn and runs as a turn
of its own after it (``true``) instead of steering it."""

Verdict = Literal["own", "other", "ends", "dropped"]
"""What an event is to a prompt: an event of its own turn (``own``: streamed), one it does not
stream (``other``), the end of the turn that took its message (``ends``: answer now), or the
discarding of its message (``dropped``: answer ``cancelled``)."""


def queues(meta: Mapping[str, Any]) -> bool:
    """Whether a prompt's ``_meta`` asks it to queue rather than steer."""
    return meta.get(QUEUE_META) is True


class Course:
    """The course of one prompt's message through its agent's turns, read from the events the
    prompt hears in log order (it listens before it sends, so it misses none of them)."""

    __slots__ = ("message_id", "rides", "turn")

    def __init__(self) -> None:
        self.message_id: str | None = None
        """The prompt's message, once accepted."""
        self.turn: int | None = None
        """The turn its message started, once started."""
        self.rides = False
        """Whether a turn another message started took it, at a step (a steer)."""

    @property
    def began(self) -> bool:
        """Whether a turn took the message (its own, or as a steer)."""
        return self.turn is not None or self.rides

    @property
    def streams(self) -> bool:
        """Whether what the agent says now is the prompt's to stream (its own turn runs)."""
        return self.turn is not None

    def hear(self, event: Event) -> Verdict:
        """What ``event`` is to the prompt."""
        mine = self.message_id
        match event:
            case TurnStarted(message_id=started) if started == mine and not self.began:
                self.turn = event.turn
                return "own"
            case UserMessage(message_id=claimed) if claimed == mine and not self.began:
                self.rides = True  # a step of the running turn took it
                return "other"
            case InboxDiscarded(message_id=dropped) if dropped == mine and not self.began:
                return "dropped"
            case TurnEnded() if self.rides or event.turn == self.turn:
                return "ends"
            case _:
                return "own" if self.turn is not None else "other"
