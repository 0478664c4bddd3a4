"""The budget contract: limits on a delegation tree, what it spent, what a model's tokens cost,
and the optional part of a store that lets processes share one budget (docs/budgets.md).

A **budget** sits on one session, its *holder* (a root, or a delegated child for its subtree),
and limits what the holder's whole subtree spends from the moment it was set: input and output
tokens, cost in US dollars, wall time, model requests, children started in all and children
live at once. Every model request and every child start checks the budget of every holder
above it first; a request that would pass a limit is never sent.

:class:`Spend` is what a tree used; :class:`Price` what a model's tokens cost. A store that
implements :class:`BudgetLedger` lets several processes spend under one holder without passing
its limits together; see there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Literal, Protocol, cast, get_args, runtime_checkable

if TYPE_CHECKING:
    from ._messages import Usage

__all__ = (
    "LIMIT_KINDS",
    "Budget",
    "BudgetLedger",
    "LedgerClaim",
    "LedgerReserve",
    "LimitKind",
    "Price",
    "Spend",
    "format_amount",
    "within",
)

LimitKind = Literal[
    "input_tokens",
    "output_tokens",
    "cost",
    "wall_seconds",
    "requests",
    "children",
    "live_children",
]
#: Every limit a budget may set, in the order they are checked and shown.
LIMIT_KINDS = cast("tuple[LimitKind, ...]", get_args(LimitKind))

#: The short names ``--budget`` and profiles accept, for each limit.
_ALIASES: dict[str, LimitKind] = {
    "input": "input_tokens",
    "input_tokens": "input_tokens",
    "output": "output_tokens",
    "output_tokens": "output_tokens",
    "cost": "cost",
    "usd": "cost",
    "time": "wall_seconds",
    "wall_seconds": "wall_seconds",
    "requests": "requests",
    "children": "children",
    "live": "live_children",
    "live_children": "live_children",
}
_WHOLE = frozenset(("input_tokens", "output_tokens", "requests", "children", "live_children"))
_SUFFIXES = {"k": 1_000, "m": 1_000_000}
_DURATIONS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_NUMBER = re.compile(r"^\$?(\d+(?:\.\d*)?|\.\d+)([a-zA-Z]*)$")


def _invalid(message: str) -> ValueError:
    return ValueError(message)


def _count(kind: str, text: str) -> float:
    """A number as ``--budget`` writes it: ``200k``, ``1.5M``, ``$2.50``, ``90s``, ``10m``,
    ``80%`` (a share); a ``ValueError`` says what is wrong with it."""
    match = _NUMBER.match(text.strip().replace("_", "").replace(",", ""))
    if match is None:
        raise _invalid("not a number")
    value, suffix = float(match.group(1)), match.group(2).lower()
    if kind == "wall_seconds":
        if suffix and suffix not in _DURATIONS:
            raise _invalid("write seconds as 90, 90s, 10m or 1h")
        return value * _DURATIONS.get(suffix, 1.0)
    if kind == "warn_at":
        if suffix:
            raise _invalid("write a share as 0.8 or 80%")
        return value
    if suffix:
        if kind == "cost" or suffix not in _SUFFIXES:
            hint = "US dollars, as 2.50" if kind == "cost" else "a count, as 200000 or 200k"
            raise _invalid(f"the unit {suffix!r} is not one tether reads: write {hint}")
        value *= _SUFFIXES[suffix]
    return value


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on what a holder's subtree spends; ``None``: no limit of that kind.

    Tokens, requests and children are counted over every session of the subtree (the holder's
    own included), cost in US dollars from each session's model's :class:`Price`, wall time
    from the moment the budget was set (a deadline: a crash and a resume do not stop it).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    """US dollars."""
    wall_seconds: float | None = None
    requests: int | None = None
    """Model requests."""
    children: int | None = None
    """Child sessions started, in all."""
    live_children: int | None = None
    """Children working at once (in one process: see docs/budgets.md)."""
    warn_at: float = 0.8
    """The share of a limit at which the agent reads a notice (once per limit); 1: never."""

    def __post_init__(self) -> None:
        for kind in LIMIT_KINDS:
            value = getattr(self, kind)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _invalid(f"{kind} = {value!r}: not a number")
            if not math.isfinite(value) or value < 0:
                raise _invalid(f"{kind} = {value!r}: must be a number >= 0")
        warn = cast("object", self.warn_at)
        if isinstance(warn, bool) or not isinstance(warn, int | float) or not 0 < warn <= 1:
            raise _invalid(f"warn_at = {warn!r}: must be a share above 0 and at most 1")

    @property
    def empty(self) -> bool:
        """Whether it limits nothing."""
        return all(getattr(self, kind) is None for kind in LIMIT_KINDS)

    def limit(self, kind: LimitKind) -> float | None:
        value: float | None = getattr(self, kind)
        return value

    def within(self, other: Budget | None) -> Budget:
        """This budget, each limit at most ``other``'s (``other``'s warning share when lower)."""
        if other is None:
            return self
        changes: dict[str, float] = {}
        for kind in LIMIT_KINDS:
            mine, theirs = getattr(self, kind), getattr(other, kind)
            if theirs is not None and (mine is None or theirs < mine):
                changes[kind] = theirs
        if other.warn_at < self.warn_at:
            changes["warn_at"] = other.warn_at
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]

    def as_data(self) -> dict[str, float]:
        """The limits it sets (and ``warn_at``), as JSON-ready data."""
        data: dict[str, float] = {
            kind: getattr(self, kind) for kind in LIMIT_KINDS if getattr(self, kind) is not None
        }
        data["warn_at"] = self.warn_at
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, object], *, where: str = "budget") -> Budget:
        """A budget from a table (a profile's ``budget``, a log's descriptor): the keys of
        :data:`LIMIT_KINDS`, their short names (``input``, ``output``, ``time``, ``live``...)
        and ``warn_at``; values are numbers or strings as ``--budget`` writes them."""
        values: dict[str, float] = {}
        for key, raw in data.items():
            if key in ("warn_at", "warn"):
                kind_name = "warn_at"
            elif key in _ALIASES:
                kind_name = _ALIASES[key]
            else:
                known = ", ".join(sorted({*_ALIASES, "warn_at"}))
                raise _invalid(f"{where}: unknown limit {key!r} (known: {known})")
            if isinstance(raw, str):
                text = raw.strip()
                percent = kind_name == "warn_at" and text.endswith("%")
                try:
                    value = _count(kind_name, text.removesuffix("%") if percent else text)
                except ValueError as exc:
                    raise _invalid(f"{where}: {key} = {raw!r}: {exc}") from None
                if percent:
                    value /= 100
            elif isinstance(raw, int | float) and not isinstance(raw, bool):
                value = raw
            else:
                raise _invalid(f"{where}: {key} = {raw!r} is not a number")
            if kind_name in _WHOLE:
                if value != int(value):
                    raise _invalid(f"{where}: {key} = {raw!r} must be a whole number")
                value = int(value)
            values[kind_name] = value
        try:
            return cls(**values)  # type: ignore[arg-type]
        except ValueError as exc:
            raise _invalid(f"{where}: {exc}") from None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``--budget``'s form: ``output=200k,cost=2.50,time=10m,requests=40,children=5,
        live=3,warn=0.9`` (commas or spaces between limits)."""
        data: dict[str, object] = {}
        for part in re.split(r"[,\s]+", text.strip()):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not value:
                raise _invalid(f"budget: {part!r} is not LIMIT=VALUE (e.g. output=200k, cost=2.5)")
            data[key.strip().lower()] = value.strip()
        if not data:
            raise _invalid("budget: no limit given (e.g. output=200k,cost=2.5,time=10m)")
        return cls.from_data(data, where="--budget")

    def describe(self) -> str:
        """``output 200,000 tokens, cost $2.50, time 10m``: for people."""
        parts = [
            f"{_LABELS[kind]} {format_amount(kind, getattr(self, kind))}"
            for kind in LIMIT_KINDS
            if getattr(self, kind) is not None
        ]
        return ", ".join(parts) or "no limits"


_LABELS: dict[LimitKind, str] = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cost": "cost",
    "wall_seconds": "time",
    "requests": "requests",
    "children": "children",
    "live_children": "live children",
}


def format_amount(kind: LimitKind, value: float) -> str:
    """An amount of ``kind`` for people: ``200,000 tokens``, ``$2.50``, ``10m 5s``, ``40``."""
    if kind == "cost":
        return f"${value:,.4f}" if 0 < value < 0.01 else f"${value:,.2f}"
    if kind == "wall_seconds":
        if value < 60:
            return f"{value:.1f}s"
        minutes, seconds = divmod(int(value), 60)
        return f"{minutes}m {seconds}s" if minutes < 60 else f"{minutes // 60}h {minutes % 60}m"
    if kind in ("input_tokens", "output_tokens"):
        return f"{int(value):,} tokens"
    return f"{int(value):,}"


@dataclass(frozen=True, slots=True)
class Spend:
    """What a tree (or one request, one session) used. Adds up with ``+``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Of ``input_tokens``, served from the provider's prompt cache."""
    cost: float = 0.0
    """US dollars, of the requests with a known price."""
    unpriced: int = 0
    """Requests whose model has no price: their cost is unknown, not zero."""
    requests: int = 0
    children: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cost + other.cost,
            self.unpriced + other.unpriced,
            self.requests + other.requests,
            self.children + other.children,
        )

    def __sub__(self, other: Spend) -> Spend:
        return Spend(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.cached_input_tokens - other.cached_input_tokens,
            self.cost - other.cost,
            self.unpriced - other.unpriced,
            self.requests - other.requests,
            self.children - other.children,
        )

    def amount(self, kind: LimitKind) -> float:
        """What it used of ``kind`` (wall time and live children are not spent: 0)."""
        if kind in ("wall_seconds", "live_children"):
            return 0
        value: float = getattr(self, kind)
        return value

    @property
    def cost_known(self) -> bool:
        """Whether every request it counts had a price."""
        return self.unpriced == 0

    def as_data(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    @classmethod
    def from_data(cls, data: Mapping[str, object]) -> Spend:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and isinstance(v, int | float)}
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Price:
    """What a model's tokens cost, in US dollars per million tokens.

    ``cached_input`` (prompt-cache reads) and ``cache_write`` (prompt-cache writes) default to
    ``input`` when a provider does not price them apart."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input", "cache_write"):
            value = getattr(self, name)
            if value is None and name in ("cached_input", "cache_write"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _invalid(f"price {name}: {value!r} is not a number")
            if not math.isfinite(value) or value < 0:
                raise _invalid(f"price {name}: {value!r} must be a number >= 0")

    def cost(self, usage: Usage) -> float:
        """The cost of one response's ``usage``. Cached and cache-write tokens are subsets of
        ``input_tokens``, each priced at its own rate; the rest of the input at ``input``."""
        cached = usage.cached_input_tokens
        written = usage.cache_write_input_tokens
        plain = max(usage.input_tokens - cached - written, 0)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write is None else self.cache_write
        total = (
            plain * self.input
            + cached * cached_rate
            + written * write_rate
            + usage.output_tokens * self.output
        )
        return total / 1_000_000

    def bound(self, input_tokens: int, output_tokens: int) -> float:
        """The most ``input_tokens`` in and ``output_tokens`` out can cost (no cache hits;
        cache writes at their rate when dearer): what a request is checked against."""
        write_rate = self.input if self.cache_write is None else self.cache_write
        return (input_tokens * max(self.input, write_rate) + output_tokens * self.output) / (
            1_000_000
        )

    def as_data(self) -> dict[str, float]:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


@dataclass(frozen=True, slots=True)
class LedgerClaim:
    """A store's answer to :meth:`BudgetLedger.budget_claim` and, when it hands the holder
    back to one process, to :meth:`BudgetLedger.budget_reserve`."""

    exclusive: bool
    """This process is the only live one spending under the holder: it counts in memory,
    with no store write per request, until another process claims the holder too."""
    spent: Spend | None
    """The holder's settled spend as the ledger knows it; ``None`` when the ledger cannot
    know (a new holder, or the process that last counted it in memory died): the caller then
    counts it from the sessions' logs."""
    valid_for: float
    """Seconds this process's claims stay valid without a store call (its liveness as other
    processes judge it): exclusive spending stops trusting memory after that."""


@dataclass(frozen=True, slots=True)
class LedgerReserve:
    """A store's answer to :meth:`BudgetLedger.budget_reserve`."""

    granted: bool
    """Whether ``need`` was reserved (or, with ``claim`` set, the holder is exclusive again)."""
    used: Spend
    """What counts against the limits now: the settled spend and every live process's
    reservations (this one's included when granted)."""
    waiting: bool = False
    """Refused only because of what other processes reserved and have not settled yet: the
    caller may wait and ask again."""
    claim: LedgerClaim | None = None
    """Set when no other live process spends under the holder any more: this process has it
    exclusively again (``exclusive`` true; ``granted`` is then true and nothing was reserved
    in the store). Also set, with ``exclusive`` false and ``spent`` ``None``, when others still
    share the holder but the ledger lost its spend (an exclusive owner died before sharing):
    the caller counts the spend from the logs, writes it with :meth:`BudgetLedger.budget_share`
    and asks again (``granted`` is false)."""


@runtime_checkable
class BudgetLedger(Protocol):
    """The optional part of a :class:`~tether.store.SessionStore` that lets several processes
    spend under one budget holder together without passing its limits (docs/budgets.md).

    Each process that spends under a holder *claims* it. A lone claimant is **exclusive**: it
    counts in memory and tells the store nothing per request. Once a second live process
    claims the holder, the exclusive one *shares* (writes what it spent and what its request
    in flight reserved) and from then on every process **reserves** before each request and
    **settles** after it, each in one store transaction that checks the sum against the
    limits. A process's claims live as long as its leases (the store's liveness of its owner):
    the claims of a dead process are dropped, and when it was exclusive the ledger forgets the
    holder's spend (``spent=None``), which the next claimant counts again from the logs (where
    every stored answer's usage is).

    A store without it (the memory store) is used by one process: budgets are counted in
    memory, exact for that process.
    """

    async def budget_claim(self, holder: str) -> LedgerClaim:
        """Claim ``holder`` for this store's owner (idempotent), dropping the claims of dead
        owners first; exclusive when no other live owner claims it."""
        ...

    async def budget_contended(self) -> tuple[list[str], float]:
        """The holders this owner claims exclusively that another live owner has claimed
        since, and for how many seconds this owner's claims stay valid (as
        :attr:`LedgerClaim.valid_for`). A read, called about every quarter second by a
        process that spends exclusively."""
        ...

    async def budget_share(self, holder: str, spent: Spend, reserved: Spend) -> None:
        """End this owner's exclusive claim on ``holder``: the ledger's settled spend becomes
        ``spent`` (what this owner counted, authoritative while it was alone) and this owner's
        reservation ``reserved`` (its requests in flight). On a shared claim, the same writes
        a spend counted again from the logs (:attr:`LedgerReserve.claim`)."""
        ...

    async def budget_reserve(
        self,
        holder: str,
        need: Spend,
        budget: Budget,
        *,
        settle: tuple[Spend, Spend] | None = None,
    ) -> LedgerReserve:
        """In one transaction: with ``settle = (reserved, actual)``, take ``reserved`` off this
        owner's reservation and add ``actual`` to the settled spend; then, when no other live
        owner claims ``holder``, make this owner exclusive again (``claim`` set, nothing
        reserved); else reserve ``need`` if the settled spend, every live owner's reservations
        and ``need`` stay within ``budget`` (:func:`within`), and say what is used either way.
        ``need`` may be empty (``Spend()``): only settle."""
        ...

    async def budget_release(self, holder: str, spent: Spend | None) -> None:
        """Drop this owner's claim on ``holder``. ``spent``: when it was exclusive, what it
        counted (the ledger's settled spend becomes it); ``None`` when it shared (its
        reservations must be settled already; any left are dropped)."""
        ...


def within(budget: Budget, used: Spend, need: Spend) -> LimitKind | None:
    """The first limit of ``budget`` that ``used + need`` would pass (counting kinds only:
    tokens, cost, requests, children), or ``None`` when it fits."""
    for kind in ("input_tokens", "output_tokens", "cost", "requests", "children"):
        limit = getattr(budget, kind)
        if (
            limit is not None
            and getattr(need, kind)
            and (getattr(used, kind) + getattr(need, kind) > limit)
        ):
            return kind  # type: ignore[return-value]
    return None
