"""The ``SessionStore`` contract every store implements (and ``tether.testing`` checks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._events import Event, InboxAccepted, SessionHeader, StoredEvent
    from ._lease import LeaseOwner

__all__ = ("SessionStore",)


@runtime_checkable
class SessionStore(Protocol):
    """Durable sessions: a header and an append-only, ordered event log per session.

    * ``append`` returns only once the events are durable; their ``seq`` continue the log
      without gaps (1-based).
    * A header's ``delegation_depth`` can never be lowered (``DEPTH_LOWERED``).
    * Events that cannot be read back are reported (``SESSION_CORRUPT``), never skipped.
    * One session, one driver: only the holder of a session's **lease** writes its log
      (``SESSION_BUSY`` for anyone else, nothing written); any process may **post** a message
      to a session's mailbox, and the holder moves it into the log (``take_mail``) exactly once.
    """

    durable: bool
    """Whether sessions survive the process (continuable children need it)."""

    owner: LeaseOwner
    """This store object's identity in the leases it holds (one token per store object)."""

    async def create(self, header: SessionHeader, events: Sequence[Event] = ()) -> SessionHeader:
        """Create a session, with ``events`` as its first events and its lease held by this
        store, atomically (all or nothing); ``SESSION_EXISTS`` if the id is taken."""
        ...

    async def header(self, session_id: str) -> SessionHeader:
        """The header; ``SESSION_NOT_FOUND`` if there is no such session."""
        ...

    async def raise_depth(self, session_id: str, depth: int) -> SessionHeader:
        """Set ``delegation_depth`` to ``depth`` if higher; lowering it is an error."""
        ...

    async def set_model(
        self, session_id: str, model: str, events: Sequence[Event] = ()
    ) -> SessionHeader:
        """Record ``model`` as the session's model spec in its header and append ``events``
        (the ``model`` descriptor that logs the change), atomically; return the new header.
        Only the lease holder may, as for ``append`` (``SESSION_BUSY``, nothing changed);
        ``SESSION_NOT_FOUND``."""
        ...

    async def append(self, session_id: str, events: Sequence[Event]) -> int:
        """Append events in order; return the ``seq`` of the last one (durable on return).

        Only the lease holder writes, checked in the same step as the write: a free lease is
        taken first; another owner's lease, alive or dead, is ``SESSION_BUSY`` and nothing is
        written (a dead owner's session must be ``acquire``d, and repaired, first)."""
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
        """Remove a session, its log, its lease and its mail (``SESSION_NOT_FOUND`` if absent;
        ``SESSION_BUSY`` if another live process holds it). Only for rolling back a session
        nobody was told about, such as a child whose start failed."""
        ...

    async def acquire(self, session_id: str) -> bool:
        """Take the session's lease for this store. False when it was free or already ours;
        True when it was taken over from a dead owner (atomically: of several stores racing,
        one gets True), and the caller then repairs the turn the dead owner left open.
        ``SESSION_BUSY`` when a live owner holds it; ``SESSION_NOT_FOUND``."""
        ...

    async def release(self, session_id: str) -> None:
        """Drop this store's lease on the session if it holds it; never another owner's;
        idempotent."""
        ...

    async def renew(self) -> None:
        """Push the expiry of every lease this store holds to now plus its lease TTL (what
        stores on other hosts judge liveness by). One cheap write."""
        ...

    async def holder(self, session_id: str) -> LeaseOwner | None:
        """The live holder of the session's lease (perhaps this store's ``owner``); None when
        the lease is free or its holder is dead. ``SESSION_NOT_FOUND``."""
        ...

    async def post(self, session_id: str, message: InboxAccepted) -> None:
        """Store ``message`` durably in the session's mailbox for its driver; needs no lease
        (any process may post). ``SESSION_NOT_FOUND``."""
        ...

    async def mail(self) -> list[str]:
        """The ids of the sessions with posted, untaken messages (drivers look every few tens
        of milliseconds: cheap when the mailbox is empty)."""
        ...

    async def mailbox(self, session_id: str) -> list[InboxAccepted]:
        """The session's untaken messages, in post order. ``SESSION_NOT_FOUND``."""
        ...

    async def take_mail(self, session_id: str) -> list[InboxAccepted]:
        """Append the session's posted messages, in post order, to its log as its next events
        and remove them from the mailbox, in one step; return them (``[]`` if none). Each
        message ends up in the mailbox or in the log, never both, never neither. Needs the
        lease, as ``append`` does."""
        ...

    async def aclose(self) -> None:
        """Release every lease this store holds and its resources; idempotent."""
        ...
