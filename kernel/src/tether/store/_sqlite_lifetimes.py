"""How sessions of a SQLite store end (``SessionLifecycle``): closing a session with its
lifetime tree, deleting one or its whole tree, each in one transaction of the store."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..contracts import SessionRemoval
from ._lease import session_busy
from ._lifecycle import held_open, session_closed
from ._rules import session_not_found
from ._sqlite_leases import SQLiteLeases, session_exists
from ._sqlite_locks import Transaction

__all__ = ("SESSION_ROWS", "SQLiteLifetimes")

#: What deleting a session removes, children before the session row they refer to.
SESSION_ROWS = (
    ("events", "session_id"),
    ("mailbox", "session_id"),
    ("leases", "session_id"),
    ("budget_claims", "holder"),
    ("budget_ledger", "holder"),
    ("sessions", "id"),
)
#: A session's lifetime tree: it, and every session below it through children not started
#: detached, the session first; each once (UNION), even in a damaged file's cycle.
_LIFETIME = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM sessions WHERE id = ? UNION "
    "SELECT s.id FROM sessions AS s JOIN tree ON s.parent_session = tree.id WHERE NOT s.detached) "
    "SELECT id FROM tree"
)
#: Every session below one, detached or not, the session first.
_SUBTREE = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM sessions WHERE id = ? UNION "
    "SELECT s.id FROM sessions AS s JOIN tree ON s.parent_session = tree.id) SELECT id FROM tree"
)


class SQLiteLifetimes:
    """Closing and deleting the sessions of one store's file (``store.lifetimes``); each
    method is one statement or transaction, run by the store's retry loop."""

    __slots__ = ("_db", "leases", "path")

    def __init__(self, db: sqlite3.Connection, leases: SQLiteLeases, *, path: Path) -> None:
        self._db = db
        self.leases = leases
        self.path = path

    def check_open(self, session_id: str) -> None:
        """``SESSION_CLOSED`` if the session is closed (``SESSION_NOT_FOUND`` if absent)."""
        row = self._db.execute(
            "SELECT closed_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise session_not_found(session_id)
        if row[0] is not None:
            raise session_closed(session_id, row[0], file=self.path)

    def close(self, session_id: str, at: float) -> tuple[str, ...]:
        """Close the lifetime tree of ``session_id``: those closed now, the session first."""
        with Transaction(self._db):  # every session of the tree closed, its mail dropped, or none
            if not session_exists(self._db, session_id):
                raise session_not_found(session_id)
            return self._close_open(self._ids(_LIFETIME, session_id), at)

    def delete(self, session_id: str, at: float, tree: bool) -> SessionRemoval:
        """Delete ``session_id`` (with ``tree``, all below it too) and close the rest of its
        lifetime tree."""
        with Transaction(self._db):  # the whole removal, or nothing of it
            if not session_exists(self._db, session_id):
                raise session_not_found(session_id)
            doomed = self._ids(_SUBTREE, session_id) if tree else [session_id]
            for sid in doomed:
                self._refuse_held_open(sid)
            gone = set(doomed)
            lifetime = [sid for sid in self._ids(_LIFETIME, session_id) if sid not in gone]
            closed = self._close_open(lifetime, at)
            for table, column in SESSION_ROWS:
                self._db.executemany(
                    f"DELETE FROM {table} WHERE {column} = ?", [(sid,) for sid in doomed]
                )
        return SessionRemoval(deleted=tuple(doomed), closed=closed)

    def roll_back(self, session_id: str) -> None:
        """``SessionStore.delete``: remove one session whose start is undone, leaving the
        sessions below it as they are."""
        with Transaction(self._db):
            if not session_exists(self._db, session_id):
                raise session_not_found(session_id)
            lease = self.leases.get(session_id)
            if lease is not None and lease[0].token != self.leases.owner.token:
                holder, expires_at = lease
                if holder.alive(expires_at):  # a dead owner's session may be rolled back
                    raise session_busy(session_id, holder, alive=True, file=self.path)
            for table, column in SESSION_ROWS:
                self._db.execute(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))

    def _ids(self, query: str, session_id: str) -> list[str]:
        return [sid for (sid,) in self._db.execute(query, (session_id,)).fetchall()]

    def _close_open(self, ids: Sequence[str], at: float) -> tuple[str, ...]:
        """Inside a transaction: close those of ``ids`` still open and drop their mail."""
        closed = tuple(
            sid
            for sid in ids
            if self._db.execute(
                "UPDATE sessions SET closed_at = ? WHERE id = ? AND closed_at IS NULL", (at, sid)
            ).rowcount
        )
        self._db.executemany("DELETE FROM mailbox WHERE session_id = ?", [(s,) for s in closed])
        return closed

    def _refuse_held_open(self, session_id: str) -> None:
        """``SESSION_BUSY`` if another live process holds ``session_id`` and it is open."""
        lease = self.leases.get(session_id)
        if lease is None or lease[0].token == self.leases.owner.token:
            return
        holder, expires_at = lease
        if not holder.alive(expires_at):
            return
        (closed_at,) = self._db.execute(
            "SELECT closed_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if closed_at is None:
            raise held_open(session_id, holder, file=self.path)
