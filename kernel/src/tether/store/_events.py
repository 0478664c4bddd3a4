"""How a session log's events are parsed and dumped, and the history after a compaction.

The event types themselves (headers, turns, messages, results) are :mod:`tether.contracts`'s,
re-exported here and by :mod:`tether.store` under the same names."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

from ..contracts import (
    AssistantMessage,
    CompactionEvent,
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    InstructionEvent,
    Message,
    MessageSource,
    Origin,
    RewindEvent,
    SessionHeader,
    StopReason,
    StoredEvent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

__all__ = (
    "AssistantMessage",
    "CompactionEvent",
    "ContextMessage",
    "DescriptorEvent",
    "Event",
    "InboxAccepted",
    "InboxDiscarded",
    "InstructionEvent",
    "MessageSource",
    "Origin",
    "RewindEvent",
    "SessionHeader",
    "StopReason",
    "StoredEvent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "UserMessage",
    "parse_event",
)

#: How a compaction's summary opens, before its text (docs/compaction.md).
SUMMARY_HEADER = "<conversation_summary>"
SUMMARY_FOOTER = "</conversation_summary>"


def summary_message(event: CompactionEvent) -> Message:
    """The first message of the history after ``event``: its summary, framed."""
    note = (
        f"{SUMMARY_HEADER}\nThe conversation so far was compacted: {event.replaced} earlier "
        f"message{'s' if event.replaced != 1 else ''} are summarized here.\n\n"
        f"{event.summary}\n{SUMMARY_FOOTER}"
    )
    return Message(role="user", content=note)


def compacted_view(event: CompactionEvent) -> list[Message]:
    """The history right after ``event``."""
    return [summary_message(event), *event.kept]


_EVENT = TypeAdapter(Event)


def parse_event(data: str | bytes) -> Event:
    """Parse one stored event (JSON); raises ``pydantic.ValidationError`` when it is not one."""
    return _EVENT.validate_json(data)


def dump_event(event: BaseModel) -> str:
    """An event (or any frozen record) as JSON for storage; never fails on unencodable text.

    A lone surrogate (``"\\ud83d"``, half of an emoji cut by a byte-wise truncation) has no
    UTF-8 form, so pydantic refuses to serialise it; it is stored as U+FFFD instead. The
    common case costs nothing extra: the replacement runs only after pydantic refused.
    """
    try:
        return event.model_dump_json()
    except PydanticSerializationError:
        cleaned = replace_surrogates_in(event.model_dump())
        return type(event).model_validate(cleaned).model_dump_json()


def replace_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a valid pair becomes its
    character); unchanged, and cheap, when it has none."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def replace_surrogates_in(value: Any) -> Any:
    """:func:`replace_surrogates` applied to every string (keys too) of a JSON-like value."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, dict):
        return {replace_surrogates(str(k)): replace_surrogates_in(v) for k, v in value.items()}  # type: ignore[misc]
    if isinstance(value, list | tuple):
        return [replace_surrogates_in(item) for item in value]  # type: ignore[misc]
    return value
