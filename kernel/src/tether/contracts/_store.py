"""The store contract: what a session store is, and the provider that opens one for a spec."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    from ..store import LeaseOwner
    from ._events import Event, InboxAccepted, SessionHeader, StoredEvent

__all__ = ("SessionLifecycle", "SessionRemoval", "SessionStore", "StoreProvider")

_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


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
    * A **closed** session (``SessionHeader.closed_at`` set, by a store that implements
      :class:`SessionLifecycle`) takes no more messages: ``post`` and an ``append`` that
      accepts one (an ``inbox/accepted`` event) raise ``SESSION_CLOSED`` and write nothing.
      Its lease holder may still append the rest of the turn it is running.
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
        nobody was told about, such as a child whose start failed: it leaves the session's
        children as they are. Ending a session for good is
        :meth:`SessionLifecycle.delete_session`."""
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
        (any process may post). ``SESSION_NOT_FOUND``; ``SESSION_CLOSED`` (nothing posted)."""
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


@dataclass(frozen=True, slots=True)
class SessionRemoval:
    """What :meth:`SessionLifecycle.delete_session` did, in one transaction."""

    deleted: tuple[str, ...]
    """The sessions removed (their headers, logs, leases, mail and budget rows), the one asked
    for first."""
    closed: tuple[str, ...]
    """The sessions closed because a session above them was deleted (those it closed now;
    ones closed before are not repeated); they stay, readable."""


@runtime_checkable
class SessionLifecycle(Protocol):
    """The optional part of a :class:`SessionStore` that ends sessions (docs/sessions.md):
    closing a session with its tree, and deleting one. The built-in stores and
    tether-postgres implement it; a store without it (checked with
    :func:`tether.ground.implements`) still loads, and ``tether sessions close|delete|prune``
    say it cannot.

    A session's **lifetime tree** is the session and every session below it reached through
    children not started detached (``SessionHeader.detached``): a detached child, and all
    below it, outlives its parent.

    Each call is one transaction: after a crash either all of it happened or none of it did.
    """

    async def close_session(self, session_id: str, *, at: float) -> tuple[str, ...]:
        """Close the session and its lifetime tree at ``at`` (seconds since the epoch): set
        ``closed_at`` on those still open and drop their untaken mail (a posted message never
        taken into the log was never accepted). Returns the ids closed now, the session first
        if it was open; a closed session stays as it is (idempotent). ``SESSION_NOT_FOUND``.
        A live holder of a closed session is not interrupted: it may finish the turn it runs,
        and accepts no message after it (``SESSION_CLOSED``)."""
        ...

    async def delete_session(
        self, session_id: str, *, at: float, tree: bool = False
    ) -> SessionRemoval:
        """Delete the session (its header, log, lease, mail and budget rows) and close the
        rest of its lifetime tree at ``at`` (those children stay, closed and readable); with
        ``tree``, delete every session below it as well, detached ones included.
        ``SESSION_BUSY`` (nothing changed) when another live process holds one of the
        sessions to delete that is not closed: close it first (its holder then finishes its
        turn), then delete it. ``SESSION_NOT_FOUND``."""
        ...


@dataclass(frozen=True)
class StoreProvider:
    """Opens session stores for the specs ``PREFIX:REST`` (or the bare ``PREFIX``).

    Returned by the ``tether_store_providers`` hook. A prefix is a letter followed by letters,
    digits, ``+``, ``.`` or ``-`` (the grammar of a URL scheme); anything else is a
    ``ValueError`` when the provider is made.
    """

    prefix: str
    """``sqlite``: the part of a spec before its first colon."""
    open: Callable[[str, Path], SessionStore]
    """``open(rest, base)``: the store for ``PREFIX:REST``; ``rest`` is the spec after the colon
    (empty for a bare prefix), ``base`` the folder relative paths in it resolve against (that of
    the profile file that set ``[tether] store``). Called when a command opens the store, never
    at load; it must return a :class:`SessionStore`."""
    description: str = ""
    """What the store is, in a few words a user reads in errors: ``"durable, one SQLite file"``."""
    argument: str | None = None
    """What follows ``PREFIX:``, in words (``"PATH"``), or ``None`` when the spec is the bare
    prefix. A spec that gives an argument to a store that takes none, or none to one that
    takes one, is ``STORE_SPEC_INVALID`` at load."""
    check: Callable[[str], object] | None = None
    """``check(rest)``: called at load with what ``open`` will get, opening nothing; raises
    ``STORE_SPEC_INVALID`` (a ``StoreError``) for options or a location ``open`` would refuse,
    so ``tether check`` finds a bad option before a command opens the store."""

    def __post_init__(self) -> None:
        # What a plugin hands over is checked, not trusted: the annotations are its promise.
        prefix, opener, argument, check = cast(
            "tuple[object, object, object, object]",
            (self.prefix, self.open, self.argument, self.check),
        )
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise ValueError(
                f"store prefix {prefix!r} is not a name: use a letter, then letters, digits, "
                "'+', '.' or '-'"
            )
        if not callable(opener):
            raise TypeError(f'store provider "{prefix}": open must be callable, not {opener!r}')
        if check is not None and not callable(check):
            raise TypeError(f'store provider "{prefix}": check must be callable, not {check!r}')
        if argument is not None and not (isinstance(argument, str) and argument.strip()):
            raise ValueError(
                f'store provider "{prefix}": argument must be a word such as "PATH", or None'
            )

    @property
    def form(self) -> str:
        """How a spec of this store is written: ``sqlite:PATH``, ``memory``."""
        return self.prefix if self.argument is None else f"{self.prefix}:{self.argument}"
