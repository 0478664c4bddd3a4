"""Budgets: limits on what a delegation tree spends, counted across its sessions and processes,
and what its models' tokens cost (docs/budgets.md).

The contracts (:class:`Budget`, :class:`Spend`, :class:`Price`, the store's optional
:class:`BudgetLedger`) live in :mod:`tether.contracts`; this room counts with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import (
        LIMIT_KINDS,
        Budget,
        BudgetLedger,
        LedgerClaim,
        LedgerReserve,
        LimitKind,
        Price,
        Spend,
        format_amount,
        within,
    )
    from ._prices import LogSpend, format_cost, log_spend, profile_prices, request_spend
    from ._records import (
        BUDGET_DESCRIPTOR,
        BUDGET_EXCEEDED_DESCRIPTOR,
        BUDGET_ORIGIN,
        BUDGET_WARNING_DESCRIPTOR,
    )

__all__ = (
    "BUDGET_DESCRIPTOR",
    "BUDGET_EXCEEDED_DESCRIPTOR",
    "BUDGET_ORIGIN",
    "BUDGET_WARNING_DESCRIPTOR",
    "LIMIT_KINDS",
    "Budget",
    "BudgetLedger",
    "LedgerClaim",
    "LedgerReserve",
    "LimitKind",
    "LogSpend",
    "Price",
    "Spend",
    "format_amount",
    "format_cost",
    "log_spend",
    "profile_prices",
    "request_spend",
    "within",
)

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
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
        ),
        ".contracts",
    ),
    **dict.fromkeys(
        (
            "BUDGET_DESCRIPTOR",
            "BUDGET_EXCEEDED_DESCRIPTOR",
            "BUDGET_ORIGIN",
            "BUDGET_WARNING_DESCRIPTOR",
        ),
        "_records",
    ),
    **dict.fromkeys(
        ("LogSpend", "format_cost", "log_spend", "profile_prices", "request_spend"), "_prices"
    ),
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
