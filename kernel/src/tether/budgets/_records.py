"""What a budget writes into the sessions' logs (descriptor events, docs/budgets.md).

* ``budget`` (on the holder's log): the limits (:meth:`Budget.as_data`), ``started`` (wall
  clock, seconds since the epoch: the deadline's start) and ``base`` (the subtree's spend when
  the budget was set, :meth:`Spend.as_data`; what is counted is the spend after it). A later
  ``budget`` descriptor on the same session replaces the earlier one.
* ``budget-warning`` (on the log of the session that read the notice): ``holder``, ``limit``
  (a :data:`LimitKind`), ``share``; stored with the notice (a ``ContextMessage`` of origin
  ``budget``) so that a resumed tree does not warn twice.
* ``budget-exceeded`` (on the log of the session whose request or child start was refused,
  before its ``turn/end``): ``holder``, ``limit``, ``allowed``, ``used``, ``need``.
"""

from __future__ import annotations

__all__ = (
    "BUDGET_DESCRIPTOR",
    "BUDGET_EXCEEDED_DESCRIPTOR",
    "BUDGET_ORIGIN",
    "BUDGET_WARNING_DESCRIPTOR",
)

BUDGET_DESCRIPTOR = "budget"
BUDGET_WARNING_DESCRIPTOR = "budget-warning"
BUDGET_EXCEEDED_DESCRIPTOR = "budget-exceeded"
#: The origin of the notice a model reads at a budget's warning share.
BUDGET_ORIGIN = "budget"
