"""Session headers and the events of a session log: the value types every session store
reads and writes (re-exported by :mod:`tether.store`). Every persisted shape is a pydantic model;
how the events are parsed and dumped is the store's (``tether.store``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from ._callers import Caller
from ._messages import FinishReason, ImagePart, Message, ToolCall, Usage
from ._turns import StopReason

__all__ = (
    "AssistantMessage",
    "CompactionEvent",
    "ContextMessage",
    "DescriptorEvent",
    "Event",
    "GuardEvent",
    "InboxAccepted",
    "InboxDiscarded",
    "InstructionEvent",
    "MessageSource",
    "Origin",
    "RewindEvent",
    "SessionHeader",
    "StoredEvent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "UserMessage",
)

Origin = Literal["user", "subagent"]


def _is_none(value: object) -> bool:
    return value is None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SessionHeader(_Frozen):
    """What a session is and where it comes from; lineage lives here, durably."""

    id: str
    created_at: float
    label: str | None = None
    agent: str | None = None
    """The agent preset (profile ``[agent.NAME]``) the session runs."""
    parent_session: str | None = None
    origin: Origin = "user"
    delegation_depth: int = Field(default=0, ge=0)
    """How many delegations separate this session from its root; never lowered."""
    seed_length: int = Field(default=0, ge=0)
    """Events copied from a parent at creation (a fork's seed); the child's own log follows."""
    model: str | None = None
    """The model spec the session runs (``provider:name``), changed only by an explicit
    override (``SessionStore.set_model``, logged as a ``model`` descriptor). ``None`` for a
    session written before tether recorded it: such a session uses its agent's profile model."""
    caller: Caller | None = None
    """Who created the session (its *initiator*, docs/callers.md); ``None`` when the surface
    knew nobody, or for a session written before tether recorded callers. A delegated child's
    is the caller its parent ran for when it delegated."""
    detached: bool = False
    """Whether the session outlives its parent: a child started detached is not closed when
    its parent's session is closed or deleted (docs/sessions.md)."""
    closed_at: float | None = None
    """When the session was closed (``None``: open). A closed session takes no more messages
    (``SESSION_CLOSED``); it is kept, readable, until it is deleted or pruned."""


class MessageSource(_Frozen):
    """Why a user-role message entered the log."""

    kind: Literal["user", "followup", "steer", "inject", "notice", "subagent", "system"] = "user"
    sender: str | None = None
    """The session that sent it, when another agent did."""
    caller: Caller | None = Field(default=None, exclude_if=_is_none)
    """Who sent it (docs/callers.md); the message runs with this caller's identity. ``None``:
    the caller of the message before it (or, for the first, the session's initiator)."""


class TurnStarted(_Frozen):
    type: Literal["turn/start"] = "turn/start"
    turn: int
    message_id: str | None = None


class TurnEnded(_Frozen):
    type: Literal["turn/end"] = "turn/end"
    turn: int
    stop_reason: StopReason
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    error: str | None = None


class UserMessage(_Frozen):
    type: Literal["user/message"] = "user/message"
    message_id: str
    content: str
    source: MessageSource = Field(default_factory=MessageSource)


class AssistantMessage(_Frozen):
    type: Literal["assistant/message"] = "assistant/message"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason = "stop"
    partial: bool = False
    """The turn was cancelled while this answer streamed: ``content`` is what had arrived
    (stored only when true)."""
    remote_usage: Usage | None = Field(default=None, exclude_if=_is_none)
    """What the remote agent behind the model reported its work used
    (:attr:`ModelResponse.remote_usage`); left out of the log when ``None``."""

    @model_serializer(mode="wrap")
    def _without_whole(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.partial:
            data.pop("partial", None)
        return data


class ToolResult(_Frozen):
    type: Literal["tool/result"] = "tool/result"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()
    """Images the tool returned with its text (``tether.agents.ToolOutput``); stored only
    when there are some, so a log without images reads as it always did."""

    @model_serializer(mode="wrap")
    def _without_no_images(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.images:
            data.pop("images", None)
        return data


class InstructionEvent(_Frozen):
    """A dynamic instruction's value, appended whenever it changes (slot ``slug``)."""

    type: Literal["instruction"] = "instruction"
    slug: str
    role: Literal["system", "user"] = "system"
    content: str


class InboxAccepted(_Frozen):
    """A message was accepted for the agent; it is claimed later by its ``user/message``."""

    type: Literal["inbox/accepted"] = "inbox/accepted"
    message_id: str
    content: str
    source: MessageSource = Field(default_factory=MessageSource)
    delivery: Literal["turn", "step", "context"] = "turn"
    """``turn``: a later turn (followup); ``step``: the running turn's next step (steer);
    ``context``: seen at the next step or turn without waking the agent (inject)."""
    trace: dict[str, str] | None = Field(default=None, exclude_if=_is_none)
    """The trace context of the sender (W3C trace-context keys, ``traceparent``...), for the
    turn the message starts (:class:`tether.agents.Tracer`); left out of the log when
    ``None``."""


class InboxDiscarded(_Frozen):
    """An accepted message was dropped unrun (``cancel(keep_inbox=False)``)."""

    type: Literal["inbox/discarded"] = "inbox/discarded"
    message_id: str


class ContextMessage(_Frozen):
    """A message a pre-step hook appended (a catalog, a notice): part of what the model sees."""

    type: Literal["context/message"] = "context/message"
    role: Literal["system", "user"] = "user"
    content: str
    origin: str
    """Who added it: the hook's plugin name or a kernel subsystem."""


class DescriptorEvent(_Frozen):
    """A versioned record later subsystems keep in a log (e.g. a continuable child's setup)."""

    type: Literal["descriptor"] = "descriptor"
    kind: str
    version: int = 1
    data: dict[str, Any] = Field(default_factory=dict)


class CompactionEvent(_Frozen):
    """The conversation so far was replaced by a summary (docs/compaction.md).

    From here on the model's history is the summary, then ``kept``, then whatever follows in
    the log: nothing before it is deleted (``tether sessions show`` shows it all), it is only
    no longer sent.
    """

    type: Literal["compaction"] = "compaction"
    summary: str
    """What the summary says (sent as the first message, :func:`summary_message`)."""
    kept: tuple[Message, ...] = ()
    """What follows the summary: restated context (dynamic instructions, loaded skills, open
    tasks), then the kept tail of the conversation, in order."""
    replaced: int = 0
    """How many messages of the history the summary replaced."""
    earlier_answers: int = 0
    """How many answers of the session are no longer in the history after it (in all)."""
    tokens_before: int = 0
    """The estimated tokens of the history it replaced (all of it, before)."""
    tokens_after: int = 0
    """The estimated tokens of the history after it (the summary and ``kept``)."""
    trigger: Literal["auto", "manual", "overflow"] = "auto"
    """``auto``: the threshold was crossed; ``manual``: asked for (``/compact``,
    ``tether sessions compact``, ``Agent.compact``); ``overflow``: the provider refused a
    request as too long."""
    strategy: str = "summary"
    """Who wrote the summary: ``summary`` (the agent's model) or a plugin's strategy."""
    usage: Usage = Field(default_factory=Usage)
    """The tokens the summary request used."""


class RewindEvent(_Frozen):
    """The turns after ``to_turn`` no longer count (``tether sessions rewind``, ``/undo``).

    The fold (:func:`tether.store.replay.fold`) reads the log as if it ended after its first
    ``keep`` events (where turn ``to_turn`` ended) and went on after this event: the next
    request starts from the same history as the one that followed turn ``to_turn``. Nothing is
    deleted (``tether sessions show`` shows it all); turn numbers are never reused, and what
    was spent stays spent (budget records count wherever they are). Messages accepted and not
    claimed before it are dropped with the turns (docs/sessions.md).
    """

    type: Literal["rewind"] = "rewind"
    to_turn: int = Field(ge=0)
    """The last turn that still counts (0: none, the session starts over)."""
    keep: int = Field(ge=0)
    """How many events of the log, from its start, the history keeps (up to and including
    turn ``to_turn``'s ``turn/end``)."""


class GuardEvent(_Frozen):
    """A guardrail replaced content or stopped the turn (docs/guardrails.md); content it let
    through leaves no event.

    ``replace``: the content the model saw next (the claim of a message, an answer, a tool
    result) is already the replacement; this records that it was replaced, by whom, and
    what was there in its stead is not kept (a redaction must not leave the secret in the
    log). ``stop``: the turn ends ``error`` (``GUARDRAIL_TRIPPED``) after this event."""

    type: Literal["guard"] = "guard"
    guardrail: str
    kind: Literal["input", "output", "tool_call", "tool_result", "child_result", "remote_result"]
    action: Literal["replace", "stop"]
    reason: str = ""
    """For ``stop``, why (the guardrail's text); for ``replace``, empty."""
    target: str | None = Field(default=None, exclude_if=_is_none)
    """What it was about: the message id of a message, the tool call id of a call or
    result; ``None`` for an answer."""


Event = Annotated[
    TurnStarted
    | TurnEnded
    | UserMessage
    | AssistantMessage
    | ToolResult
    | InstructionEvent
    | InboxAccepted
    | InboxDiscarded
    | ContextMessage
    | DescriptorEvent
    | CompactionEvent
    | RewindEvent
    | GuardEvent,
    Field(discriminator="type"),
]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event with its position in the log (1-based, gap-free). A plain record, not a
    pydantic model: stores build one per event they read, and the event is already validated."""

    seq: int
    event: Event
