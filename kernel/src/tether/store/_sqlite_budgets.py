"""The budget ledger of a SQLite store: the ``budget_ledger`` and ``budget_claims`` tables.

One row per budget holder (its settled spend, or NULL when unknown) and one claim per owner
spending under it (the owner as a lease names it, the claim's expiry, whether it is exclusive,
what its requests in flight reserved). Each call is one ``BEGIN IMMEDIATE`` transaction: it
reads the holder under the write lock, applies the rules of ``_ledger.HolderLedger`` and
writes the changes back. A claim's expiry follows the owner's lease renewals (``renew``).

Budget writes are not made durable against a power loss one by one: the truth is in the
sessions' logs, and a ledger that lost its last writes is at worst stale, which the next
claimant corrects by counting from the logs. A store opened with ``synchronous="FULL"``
therefore runs its ledger transactions at ``NORMAL`` (the next ``FULL`` commit, or the WAL
checkpoint, makes them durable with it).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from ..contracts import Budget, LedgerClaim, LedgerReserve, Spend
from ._lease import LeaseOwner
from ._ledger import ClaimRow, HolderLedger, dump_spend, load_spend
from ._sqlite_locks import Transaction

__all__ = ("SQLiteLedger",)

T = TypeVar("T")

_CONTENDED = (
    "SELECT c.holder, o.host, o.pid, o.started, o.token, o.expires_at "
    "FROM budget_claims AS c JOIN budget_claims AS o ON o.holder = c.holder AND o.token <> c.token "
    "WHERE c.token = ? AND c.exclusive = 1"
)


class SQLiteLedger:
    """The budget claims one store makes in its file (``store.ledger``); each method is one
    transaction (the store's retry loop wraps it)."""

    __slots__ = ("_db", "claimed", "owner", "relaxed", "ttl")

    def __init__(
        self, db: sqlite3.Connection, owner: LeaseOwner, *, ttl: float, relaxed: bool
    ) -> None:
        self._db = db
        self.owner = owner
        self.ttl = ttl
        # The connection commits at FULL: ledger transactions switch to NORMAL for themselves.
        self.relaxed = relaxed
        # Whether this store ever wrote a claim: if not, renew, drop and contended touch nothing.
        self.claimed = False

    # -- the calls ----------------------------------------------------------------------------

    def claim(self, holder: str) -> LedgerClaim:
        return self._change(holder, lambda ledger: ledger.claim())

    def share(self, holder: str, spent: Spend, reserved: Spend) -> None:
        self._change(holder, lambda ledger: ledger.share(spent, reserved))

    def reserve(
        self, holder: str, need: Spend, budget: Budget, settle: tuple[Spend, Spend] | None
    ) -> LedgerReserve:
        return self._change(holder, lambda ledger: ledger.reserve(need, budget, settle))

    def release(self, holder: str, spent: Spend | None) -> None:
        if self.claimed:
            self._change(holder, lambda ledger: ledger.release(spent))

    def contended(self) -> tuple[list[str], float]:
        """A read: the holders this owner claims exclusively that another live owner claims
        too, and the seconds its claims stay valid (its earliest expiry from now)."""
        if not self.claimed:
            return [], self.ttl
        now = time.time()
        token = self.owner.token
        holders: list[str] = []
        for holder, host, pid, started, other, expires_at in self._db.execute(
            _CONTENDED, (token,)
        ).fetchall():
            owner = LeaseOwner(host=host, pid=pid, started=started, token=other)
            if holder not in holders and owner.alive(expires_at, now=now):
                holders.append(holder)
        (earliest,) = self._db.execute(
            "SELECT min(expires_at) FROM budget_claims WHERE token = ?", (token,)
        ).fetchone()
        return holders, self.ttl if earliest is None else max(earliest - now, 0.0)

    def renew(self) -> None:
        """Push the expiry of every claim this owner holds ``ttl`` seconds past now (inside
        the caller's statement or transaction)."""
        self._db.execute(
            "UPDATE budget_claims SET expires_at = ? WHERE token = ?",
            (time.time() + self.ttl, self.owner.token),
        )

    def drop(self) -> None:
        """Give every claim back (closing, inside the caller's transaction): what an exclusive
        claim counted in memory was not written, so its holder's spend becomes unknown."""
        self._db.execute(
            "UPDATE budget_ledger SET spent = NULL, known = 0 WHERE holder IN "
            "(SELECT holder FROM budget_claims WHERE token = ? AND exclusive = 1)",
            (self.owner.token,),
        )
        self._db.execute("DELETE FROM budget_claims WHERE token = ?", (self.owner.token,))

    # -- reading and writing a holder ------------------------------------------------------

    def _change(self, holder: str, call: Callable[[HolderLedger], T]) -> T:
        if not self.relaxed:
            with Transaction(self._db):
                return self._apply(holder, call)
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            with Transaction(self._db):
                return self._apply(holder, call)
        finally:
            self._db.execute("PRAGMA synchronous=FULL")

    def _apply(self, holder: str, call: Callable[[HolderLedger], T]) -> T:
        ledger = self._load(holder)
        answer = call(ledger)
        self._save(ledger)
        return answer

    def _load(self, holder: str) -> HolderLedger:
        db = self._db
        row = db.execute(
            "SELECT spent, known FROM budget_ledger WHERE holder = ?", (holder,)
        ).fetchone()
        spent = load_spend(row[0]) if row is not None and row[1] else None
        claims: dict[str, ClaimRow] = {}
        for token, host, pid, started, expires_at, exclusive, reserved in db.execute(
            "SELECT token, host, pid, started, expires_at, exclusive, reserved "
            "FROM budget_claims WHERE holder = ?",
            (holder,),
        ).fetchall():
            owner = LeaseOwner(host=host, pid=pid, started=started, token=token)
            claims[token] = ClaimRow(owner, expires_at, bool(exclusive), load_spend(reserved))
        return HolderLedger(holder, self.owner, spent, claims, now=time.time(), ttl=self.ttl)

    def _save(self, ledger: HolderLedger) -> None:
        db = self._db
        dropped, mine, spent, row_changed = ledger.changes()
        if dropped:
            db.executemany(
                "DELETE FROM budget_claims WHERE holder = ? AND token = ?",
                [(ledger.holder, token) for token in dropped],
            )
        if mine is not None:
            me = self.owner
            db.execute(
                "INSERT INTO budget_claims (holder, token, host, pid, started, expires_at, "
                "exclusive, reserved) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (holder, token) DO UPDATE SET expires_at = excluded.expires_at, "
                "exclusive = excluded.exclusive, reserved = excluded.reserved",
                (
                    ledger.holder,
                    me.token,
                    me.host,
                    me.pid,
                    me.started,
                    mine.expires_at,
                    int(mine.exclusive),
                    dump_spend(mine.reserved),
                ),
            )
            self.claimed = True
        if row_changed:
            db.execute(
                "INSERT INTO budget_ledger (holder, spent, known) VALUES (?, ?, ?) "
                "ON CONFLICT (holder) DO UPDATE SET spent = excluded.spent, known = excluded.known",
                (
                    ledger.holder,
                    None if spent is None else dump_spend(spent),
                    int(spent is not None),
                ),
            )
