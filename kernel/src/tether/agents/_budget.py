"""An agent's context and its budget: the history the next request starts from, what it costs
against the model's context window, and compaction when it would not fit (``agent.budget``).

The history grows as the turn loop appends to it; its cost is what the provider counted for
the last request plus an estimate of what was appended since. Before each request the budget
makes it fit (:meth:`ContextBudget.fit`): compacted at the threshold (``auto``), or never sent
(``CONTEXT_WINDOW_EXCEEDED``). A compaction (:mod:`tether.agents._compaction`) plans on the
budget and stores its event through :meth:`ContextBudget.apply`.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import ErrorCode, ModelError
from ..models import ContextWindow, Message, messages_tokens, schema_tokens, window_for
from ..store import CompactionEvent, InstructionEvent
from ..store._events import compacted_view
from ..store.replay import SessionFold, event_to_message
from ._compaction import CompactionTrigger, compact

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ("ContextBudget",)

_NO_VALUES: Mapping[str, str] = {}


class ContextBudget:
    """The history of one agent and its cost against the model's context window."""

    __slots__ = (
        "_compactions",
        "_earlier_answers",
        "_owner",
        "_tally",
        "_values",
        "_window",
        "delegation_note",
        "history",
        "holds_images",
    )

    def __init__(self, agent: Agent) -> None:
        self._owner = weakref.ref(agent)
        self.history: list[Message] = []
        """The history the next request starts from (the turn loop appends to it)."""
        self.holds_images = False
        """Whether a message of the history carries images (a tool returned some): then a
        model that takes no images reads a note in their place (``build_request``)."""
        self.delegation_note: Message | None = None
        """What a delegated child was told about its task (its log's delegation note), which
        a compaction restates; ``None`` for a root session."""
        self._values: dict[str, str] | None = None  # made when a slot first has a value
        self._earlier_answers = 0
        self._compactions = 0
        self._tally: tuple[int, int, int] | None = None  # (messages, tokens, of them counted)
        self._window: ContextWindow | bool | None = False  # False: not looked up yet

    @property
    def agent(self) -> Agent:
        """The agent it works for, held weakly: the agent holds this, and a cycle would leave
        every finished agent (its history, its turn) to the cyclic collector."""
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    def restored(self, folded: SessionFold) -> None:
        """Take what the session's log holds (its fold)."""
        self.history.extend(folded.history)
        self._earlier_answers = folded.earlier_answers
        self.delegation_note = folded.delegation_note
        self._compactions = len(folded.compactions)
        if folded.counted is not None:
            self._tally = (*folded.counted, folded.counted[1])
        self.holds_images = self.holds_images or any(m.images for m in folded.history)
        if folded.instructions:
            self._values = dict(folded.instructions)

    @property
    def window(self) -> ContextWindow | None:
        """The model's context window (``None``: unknown, no budget is kept); see
        :func:`tether.models.window_for`."""
        window = self._window
        if window is False:
            spec = self.agent.spec
            model_spec = spec.model_spec or self.agent.header.model
            window = self._window = window_for(model_spec, spec.model, spec.limits.context_window)
        return window  # type: ignore[return-value]

    @property
    def compactions(self) -> int:
        """How many times the session's history was compacted. A pre-step hook that appends
        something once (a catalog) appends it again when this grows: what it appended before
        is no longer in the history."""
        return self._compactions

    @property
    def earlier_answers(self) -> int:
        """Answers of the session a compaction summary replaced (not in the history)."""
        return self._earlier_answers

    @property
    def instruction_values(self) -> Mapping[str, str]:
        """The current value of each dynamic instruction slot."""
        return dict(self._values) if self._values else _NO_VALUES

    def set_instruction(self, event: InstructionEvent) -> None:
        """A slot's new value, appended to the history."""
        if self._values is None:
            self._values = {}
        self._values[event.slug] = event.content
        self.history.append(event_to_message(event))  # type: ignore[arg-type]

    def base_tokens(self) -> int:
        """The estimated tokens of the base prompt and the tool list."""
        agent = self.agent
        return schema_tokens(agent.spec.system, agent.tools.schemas(agent))

    def context_tokens(self) -> int:
        """The tokens the next request carries: what the provider counted for the last one
        (its input and output), plus an estimate of what was appended since
        (:func:`tether.models.message_tokens`); all estimated when nothing was counted yet."""
        return self.context_count()[0]

    def context_count(self) -> tuple[int, int]:
        """``(tokens, counted)``: :meth:`context_tokens`, and how many of them the provider
        counted (the rest is estimated)."""
        history = self.history
        tally = self._tally
        if tally is None or tally[0] > len(history):
            tally = (0, self.base_tokens(), 0)
        length, tokens, counted = tally
        if length < len(history):
            tokens += messages_tokens(itertools.islice(history, length, None))
            tally = (len(history), tokens, counted)
        self._tally = tally
        return tokens, counted

    def counted(self, tokens: int) -> None:
        """The provider counted ``tokens`` for the whole history (its last request and
        answer)."""
        self._tally = (len(self.history), tokens, tokens)

    @property
    def unstored_messages(self) -> int:
        """How many of the last messages of the history come from events not stored yet (what
        opens a turn or a step waits for the step's answer; what a busy store refused is
        held)."""
        return sum(1 for event in self.agent.lease.unsaved if event_to_message(event) is not None)

    @property
    def unstored_instruction_slugs(self) -> frozenset[str]:
        """The instruction slots whose new value is among the events not stored yet."""
        unsaved = self.agent.lease.unsaved
        return frozenset(e.slug for e in unsaved if isinstance(e, InstructionEvent))

    async def compact(self, trigger: CompactionTrigger) -> CompactionEvent | None:
        """Compact the history now (see :mod:`tether.agents._compaction`); the stored event,
        or ``None`` when there was nothing to replace."""
        return await compact(self, trigger)

    async def apply(self, event: CompactionEvent, planned: int) -> CompactionEvent:
        """Store ``event``, planned on the first ``planned`` messages of the history, and make
        its view the history; the event as stored.

        What was stored while its summary was written (a steer's acceptance stores what the
        turn held; an injected message, a task's result) is added to what it keeps, so the
        log's fold and this agent agree. What is still not stored (:attr:`unstored_messages`)
        follows it: the event is stored alone, before those events, so a crash before the
        step's answer leaves the turn unopened in the log, its message to run again."""
        history = self.history
        later = history[planned:]
        unstored = self.unstored_messages
        stored, following = later[: len(later) - unstored], later[len(later) - unstored :]
        if stored:
            event = event.model_copy(update={"kept": (*event.kept, *stored)})
        view = compacted_view(event)
        event = event.model_copy(update={"tokens_after": messages_tokens(view)})
        await self.agent.lease.append_alone(event)
        history[:] = [*view, *following]
        self._earlier_answers = event.earlier_answers
        self._tally = None
        self._compactions += 1
        self.holds_images = any(message.images for message in history)
        return event

    async def fit(self, remaining: int | None) -> None:
        """Make the next request fit the window (when one is known): compact at the threshold
        (``auto``); a request that would still not fit is never sent
        (``CONTEXT_WINDOW_EXCEEDED``). ``remaining``: the output tokens the turn may still
        use."""
        window = self.window
        if window is None:
            return
        budget = window.budget(remaining)
        tokens = self.context_tokens()
        policy = self.agent.spec.compaction
        limit = budget
        if policy.mode == "auto":
            limit = min(budget, int(window.tokens * policy.threshold))
        if tokens <= limit:
            return
        if policy.mode == "auto":
            await compact(self, "auto")
            tokens = self.context_tokens()
        if tokens <= budget:
            return
        if policy.mode == "auto":
            remedy = (
                "even compacted, the base prompt, the tools and the latest messages do not "
                "fit: use a model with a larger window, or fewer tools"
            )
        elif policy.mode == "manual":
            remedy = (
                "compact the session (/compact in tether run, tether sessions compact ID, "
                'Agent.compact()), or set compaction = "auto"'
            )
        else:
            remedy = 'compaction is off: set compaction = "auto" (or "manual") for the agent'
        raise ModelError(
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            f"the next request of session {self.agent.session_id} would carry about {tokens} "
            f"tokens, more than the {budget} its model's context window allows "
            f"({window.tokens} tokens, {window.tokens - budget} kept for the answer); it was "
            "not sent",
            remedy=remedy,
        )
