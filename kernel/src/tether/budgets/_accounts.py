"""Counting budgets in one process: an account per budget holder, charges before each model
request and child start, settling after (docs/budgets.md, "How a budget is counted").

Every store object has its :class:`Accounts`: one :class:`Account` per budget holder that a
session open here spends under, shared by all of them. An agent's *chain* is the accounts of
every holder above it (its own last, when it holds one); a request is charged to all of them at
once, or to none.

An account is **exclusive** while this process is the only one spending under its holder (always,
on a store without a :class:`~tether.budgets.BudgetLedger`): it is counted in memory, a charge is
a few additions. Once another process claims the holder, the keeper of this store sees it
(:meth:`Accounts.poll`) and the account **shares**: from then on each charge and each settle is
one store transaction, until this process is alone again.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal

import anyio

from ..contracts import (
    LIMIT_KINDS,
    Budget,
    BudgetLedger,
    DescriptorEvent,
    LedgerClaim,
    LedgerReserve,
    LimitKind,
    Price,
    SessionStore,
    Spend,
    format_amount,
    within,
)
from ..errors import BudgetError, ErrorCode
from ..ground import implements
from ._counting import count_tree
from ._records import BUDGET_DESCRIPTOR, BUDGET_EXCEEDED_DESCRIPTOR, BUDGET_WARNING_DESCRIPTOR

__all__ = (
    "ANCESTRY_TTL",
    "FIELDS",
    "NOTHING",
    "ONE_CHILD",
    "WIDTH",
    "Account",
    "Accounts",
    "Charge",
    "Overrun",
    "Vector",
    "budget_descriptor",
    "charge",
    "charge_now",
    "read_descriptor",
    "remainder",
    "settle",
    "settle_now",
    "spend_vector",
    "start_child_now",
    "unstart_child",
    "warning_descriptor",
    "warning_text",
    "warnings",
)

_NOTHING = Spend()
#: The fields of :class:`Spend`, in order: what the fast path's counters hold.
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Spend))
WIDTH = len(FIELDS)
_INDEX: dict[str, int] = {name: index for index, name in enumerate(FIELDS)}
_COUNTING: tuple[LimitKind, ...] = ("input_tokens", "output_tokens", "cost", "requests", "children")
_CHILDREN = FIELDS.index("children")
_KINDS: dict[int, LimitKind] = {_INDEX[kind]: kind for kind in _COUNTING}
_WHOLE = frozenset(i for i, name in enumerate(FIELDS) if name != "cost")
#: A vector of nothing, and of one child started.
NOTHING: tuple[float, ...] = (0.0,) * WIDTH
ONE_CHILD: tuple[float, ...] = tuple(1.0 if name == "children" else 0.0 for name in FIELDS)
Vector = tuple[float, ...]


def _vector(spend: Spend) -> list[float]:
    return [float(getattr(spend, name)) for name in FIELDS]


def _spend(vector: Sequence[float]) -> Spend:
    return Spend(
        *(value if index not in _WHOLE else round(value) for index, value in enumerate(vector))  # type: ignore[arg-type]
    )


def spend_vector(usage_in: int, usage_out: int, cached: int, cost: float, unpriced: int) -> Vector:
    """One answer's spend as the fast path counts it (one request)."""
    return (usage_in, usage_out, cached, cost, unpriced, 1.0, 0.0)


#: How long a charge that waits on other processes' reservations sleeps between asks.
_SHARED_WAIT = 0.05
#: How often (seconds) the keeper asks the store whether another process wants a holder.
POLL_EVERY = 0.25
#: How long (seconds) what a log above a child says of budgets is trusted without reading it
#: again (children started in a burst on a cluster worker read their ancestors once).
ANCESTRY_TTL = 10.0


@dataclass(slots=True, eq=False)
class Account:
    """One budget holder, as this process counts it."""

    holder: str
    """The session the budget is set on."""
    key: str
    """The holder and the budget's start: what the ledger keys it by (a new budget on the
    same session is a new account)."""
    budget: Budget
    started: float
    """When the budget was set (wall clock)."""
    sv: list[float] = field(default_factory=lambda: [0.0] * WIDTH)
    """What was settled since the budget was set (while shared: as the store last said), by
    :data:`FIELDS` (the fast path counts in these, not in :class:`Spend` values)."""
    hv: list[float] = field(default_factory=lambda: [0.0] * WIDTH)
    """What this process's requests in flight reserved, by :data:`FIELDS`."""
    live: int = 0
    """Children working under the holder in this process."""
    warned: set[str] = field(default_factory=lambda: set[str]())
    """The limits whose warning share was passed (the notice is read once)."""
    ledger: BudgetLedger | None = None
    exclusive: bool = True
    valid_until: float = math.inf
    """Monotonic time until which an exclusive account may trust its memory."""
    users: int = 0
    """Agents of this process whose chain holds it."""
    sharing: anyio.Event | None = None
    """Set while the account changes from exclusive to shared: store calls wait for it."""
    settled: anyio.Event | None = None
    """Set (and replaced) whenever a charge settles: a waiting charge looks again."""
    base: Spend = field(default_factory=Spend)
    """The subtree's spend when the budget was set (its record's ``base``)."""
    recount: Callable[[], Awaitable[Spend]] | None = None
    """Counts the holder's spend from the logs (when the ledger lost it)."""

    deadline: float | None = None
    """The wall-clock time its wall-time limit passes, if it has one."""
    checks: tuple[tuple[int, float], ...] = ()
    """``(index, limit)`` of each counting limit it sets (index into :data:`FIELDS`)."""
    pending: list[tuple[int, float, LimitKind]] = field(
        default_factory=lambda: list[tuple[int, float, LimitKind]]()
    )
    """``(index, threshold, kind)`` of the limits not warned about yet (their share passed
    at ``threshold``)."""

    def __post_init__(self) -> None:
        budget = self.budget
        wall = budget.wall_seconds
        self.deadline = None if wall is None else self.started + wall
        self.checks = tuple(
            (_INDEX[kind], limit) for kind in _COUNTING if (limit := budget.limit(kind)) is not None
        )
        self.pending = [
            (index, limit * budget.warn_at, _KINDS[index]) for index, limit in self.checks
        ]

    @property
    def spent(self) -> Spend:
        """Settled since the budget was set (while shared: as the store last said)."""
        return _spend(self.sv)

    @spent.setter
    def spent(self, value: Spend) -> None:
        self.sv = _vector(value)

    @property
    def inflight(self) -> Spend:
        """Reserved by this process's requests in flight."""
        return _spend(self.hv)

    @inflight.setter
    def inflight(self, value: Spend) -> None:
        self.hv = _vector(value)

    def used(self, kind: LimitKind) -> float:
        """What counts against ``kind`` now (settled, in flight, elapsed, live)."""
        if kind == "wall_seconds":
            return max(time.time() - self.started, 0.0)
        if kind == "live_children":
            return self.live
        index = _INDEX[kind]
        return self.sv[index] + self.hv[index]

    def left(self, kind: LimitKind) -> float | None:
        """What is left of ``kind`` (``None``: no limit)."""
        limit = self.budget.limit(kind)
        return None if limit is None else max(limit - self.used(kind), 0)

    def woken(self) -> None:
        event, self.settled = self.settled, None
        if event is not None:
            event.set()


@dataclass(frozen=True, slots=True)
class Overrun:
    """A request or a child start that a budget refused: which limit of which holder."""

    holder: str
    limit: LimitKind
    allowed: float
    used: float
    need: float

    def error(self) -> BudgetError:
        """The error a turn ends with and a parent reads (``BUDGET_EXCEEDED``)."""
        used = format_amount(self.limit, self.used)
        allowed = format_amount(self.limit, self.allowed)
        if self.limit == "wall_seconds":
            what = f"its wall time ran out: {used} of {allowed}"
        elif self.limit == "live_children":
            what = f"{used} of {allowed} children are working already"
        elif self.limit in ("input_tokens", "output_tokens"):
            label = self.limit.replace("_", " ")
            what = (
                f"{label}: {int(self.used):,} of {int(self.allowed):,} used, and this needs "
                f"{int(self.need):,} more"
            )
        else:
            more = format_amount(self.limit, self.need)
            what = f"{self.limit}: {used} of {allowed} used, and this needs {more} more"
        return BudgetError(
            ErrorCode.BUDGET_EXCEEDED,
            f"budget exceeded: the budget set on session {self.holder} stops this ({what})",
            remedy="nothing more can be spent under it: answer with what you have, or ask "
            "for a larger budget",
        )

    def descriptor(self) -> DescriptorEvent:
        """The ``budget-exceeded`` record the refused session's log keeps."""
        return DescriptorEvent(
            kind=BUDGET_EXCEEDED_DESCRIPTOR,
            data={
                "holder": self.holder,
                "limit": self.limit,
                "allowed": self.allowed,
                "used": self.used,
                "need": self.need,
            },
        )


@dataclass(slots=True, eq=False)
class Charge:
    """What one request (or child start) reserved of each account of its chain."""

    accounts: tuple[Account, ...]
    need: Vector
    """By :data:`FIELDS`."""


class Accounts:
    """The accounts of one store object (one process's view of its budget holders)."""

    __slots__ = ("__weakref__", "above", "by_key", "chains", "live", "store")

    _of: weakref.WeakKeyDictionary[object, Accounts] = weakref.WeakKeyDictionary()
    _by_id: dict[int, Accounts] = {}

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.by_key: dict[str, Account] = {}
        self.chains: dict[str, tuple[Account, ...]] = {}
        """The chain of each session open here that spends under a budget."""
        self.live: dict[str, tuple[Account, ...]] = {}
        """Children counted as working, by session id: the accounts they count in."""
        self.above: dict[str, tuple[float, str | None, DescriptorEvent | None]] = {}
        """What the store said of a session above a child driven here whose parent is driven
        elsewhere: when it was read (monotonic), its parent, its last ``budget`` record. Read
        again after :data:`ANCESTRY_TTL` (a budget set on it meanwhile is seen then)."""

    @classmethod
    def of(cls, store: SessionStore) -> Accounts:
        """The accounts of ``store`` (made on first use)."""
        try:
            found = cls._of.get(store)
        except TypeError:  # a store that cannot be weakly referenced
            found = cls._by_id.get(id(store))
            if found is None:
                found = cls._by_id[id(store)] = Accounts(store)
            return found
        if found is None:
            found = cls._of[store] = Accounts(store)
        return found

    @classmethod
    def find(cls, store: SessionStore) -> Accounts | None:
        """The accounts of ``store`` when it has any."""
        try:
            return cls._of.get(store)
        except TypeError:
            return cls._by_id.get(id(store))

    async def open(
        self,
        holder: str,
        budget: Budget,
        started: float,
        base: Spend,
        prices: Mapping[str, Price] | None,
        *,
        new: bool = False,
    ) -> Account:
        """The account of the budget ``holder`` set at ``started`` (opened once per process:
        claimed in the ledger, its spend read from it or counted from the logs). ``new``: the
        budget was set just now on a subtree that spent nothing since (no counting)."""
        key = f"{holder}@{started!r}"
        account = self.by_key.get(key)
        if account is not None:
            account.users += 1
            return account
        store = self.store
        ledger: BudgetLedger | None = None
        if implements(store, BudgetLedger):
            ledger = store
        account = Account(holder, key, budget, started, ledger=ledger, base=base)

        async def recount() -> Spend:
            return await count_tree(self.store, holder, prices, since=started) - base

        account.recount = recount
        spent: Spend | None = Spend() if new else None
        if ledger is not None:
            asked = time.monotonic()
            claim = await ledger.budget_claim(key)
            account.exclusive = claim.exclusive
            account.valid_until = asked + claim.valid_for
            if claim.spent is not None:
                spent = claim.spent
        if spent is None and (account.exclusive or ledger is None):
            spent = await count_tree(self.store, holder, prices, since=started) - base
        account.spent = spent or Spend()
        # A limit whose warning share was passed before (another process, before a crash) is
        # not announced again.
        for kind in LIMIT_KINDS:
            limit = budget.limit(kind)
            if limit and kind != "live_children" and account.used(kind) >= limit * budget.warn_at:
                account.warned.add(kind)
        account.pending = [p for p in account.pending if p[2] not in account.warned]
        existing = self.by_key.get(key)  # opened by another agent while this one counted
        if existing is not None:
            existing.users += 1
            return existing
        account.users = 1
        self.by_key[key] = account
        return account

    async def close(self, account: Account) -> None:
        """One agent fewer uses ``account``; the last one releases its claim."""
        account.users -= 1
        if account.users > 0 or self.by_key.get(account.key) is not account:
            return
        del self.by_key[account.key]
        if account.ledger is not None:
            await _until_shared(account)
            spent = account.spent if account.exclusive else None
            with anyio.CancelScope(shield=True):
                await account.ledger.budget_release(account.key, spent)

    def child_started(self, session_id: str, chain: tuple[Account, ...]) -> None:
        """A child of ``chain``'s session works now (counted in every account of the chain)."""
        if session_id in self.live or not chain:
            return
        self.live[session_id] = chain
        for account in chain:
            account.live += 1

    def child_counted(self, session_id: str, chain: tuple[Account, ...]) -> None:
        """A child whose start was charged to ``chain`` (which counted it as working then:
        concurrent starts see each other) works now; :meth:`child_left` ends that."""
        if chain:
            self.live[session_id] = chain

    def child_left(self, session_id: str, *, counted: bool = True) -> None:
        """A child that worked here left (its agent closed). ``counted=False``: forget it
        without counting it out (:func:`unstart_child` does)."""
        chain = self.live.pop(session_id, ())
        if counted:
            for account in chain:
                account.live -= 1

    @property
    def exclusive_shared(self) -> bool:
        """Whether an account here counts in memory a holder other processes may claim."""
        return any(a.exclusive and a.ledger is not None for a in self.by_key.values())

    async def poll(self) -> None:
        """Share the exclusive accounts another process claimed too, and refresh how long the
        others may trust their memory (the keeper calls this about every quarter second)."""
        accounts = [a for a in self.by_key.values() if a.exclusive and a.ledger is not None]
        if not accounts:
            return
        ledger = accounts[0].ledger
        assert ledger is not None
        asked = time.monotonic()
        contended, valid_for = await ledger.budget_contended()
        for account in accounts:
            account.valid_until = asked + valid_for
        for key in contended:
            account = self.by_key.get(key)
            if account is not None and account.exclusive:
                await _share(account)


async def _share(account: Account) -> None:
    """Hand an exclusive account to the ledger: from now on it is counted there."""
    ledger = account.ledger
    assert ledger is not None
    if account.sharing is not None:
        return
    account.sharing = anyio.Event()
    account.exclusive = False
    try:
        with anyio.CancelScope(shield=True):
            await ledger.budget_share(account.key, account.spent, account.inflight)
    finally:
        done, account.sharing = account.sharing, None
        done.set()


async def _until_shared(account: Account) -> None:
    sharing = account.sharing
    if sharing is not None:
        await sharing.wait()


def charge_now(chain: Sequence[Account], need: Vector) -> Charge | Overrun | None:
    """Charge ``need`` (by :data:`FIELDS`) to every account of ``chain`` in memory, when all
    of them are exclusive and can trust their memory: the charge, or the first limit it would
    pass. ``None``: a store call or a wait is needed (:func:`charge`). The path every request
    and child start under a budget takes: plain arithmetic on lists."""
    now = time.monotonic()
    wall = 0.0
    for account in chain:
        if not account.exclusive or now >= account.valid_until:
            return None
        deadline = account.deadline
        if deadline is not None:
            wall = wall or time.time()
            if wall >= deadline:
                return _late(account, wall)
        spent, held = account.sv, account.hv
        for index, limit in account.checks:
            wanted = need[index]
            if wanted and spent[index] + held[index] + wanted > limit:
                if held[index]:
                    return None  # what is in flight may leave room when it settles: wait
                used = spent[index] + held[index]
                return Overrun(account.holder, _KINDS[index], limit, used, wanted)
        if need[_CHILDREN]:
            live = account.budget.live_children
            if live is not None and account.live >= live:
                return Overrun(account.holder, "live_children", live, account.live, 1)
    for account in chain:
        _plus(account.hv, need)
        if need[_CHILDREN]:
            account.live += 1  # working from its charge (:meth:`Accounts.child_counted`)
    return Charge(chain if isinstance(chain, tuple) else tuple(chain), need)


def start_child_now(chain: Sequence[Account]) -> Overrun | bool:
    """Count one child started under every account of ``chain`` in memory (in all, and
    working: :meth:`Accounts.child_counted` then keeps it until it leaves), when all of them
    are exclusive and can trust their memory: ``True``, or the first limit it would pass.
    ``False``: a store call or a wait is needed (:func:`charge` and :func:`settle` with
    :data:`ONE_CHILD`). A child start is spent at once: nothing is held for it."""
    now = time.monotonic()
    wall = 0.0
    for account in chain:
        if not account.exclusive or now >= account.valid_until:
            return False
        deadline = account.deadline
        if deadline is not None:
            wall = wall or time.time()
            if wall >= deadline:
                return _late(account, wall)
        budget = account.budget
        limit = budget.children
        if limit is not None:
            used = account.sv[_CHILDREN] + account.hv[_CHILDREN]
            if used + 1 > limit:
                return Overrun(account.holder, "children", limit, used, 1)
        live = budget.live_children
        if live is not None and account.live >= live:
            return Overrun(account.holder, "live_children", live, account.live, 1)
    for account in chain:
        account.sv[_CHILDREN] += 1
        account.live += 1
    return True


def unstart_child(chain: Sequence[Account]) -> None:
    """Undo :func:`start_child_now` (the child's session could not be created)."""
    for account in chain:
        account.sv[_CHILDREN] -= 1
        account.live -= 1


def settle_now(done: Charge, actual: Vector) -> bool:
    """Settle ``done`` in memory when every account of its chain is exclusive (the usual);
    ``False``: a store call is needed (:func:`settle`)."""
    accounts = done.accounts
    for account in accounts:
        if not account.exclusive or account.sharing is not None:
            return False
    need = done.need
    for account in accounts:
        _minus(account.hv, need)
        _plus(account.sv, actual)
        if account.settled is not None:
            account.woken()
    return True


def _plus(target: list[float], more: Vector) -> None:
    """``target += more``, field by field: unrolled, as this runs for every request (the
    seven fields of :class:`Spend`, checked when the module loads)."""
    target[0] += more[0]
    target[1] += more[1]
    target[2] += more[2]
    target[3] += more[3]
    target[4] += more[4]
    target[5] += more[5]
    target[6] += more[6]


def _minus(target: list[float], less: Vector) -> None:
    """``target -= less``, field by field (see :func:`_plus`)."""
    target[0] -= less[0]
    target[1] -= less[1]
    target[2] -= less[2]
    target[3] -= less[3]
    target[4] -= less[4]
    target[5] -= less[5]
    target[6] -= less[6]


assert WIDTH == 7, "_plus and _minus add the seven fields of Spend"


def _late(account: Account, wall: float) -> Overrun:
    limit = account.budget.wall_seconds
    assert limit is not None
    return Overrun(account.holder, "wall_seconds", limit, wall - account.started, 0)


async def charge(chain: Sequence[Account], need: Vector) -> Charge | Overrun:
    """Charge ``need`` to every account of ``chain``, or to none: the charge, or the limit it
    would pass. Waits while the only obstacle is what other requests reserved and have not
    settled (here, or in another process)."""
    while True:
        done = charge_now(chain, need)
        if done is not None:
            return done
        taken: list[Account] = []
        outcome: Overrun | Literal["wait"] | None = None
        for account in chain:
            result = await _take(account, need)
            if result is True:
                taken.append(account)
                continue
            outcome = result
            break
        if outcome is None:
            return Charge(tuple(chain), need)
        for account in taken:
            await _give_back(account, need)
        if isinstance(outcome, Overrun):
            return outcome
        await _wait(chain)


def _add(vector: list[float], other: Vector, sign: float = 1.0) -> None:
    for index, value in enumerate(other):
        if value:
            vector[index] += sign * value


async def _take(account: Account, need: Vector) -> Literal[True, "wait"] | Overrun:
    """Reserve ``need`` of one account (a store call when shared)."""
    await _until_shared(account)
    budget = account.budget
    deadline = account.deadline
    if deadline is not None and time.time() >= deadline:
        return _late(account, time.time())
    if not need[_CHILDREN]:
        return await _reserve(account, need)
    if budget.live_children is not None and account.live >= budget.live_children:
        return Overrun(account.holder, "live_children", budget.live_children, account.live, 1)
    # The child counts as working from now: a start charged meanwhile (while this one waits
    # on the store) sees it. Undone when the charge is refused or given back.
    account.live += 1
    taken: Literal[True, "wait"] | Overrun = "wait"
    try:
        taken = await _reserve(account, need)
    finally:
        if taken is not True:
            account.live -= 1
    return taken


async def _reserve(account: Account, need: Vector) -> Literal[True, "wait"] | Overrun:
    """:func:`_take` past the wall-time and live-children checks."""
    budget, ledger = account.budget, account.ledger
    if account.exclusive and ledger is not None and time.monotonic() >= account.valid_until:
        # Not sure the others still count this process alive: ask before trusting memory.
        asked = time.monotonic()
        claim = await ledger.budget_claim(account.key)
        account.valid_until = asked + claim.valid_for
        if not claim.exclusive:
            await _share(account)
    wanted = _spend(need)
    if account.exclusive or ledger is None:
        used = account.spent + account.inflight
        kind = within(budget, used, wanted)
        if kind is None:
            _add(account.hv, need)
            return True
        if account.inflight.amount(kind):
            return "wait"
        limit = budget.limit(kind)
        assert limit is not None
        return Overrun(account.holder, kind, limit, used.amount(kind), wanted.amount(kind))
    answer = await ledger.budget_reserve(account.key, wanted, budget)
    if answer.claim is not None:
        await _claimed(account, answer.claim)
        return await _reserve(account, need)
    if answer.granted:
        _add(account.hv, need)
        account.spent = answer.used - account.inflight
        return True
    if answer.waiting:
        return "wait"
    kind = within(budget, answer.used, wanted) or "output_tokens"
    limit = budget.limit(kind)
    return Overrun(account.holder, kind, limit or 0, answer.used.amount(kind), wanted.amount(kind))


async def _claimed(account: Account, claim: LedgerClaim, unlogged: Spend = _NOTHING) -> None:
    """The ledger handed the holder back to this process (``claim.exclusive``), or lost its
    spend while others share it (a process that counted it in memory died): counted again
    from the logs and written back, with ``unlogged`` (an answer settled before its log
    write)."""
    if claim.exclusive:
        account.exclusive = True
        account.valid_until = time.monotonic() + claim.valid_for
        if claim.spent is not None:
            account.spent = claim.spent
            return
    if claim.spent is not None:
        account.spent = claim.spent
        return
    assert account.recount is not None
    spent = await account.recount() + unlogged
    account.spent = spent
    if not claim.exclusive and account.ledger is not None:
        with anyio.CancelScope(shield=True):
            await account.ledger.budget_share(account.key, spent, account.inflight)


async def _give_back(account: Account, need: Vector) -> None:
    """Undo a reservation of ``need`` that the rest of its chain refused."""
    _add(account.hv, need, -1.0)
    if need[_CHILDREN]:
        account.live -= 1
    if not account.exclusive and account.ledger is not None:
        with anyio.CancelScope(shield=True):
            await account.ledger.budget_reserve(
                account.key, _NOTHING, account.budget, settle=(_spend(need), _NOTHING)
            )
    account.woken()


async def _wait(chain: Sequence[Account]) -> None:
    """Until a charge of ``chain`` settles here (a shared account: a short pause)."""
    if any(not a.exclusive for a in chain):
        await anyio.sleep(_SHARED_WAIT)
        return
    account = next((a for a in chain if any(a.hv)), chain[0])
    if account.settled is None:
        account.settled = anyio.Event()
    with anyio.move_on_after(1.0):  # a settle in another account of the chain: look again
        await account.settled.wait()


async def settle(done: Charge, actual: Vector) -> None:
    """The charge ``done`` is over: what it reserved goes, what it spent (``actual``) stays."""
    if settle_now(done, actual):
        return
    need = done.need
    for account in done.accounts:
        if account.sharing is not None:
            await account.sharing.wait()
        _add(account.hv, need, -1.0)
        if account.exclusive or account.ledger is None:
            _add(account.sv, actual)
        else:
            answer = await _settle_shared(account, _spend(need), _spend(actual))
            if answer.claim is not None:
                claim = answer.claim
                if claim.exclusive and claim.spent is not None:
                    # Settled before the holder came back: ``actual`` is in its spend.
                    await _claimed(account, claim)
                else:
                    # Lost: counted from the logs, which do not hold this answer yet.
                    await _claimed(account, claim, _spend(actual))
            else:
                account.spent = answer.used - account.inflight
        account.woken()


async def _settle_shared(account: Account, need: Spend, actual: Spend) -> LedgerReserve:
    ledger = account.ledger
    assert ledger is not None
    with anyio.CancelScope(shield=True):
        return await ledger.budget_reserve(
            account.key, _NOTHING, account.budget, settle=(need, actual)
        )
    raise AssertionError("unreachable")  # a shielded scope is never cancelled


def warnings(chain: Sequence[Account]) -> list[tuple[Account, LimitKind]]:
    """The limits of ``chain`` whose warning share was passed just now (each once)."""
    found: list[tuple[Account, LimitKind]] | None = None
    for account in chain:
        spent = account.sv
        for entry in account.pending:
            if spent[entry[0]] >= entry[1]:
                found = found if found is not None else []
                found.append((account, entry[2]))
        if account.deadline is not None and "wall_seconds" not in account.warned:
            wall = account.budget.wall_seconds
            assert wall is not None
            if time.time() >= account.started + wall * account.budget.warn_at:
                found = found if found is not None else []
                found.append((account, "wall_seconds"))
    if found is None:
        return _NO_WARNINGS
    for account, kind in found:
        account.warned.add(kind)
        account.pending = [entry for entry in account.pending if entry[2] != kind]
    return found


_NO_WARNINGS: list[tuple[Account, LimitKind]] = []


def remainder(chain: Sequence[Account]) -> Budget | None:
    """What is left of every limit of ``chain`` (the tightest of each): the most a
    delegation below it may be given. ``None`` when nothing limits it."""
    if not chain:
        return None
    left: dict[str, float] = {}
    warn = 1.0
    for account in chain:
        warn = min(warn, account.budget.warn_at)
        for kind in LIMIT_KINDS:
            value = account.left(kind)
            if value is None:
                continue
            if kind in ("input_tokens", "output_tokens", "requests", "children", "live_children"):
                value = int(value)
            if kind not in left or value < left[kind]:
                left[kind] = value
    return Budget(**left, warn_at=warn)  # type: ignore[arg-type]


def budget_descriptor(budget: Budget, started: float, base: Spend) -> DescriptorEvent:
    """The ``budget`` record a holder's log keeps."""
    return DescriptorEvent(
        kind=BUDGET_DESCRIPTOR,
        data={"limits": budget.as_data(), "started": started, "base": base.as_data()},
    )


def read_descriptor(event: DescriptorEvent, holder: str) -> tuple[Budget, float, Spend]:
    """A ``budget`` record's budget, start and base; ``BUDGET_INVALID`` naming the session
    ``holder`` when it cannot be read."""
    data = event.data
    try:
        limits = data["limits"]
        started = float(data["started"])
        base = Spend.from_data(data.get("base") or {})
        return Budget.from_data(limits, where="budget record"), started, base
    except (KeyError, TypeError, ValueError) as exc:
        raise BudgetError(
            ErrorCode.BUDGET_INVALID,
            f"the budget record in the log of session {holder} cannot be read: {exc}",
            where=f"session {holder}",
            remedy=f"the log was written by another program; set a budget again (tether run "
            f"--session {holder} --budget ...), which replaces it",
        ) from None


def warning_text(account: Account, kind: LimitKind) -> str:
    """The notice a model reads when a limit passes its warning share."""
    limit = account.budget.limit(kind)
    assert limit is not None
    used = account.used(kind)
    share = int(used / limit * 100) if limit else 100
    return (
        f"Budget notice: {share}% of the {kind.replace('_', ' ')} limit of the budget you work "
        f"under is used ({format_amount(kind, used)} of {format_amount(kind, limit)}; set on "
        f"session {account.holder}). When it runs out, requests stop with BUDGET_EXCEEDED: "
        "plan to wrap up with what you have."
    )


def warning_descriptor(account: Account, kind: LimitKind) -> DescriptorEvent:
    limit = account.budget.limit(kind) or 0
    return DescriptorEvent(
        kind=BUDGET_WARNING_DESCRIPTOR,
        data={"holder": account.holder, "limit": kind, "share": account.used(kind) / limit},
    )
