"""The budget ledger's rules, apart from any database: what each ``BudgetLedger`` call does to
one holder's row and claims (``budget_ledger`` and ``budget_claims`` in the durable stores).

A store reads the holder's row and claims under its write lock (SQLite: ``BEGIN IMMEDIATE``;
PostgreSQL: the row ``FOR UPDATE``), hands them to a :class:`HolderLedger`, calls one of its
methods and writes back what :meth:`HolderLedger.changes` says, in the same transaction.

Decisions the protocol leaves to the store (docs/sessions.md, "Budget ledger"):

* **Going exclusive** (``budget_claim`` of the last live claimant, or ``budget_reserve`` once
  the others are gone): the answer's ``spent`` is the *settled* spend only, and this owner's
  reservation in the store is dropped. Its requests still in flight stay its own to count in
  memory (it knows them: it reserved them), and their actual spend goes into its memory when
  they finish, not into the store. Counting them in ``spent`` too would count them twice.
* **An unknown row among live sharers** (the exclusive owner died before it shared, so the
  ledger forgot the spend, and other live owners still share the holder): ``budget_reserve``
  refuses with ``waiting=False`` and ``claim=LedgerClaim(exclusive=False, spent=None, ...)``,
  its ``used`` the live owners' reservations alone. The caller counts the spend from the logs
  and writes it with ``budget_share(holder, counted, its_reservations)``, which on a shared
  claim only sets the settled spend, then reserves again. While the row is unknown, a settle
  takes the reservation off but adds no actual spend (the request's answer is in its log
  before it settles, so the recount has it).
* **Closing with an exclusive claim** (``aclose`` without ``budget_release``): what that owner
  counted in memory is lost, so the row becomes unknown, as if it had died.
* **Releasing** with ``spent`` writes it only when this owner's claim is still exclusive (a
  claim other stores dropped, taking this owner for dead, must not overwrite their count).
* A reservation never goes below zero in any kind (a settle of more than was reserved).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

from ..contracts import Budget, LedgerClaim, LedgerReserve, Spend, within
from ._lease import LeaseOwner

__all__ = ("ClaimRow", "HolderLedger", "dump_spend", "load_spend")

_NOTHING = Spend()


def dump_spend(spend: Spend) -> str:
    """A ``Spend`` as the stores keep it: compact JSON of its non-zero kinds."""
    return json.dumps(spend.as_data(), separators=(",", ":"))


def load_spend(text: str | None) -> Spend:
    """The ``Spend`` :func:`dump_spend` wrote (``None`` or unreadable text: nothing)."""
    if not text:
        return _NOTHING
    try:
        data = json.loads(text)
    except ValueError:
        return _NOTHING
    return Spend.from_data(data) if isinstance(data, dict) else _NOTHING  # pyright: ignore[reportUnknownArgumentType]


def _floor(spend: Spend) -> Spend:
    """``spend`` with every negative kind raised to zero."""
    values = {f.name: max(getattr(spend, f.name), 0) for f in fields(spend)}
    return Spend(**values)


@dataclass(slots=True)
class ClaimRow:
    """One owner's claim on a holder."""

    owner: LeaseOwner
    expires_at: float
    exclusive: bool
    reserved: Spend = _NOTHING


@dataclass(slots=True)
class HolderLedger:
    """One holder's row and claims as read under the write lock, changed by one call.

    ``spent`` is the row's settled spend, ``None`` when unknown (no row yet, or forgotten);
    ``now`` is the clock leases are judged by (the server's, for PostgreSQL); ``ttl`` the
    store's lease TTL: this owner's claim, when written, expires ``ttl`` seconds from ``now``.
    """

    holder: str
    me: LeaseOwner
    spent: Spend | None
    claims: dict[str, ClaimRow]
    now: float
    ttl: float
    #: Tokens of the claims to delete (dead owners', or this owner's on release).
    dropped: list[str] = field(default_factory=lambda: [])
    #: Whether the row (``spent``) changed.
    row_changed: bool = False

    # -- reading ----------------------------------------------------------------------------

    @property
    def mine(self) -> ClaimRow | None:
        return self.claims.get(self.me.token)

    def _others(self) -> list[ClaimRow]:
        return [c for token, c in self.claims.items() if token != self.me.token]

    def _forget(self) -> None:
        if self.spent is not None:
            self.spent = None
            self.row_changed = True

    def _set_spent(self, spent: Spend) -> None:
        if self.spent != spent:
            self.spent = spent
            self.row_changed = True

    def prune(self) -> None:
        """Drop the claims of dead owners; a dead exclusive one takes the spend it counted in
        memory with it: the row becomes unknown."""
        for token, claim in list(self.claims.items()):
            if token == self.me.token or claim.owner.alive(claim.expires_at, now=self.now):
                continue
            del self.claims[token]
            self.dropped.append(token)
            if claim.exclusive:
                self._forget()

    def _own(self) -> ClaimRow:
        """This owner's claim (a new, shared one if it has none); its expiry pushed forward."""
        mine = self.mine
        if mine is None:
            mine = self.claims[self.me.token] = ClaimRow(self.me, 0.0, exclusive=False)
        mine.expires_at = self.now + self.ttl
        return mine

    def _exclusive(self, mine: ClaimRow) -> LedgerClaim:
        """Hand the holder to this owner alone: its reservation leaves the store (see the
        module's notes)."""
        mine.exclusive = True
        mine.reserved = _NOTHING
        return LedgerClaim(exclusive=True, spent=self.spent, valid_for=self.ttl)

    # -- the calls --------------------------------------------------------------------------

    def claim(self) -> LedgerClaim:
        self.prune()
        mine = self._own()
        if not self._others():
            return self._exclusive(mine)
        # Still exclusive if it was (a second claimant since): it shares when it sees that.
        return LedgerClaim(exclusive=mine.exclusive, spent=self.spent, valid_for=self.ttl)

    def share(self, spent: Spend, reserved: Spend) -> None:
        mine = self._own()
        mine.exclusive = False
        mine.reserved = _floor(reserved)
        self._set_spent(spent)

    def reserve(
        self, need: Spend, budget: Budget, settle: tuple[Spend, Spend] | None
    ) -> LedgerReserve:
        self.prune()
        mine = self._own()
        if settle is not None:
            reserved, actual = settle
            mine.reserved = _floor(mine.reserved - reserved)
            if self.spent is not None and actual != _NOTHING:
                self._set_spent(self.spent + actual)
        others = self._others()
        if not others:
            held = mine.reserved
            claim = self._exclusive(mine)
            return LedgerReserve(granted=True, used=(self.spent or _NOTHING) + held, claim=claim)
        theirs = sum((c.reserved for c in others), _NOTHING)
        if any(c.exclusive for c in self.claims.values()):
            # An owner counts in memory and has not shared yet (this one too, if it reserves
            # before sharing: its budget_contended lists the holder, and it shares then).
            used = (self.spent or _NOTHING) + mine.reserved + theirs
            return LedgerReserve(granted=False, used=used, waiting=True)
        if self.spent is None:
            recount = LedgerClaim(exclusive=False, spent=None, valid_for=self.ttl)
            return LedgerReserve(granted=False, used=mine.reserved + theirs, claim=recount)
        settled = self.spent + mine.reserved
        used = settled + theirs
        if within(budget, used, need) is None:
            mine.reserved = mine.reserved + need
            return LedgerReserve(granted=True, used=used + need)
        waiting = theirs != _NOTHING and within(budget, settled, need) is None
        return LedgerReserve(granted=False, used=used, waiting=waiting)

    def release(self, spent: Spend | None) -> None:
        mine = self.claims.pop(self.me.token, None)
        if mine is None:
            return
        self.dropped.append(self.me.token)
        if spent is not None and mine.exclusive:
            self._set_spent(spent)

    # -- writing ----------------------------------------------------------------------------

    def changes(self) -> tuple[list[str], ClaimRow | None, Spend | None, bool]:
        """What to write: the claims to delete, this owner's claim to upsert (``None``: none
        left), the row's spend (``None``: unknown) and whether the row changed."""
        return self.dropped, self.mine, self.spent, self.row_changed
