"""What a subtree spent, counted from its sessions' logs (docs/budgets.md, "Counting").

The logs are the truth: every stored answer carries the usage its provider reported (and a
remote agent's, ``remote_usage``). A budget holder's spend is the spend of every session of its
subtree since the budget was set: the subtree's total now, less its total then (the
descriptor's ``base``), with the children created since.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..contracts import Price, SessionHeader, SessionStore, Spend, Usage
from ..store._lineage import tree_of
from ._prices import log_spend, request_spend

__all__ = ("count_session", "count_tree", "spend_of")


def spend_of(usage: Usage, price: Price | None, remote: Usage | None = None) -> Spend:
    """What one answer spent: its usage (a remote agent's answer: what that agent reported of
    its own work, ``remote``) priced by the answering model's ``price`` (``None``: unknown)."""
    return request_spend(remote if remote is not None else usage, price)


async def count_session(
    store: SessionStore, header: SessionHeader, prices: Mapping[str, Price] | None
) -> Spend:
    """Everything ``header``'s session spent, from its log (its answers and its compactions'
    summaries, each priced by the model that made it)."""
    events = [s.event for s in await store.events(header.id, after=header.seed_length)]
    return log_spend(events, model=header.model, prices=prices).spend


async def count_tree(
    store: SessionStore,
    holder: str,
    prices: Mapping[str, Price] | None,
    *,
    since: float | None = None,
) -> Spend:
    """Everything the subtree of ``holder`` spent (its own session included), with the
    number of children created at or after ``since`` (all of them when ``None``)."""
    spent = Spend()
    for header in await tree_of(store, holder):
        spent = spent + await count_session(store, header, prices)
        if header.id != holder and (since is None or header.created_at >= since):
            spent = spent + Spend(children=1)
    return spent
