"""The mailbox of a SQLite store: messages other processes post to a session's driver.

A process that does not hold a session's lease cannot write its log; it posts the message to
the ``mailbox`` table instead, and the holder takes it into the log (``take_mail``: into the
log and out of the mailbox in one transaction, or neither).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pydantic import ValidationError

from ..errors import ErrorCode, StoreError
from ._events import InboxAccepted, dump_event
from ._rules import session_not_found
from ._sqlite_leases import session_exists

__all__ = ("SQLiteMailbox", "validation_reason")


class SQLiteMailbox:
    """The ``mailbox`` table of one store's file (``store.mailbox_table``); each method runs
    as (or inside) one statement or transaction of the store."""

    __slots__ = ("_db", "path")

    def __init__(self, db: sqlite3.Connection, *, path: Path) -> None:
        self._db = db
        self.path = path

    def post(self, session_id: str, message: InboxAccepted) -> bool:
        """Leave ``message`` for ``session_id``'s driver; ``False`` if there is no such
        session or it is closed (nothing was posted)."""
        row = (session_id, message.message_id, dump_event(message), session_id)
        posted = self._db.execute(
            "INSERT INTO mailbox (session_id, message_id, data) SELECT ?, ?, ? "
            "WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ? AND closed_at IS NULL)",
            row,
        ).rowcount
        return posted == 1

    def waiting(self) -> list[str]:
        """The sessions with mail, the one with the oldest message first."""
        rows = self._db.execute(
            "SELECT session_id FROM mailbox GROUP BY session_id ORDER BY min(id)"
        ).fetchall()
        return [session_id for (session_id,) in rows]

    def rows(self, session_id: str) -> list[tuple[int, str]]:
        """``(id, data)`` of each message waiting for ``session_id``, oldest first."""
        rows = self._db.execute(
            "SELECT id, data FROM mailbox WHERE session_id = ? ORDER BY id", (session_id,)
        ).fetchall()
        if not rows and not session_exists(self._db, session_id):
            raise session_not_found(session_id)
        return rows

    def has_mail(self, session_id: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM mailbox WHERE session_id = ? LIMIT 1", (session_id,)
        ).fetchone()
        return row is not None

    def remove(self, session_id: str, last: int) -> None:
        """Remove ``session_id``'s messages up to row ``last`` (taken into its log)."""
        self._db.execute("DELETE FROM mailbox WHERE session_id = ? AND id <= ?", (session_id, last))

    def parse(self, session_id: str, data: str) -> InboxAccepted:
        try:
            return InboxAccepted.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(
                ErrorCode.SESSION_CORRUPT,
                f'a message posted to session "{session_id}" cannot be read: '
                f"{validation_reason(exc)}",
                file=self.path,
                remedy="the mailbox was written by another program or a newer tether; delete "
                "the row from the mailbox table or restore the file from a backup (nothing "
                "was taken)",
            ) from exc


def validation_reason(exc: ValidationError) -> str:
    detail = exc.errors()[0]
    return f"{detail['msg']} at {'.'.join(str(p) for p in detail['loc']) or 'top'}"
