"""The ``SessionStore`` contract every store implements (and ``tether.testing`` checks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ._events import Event, SessionHeader, StoredEvent

__all__ = ("SessionStore",)


@runtime_checkable
class SessionStore(Protocol):
    """Durable sessions: a header and an append-only, ordered event log per session.

    * ``append`` returns only once the events are durable; their ``seq`` continue the log
      without gaps (1-based).
    * A header's ``delegation_depth`` can never be lowered (``DEPTH_LOWERED``).
    * Events that cannot be read back are reported (``SESSION_CORRUPT``), never skipped.
    """

    durable: bool
    """Whether sessions survive the process (continuable children need it)."""

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        """Create a session, with ``events`` as its first events, atomically (both or
        nothing); ``SESSION_EXISTS`` if the id is taken."""
        ...

    async def header(self, session_id: str) -> SessionHeader:
        """The header; ``SESSION_NOT_FOUND`` if there is no such session."""
        ...

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        """Set ``delegation_depth`` to ``depth`` if higher; lowering it is an error."""
        ...

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        """Append events in order; return the ``seq`` of the last one (durable on return)."""
        ...

    async def events(
        self, session_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        """Every event with ``seq > after``, in order; at most ``limit`` of them."""
        ...

    async def sessions(
        self, *, parent: str | None = None, limit: int | None = None
    ) -> list[SessionHeader]:
        """Headers, newest first; only the children of ``parent`` when given."""
        ...

    async def delete(self, session_id: str) -> None:
        """Remove a session and its log (``SESSION_NOT_FOUND`` if absent). Only for rolling
        back a session nobody was told about, such as a child whose start failed."""
        ...

    async def aclose(self) -> None:
        """Release the store's resources; idempotent."""
        ...
