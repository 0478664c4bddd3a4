"""What a subtree spent, counted from its sessions' logs (docs/budgets.md, "Counting").

The logs are the truth: every stored answer carries the usage its provider reported (and a
remote agent's, ``remote_usage``). A budget holder's spend is the spend of every session of its
subtree since the budget was set: the subtree's total now, less its total then (the
descriptor's ``base``), with the children created since.
"""

from __future__ import annotations

from collections.abc import Callable

from ..contracts import AssistantMessage, Price, SessionHeader, SessionStore, Spend, Usage

__all__ = ("PriceOf", "count_session", "count_tree", "spend_of")

#: The price of a session's model (by its header), or ``None`` when unknown.
PriceOf = Callable[[SessionHeader], Price | None]


def spend_of(usage: Usage, price: Price | None, remote: Usage | None = None) -> Spend:
    """What one answer spent: its usage priced by ``price``, and what the remote agent behind
    the model reported of its own work (``remote``): its tokens count, its cost is unknown (a
    remote agent's models are not ours to price), as is the answer's when it has no price."""
    cost = 0.0 if price is None else price.cost(usage)
    unpriced = 1 if price is None else 0
    if remote is not None and (remote.input_tokens or remote.output_tokens):
        usage, unpriced = usage + remote, 1
    return Spend(
        usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, cost, unpriced, 1, 0
    )


async def count_session(store: SessionStore, header: SessionHeader, price: Price | None) -> Spend:
    """Everything ``header``'s session spent, from its log (the answers it stored)."""
    spent = Spend()
    for stored in await store.events(header.id, after=header.seed_length):
        event = stored.event
        if isinstance(event, AssistantMessage):
            spent = spent + spend_of(event.usage, price, event.remote_usage)
    return spent


async def count_tree(
    store: SessionStore, holder: str, price_of: PriceOf, *, since: float | None = None
) -> Spend:
    """Everything the subtree of ``holder`` spent (its own session included), with the
    number of children created at or after ``since`` (all of them when ``None``)."""
    root = await store.header(holder)
    spent = await count_session(store, root, price_of(root))
    frontier = [holder]
    while frontier:
        below: list[str] = []
        for parent in frontier:
            for child in await store.sessions(parent=parent):
                spent = spent + await count_session(store, child, price_of(child))
                if since is None or child.created_at >= since:
                    spent = spent + Spend(children=1)
                below.append(child.id)
        frontier = below
    return spent
