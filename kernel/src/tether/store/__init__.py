"""Session stores: the ``SessionStore`` protocol, SQLite (durable default) and in-memory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ErrorCode, StoreError
from ._events import (
    AssistantMessage,
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    InboxDiscarded,
    InstructionEvent,
    MessageSource,
    Origin,
    SessionHeader,
    StopReason,
    StoredEvent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    parse_event,
)
from ._lease import DEFAULT_LEASE_TTL, LeaseOwner
from ._memory import MemoryStore
from ._protocol import SessionStore
from ._sqlite import DEFAULT_BUSY_TIMEOUT, SCHEMA_VERSION, SQLiteStore

if TYPE_CHECKING:
    from ..profile import Profile

__all__ = (
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_LEASE_TTL",
    "SCHEMA_VERSION",
    "AssistantMessage",
    "ContextMessage",
    "DescriptorEvent",
    "Event",
    "InboxAccepted",
    "InboxDiscarded",
    "InstructionEvent",
    "LeaseOwner",
    "MemoryStore",
    "MessageSource",
    "Origin",
    "SQLiteStore",
    "SessionHeader",
    "SessionStore",
    "StopReason",
    "StoredEvent",
    "ToolResult",
    "TurnEnded",
    "TurnStarted",
    "UserMessage",
    "check_store_spec",
    "open_store",
    "parse_event",
    "profile_store",
)

DEFAULT_STORE = "sqlite:.tether/sessions.db"


def profile_store(profile: Profile) -> SessionStore:
    """The store a profile names (``[tether] store``), relative to the file that set it."""
    file = profile.origins.get(("tether", "store"))  # the file that set it, if any
    base = file.parent if file is not None else profile.folder
    try:
        return open_store(profile.tether.store, base=base)
    except StoreError as exc:
        if exc.code is not ErrorCode.STORE_SPEC_INVALID:
            raise
        raise StoreError(
            exc.code, exc.message, file=file, key="[tether] store", remedy=exc.remedy
        ) from None


def check_store_spec(spec: str | None) -> None:
    """Raise ``STORE_SPEC_INVALID`` if ``spec`` names no store kind; opens nothing."""
    from ..profile import check_store_spec as check

    check(spec)


def open_store(spec: str | None, *, base: Path | None = None) -> SessionStore:
    """Open ``sqlite:PATH`` (relative to ``base``) or ``memory``; default ``sqlite:.tether/...``."""
    spec = spec or DEFAULT_STORE
    check_store_spec(spec)
    if spec == "memory":
        return MemoryStore()
    path = Path(spec.partition(":")[2]).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    return SQLiteStore(path)
