"""What a plugin adds to an agent's turns: pre-step hooks, dynamic instructions and compaction
strategies, with what each is shown. Values a plugin hands over; the turn loop runs them."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..agents import Agent
    from ._callers import Caller
    from ._events import DescriptorEvent, MessageSource
    from ._messages import Message

__all__ = (
    "CompactionInput",
    "CompactionStrategy",
    "DynamicInstruction",
    "InstructionContext",
    "PreStep",
    "PreStepFunction",
    "StepContext",
)


@dataclass(frozen=True)
class StepContext:
    """What a pre-step hook sees: the agent, the turn and step numbers, what started the turn."""

    agent: Agent
    turn: int
    step: int
    turn_message: str | None = None
    """The text of the message that started this turn."""
    turn_source: MessageSource | None = None
    """Why that message entered the log (``kind = "user"`` for a person's message)."""
    after_reset: bool = False
    """A compaction asks what it must restate: the history is about to be replaced, and
    what the hooks return now is stored among the restated context, right after the
    summary (``step`` is 0 then). Return what a hook shows once and then only its changes
    (a catalog), as it should read from now on; nothing that is per step."""

    @property
    def messages(self) -> tuple[Message, ...]:
        """The history so far (copied on access: hooks that do not look pay nothing)."""
        return self.agent.messages


#: A pre-step hook: returns messages to append before the step's model request (or nothing),
#: and descriptors that record why (stored in the same commit as the messages, never sent).
PreStepFunction = Callable[[StepContext], "Awaitable[Iterable[Message | DescriptorEvent] | None]"]


@dataclass(frozen=True)
class PreStep:
    """A named pre-step hook; ``origin`` is recorded with every message it appends."""

    origin: str
    run: PreStepFunction


@dataclass(frozen=True)
class InstructionContext:
    """What a resolver may look at."""

    agent: str | None
    session_id: str
    turn: int
    caller: Caller | None = None
    """Who is asking: the caller of the message that opens the turn, else of the last
    message the agent took that named one, else the session's initiator (docs/callers.md).
    A resolver whose value depends on it gets a new value appended when the caller changes:
    the prompt only grows."""
    initiator: Caller | None = None
    """Who created the session (its header's ``caller``)."""


@dataclass(frozen=True)
class DynamicInstruction:
    """A resolver evaluated at session start or at every turn start.

    ``resolve`` returns the instruction's text, or ``None`` to leave the slot as it is.
    """

    slug: str
    resolve: Callable[[InstructionContext], str | Awaitable[str | None] | None]
    role: Literal["system", "user"] = "system"
    when: Literal["session", "turn"] = "turn"

    async def value(self, context: InstructionContext) -> str | None:
        result = self.resolve(context)
        if inspect.isawaitable(result):
            result = await result
        return result


@dataclass(frozen=True)
class CompactionInput:
    """What a compaction strategy summarizes."""

    agent: Agent
    replaced: tuple[Message, ...]
    """The messages the summary replaces (a previous summary first, if there was one)."""
    kept: tuple[Message, ...]
    """What will follow the summary (restated context, then the kept tail)."""
    max_tokens: int
    """The longest summary that fits."""


@dataclass(frozen=True)
class CompactionStrategy:
    """A plugin's way of writing summaries (the ``tether_compaction_strategies`` hook):
    ``summarize(input)`` returns the summary text. An agent uses it with
    ``compaction = { strategy = "NAME" }``."""

    name: str
    summarize: Callable[[CompactionInput], Awaitable[str]]
