"""Who may write a session of a SQLite store: the ``leases`` table, one row per session.

A store writes a session only while it holds the session's lease (every write checks it in
the same statement or transaction: fencing). The lease is this process's
(:class:`~tether.store.LeaseOwner`); on this host it lasts as long as the process, on another
host until ``lease_ttl`` seconds past its last ``renew()``. A free lease is taken by the first
writer; a dead owner's is taken over by ``acquire`` (exactly one of several takers wins).

Whenever a lease changes hands the session's log may have grown behind this store's back, so
the store's cached next seq of that session is forgotten (``next_seq``).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ._lease import LeaseOwner, session_busy
from ._rules import session_not_found

__all__ = ("SQLiteLeases", "session_exists")

_LEASE_COLUMNS = "host, pid, started, token, expires_at"
#: Gives one session's lease back, if this store holds it (one statement, refuses nothing).
RELEASE = "DELETE FROM leases WHERE session_id = ? AND token = ?"


def session_exists(db: sqlite3.Connection, session_id: str) -> bool:
    row = db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return row is not None


class SQLiteLeases:
    """The leases one store takes, holds and gives back in its file (``store.leases``).

    The methods run inside the caller's statement or transaction (the store's retry loop
    wraps them); ``next_seq`` is the store's cache of each session's next seq, which a lease
    changing hands makes stale.
    """

    __slots__ = ("_db", "_next_seq", "owner", "path", "taken", "ttl")

    def __init__(
        self,
        db: sqlite3.Connection,
        owner: LeaseOwner,
        *,
        ttl: float,
        path: Path,
        next_seq: dict[str, int],
    ) -> None:
        self._db = db
        self.owner = owner
        self.ttl = ttl
        self.path = path
        self._next_seq = next_seq
        # Whether this store ever took a lease: if not, renew and drop need no write lock.
        self.taken = False

    def get(self, session_id: str) -> tuple[LeaseOwner, float] | None:
        """The holder of ``session_id``'s lease and when it expires, or ``None`` if free."""
        row = self._db.execute(
            f"SELECT {_LEASE_COLUMNS} FROM leases WHERE session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            return None
        host, pid, started, token, expires_at = row
        return LeaseOwner(host=host, pid=pid, started=started, token=token), expires_at

    def get_or_missing(self, session_id: str) -> tuple[LeaseOwner, float] | None:
        """:meth:`get`, with ``SESSION_NOT_FOUND`` for a session that does not exist."""
        lease = self.get(session_id)
        if lease is None and not session_exists(self._db, session_id):
            raise session_not_found(session_id)
        return lease

    def holds(self, session_id: str) -> bool:
        """Whether this store holds ``session_id``'s lease."""
        row = self._db.execute(
            "SELECT 1 FROM leases WHERE session_id = ? AND token = ?",
            (session_id, self.owner.token),
        ).fetchone()
        return row is not None

    def insert(self, session_id: str) -> None:
        """Take the lease of a session that has none (a new one, in its ``create``)."""
        owner = self.owner
        self._db.execute(
            f"INSERT INTO leases (session_id, {_LEASE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (session_id, owner.host, owner.pid, owner.started, owner.token, self._expiry()),
        )
        # Once a lease row may exist (a file that refused the write holds none to drop).
        self.taken = True

    def claim(self, session_id: str) -> None:
        """Inside a transaction: make sure this store holds the lease before it writes. A free
        lease is taken; another owner's (even a dead one's) is ``SESSION_BUSY``."""
        lease = self.get(session_id)
        if lease is None:
            if not session_exists(self._db, session_id):
                raise session_not_found(session_id)
            self.insert(session_id)
            self._next_seq.pop(session_id, None)  # others may have written while it was free
            return
        holder, expires_at = lease
        if holder.token != self.owner.token:
            raise session_busy(session_id, holder, alive=holder.alive(expires_at), file=self.path)

    def take_over(self, session_id: str) -> bool:
        """Inside a transaction: the lease of ``session_id``, free or a dead owner's; whether
        a dead owner's was taken over. A live owner's is ``SESSION_BUSY``."""
        lease = self.get(session_id)
        if lease is None or lease[0].token == self.owner.token:
            self.claim(session_id)  # a free lease is taken with a fresh expiry
            return False
        holder, expires_at = lease
        if holder.alive(expires_at):
            raise session_busy(session_id, holder, alive=True, file=self.path)
        # Conditional on the dead owner's token: of several takers, exactly one wins.
        me = self.owner
        taken = self._db.execute(
            "UPDATE leases SET host = ?, pid = ?, started = ?, token = ?, expires_at = ? "
            "WHERE session_id = ? AND token = ?",
            (me.host, me.pid, me.started, me.token, self._expiry(), session_id, holder.token),
        ).rowcount
        self.taken = True
        if taken != 1:  # not reachable under the write lock; kept for stores without one
            raise session_busy(session_id, holder, alive=True, file=self.path)
        self._next_seq.pop(session_id, None)  # the dead owner may have written last
        return True

    def release(self, session_id: str) -> None:
        """Give ``session_id``'s lease back (nothing if this store does not hold it)."""
        self._db.execute(RELEASE, (session_id, self.owner.token))
        self._next_seq.pop(session_id, None)  # once released, others may write

    def renew(self) -> None:
        """Push the expiry of every lease this store holds ``ttl`` seconds past now."""
        self._db.execute(
            "UPDATE leases SET expires_at = ? WHERE token = ?", (self._expiry(), self.owner.token)
        )

    def drop(self) -> None:
        """Give every lease this store holds back (closing)."""
        if self.taken:
            self._db.execute("DELETE FROM leases WHERE token = ?", (self.owner.token,))

    def _expiry(self) -> float:
        return time.time() + self.ttl
