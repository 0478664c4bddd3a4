"""What a request cost: a profile's ``[prices.NAME]`` tables as :class:`Price` values, and one
response's usage as a :class:`Spend` with its cost (docs/budgets.md).

Cost is known only when the model's price is: an unpriced request counts its tokens and adds
one to :attr:`Spend.unpriced`, never zero dollars; whoever shows a cost says "unknown" then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..contracts import Price, Spend

if TYPE_CHECKING:
    from ..contracts import Event, Usage
    from ..loading import Profile

__all__ = ("LogSpend", "format_cost", "log_spend", "profile_prices", "request_spend")

_NO_PRICES: Mapping[str, Price] = {}


def profile_prices(profile: Profile | None) -> Mapping[str, Price]:
    """The prices ``profile`` sets (``[prices.NAME]``), by model spec or name prefix: what
    :func:`tether.models.price_for` takes as ``prices``. Empty for no profile."""
    if profile is None or not profile.prices:
        return _NO_PRICES
    return {
        name: Price(
            input=table.input,
            output=table.output,
            cached_input=table.cached_input,
            cache_write=table.cache_write,
        )
        for name, table in profile.prices.items()
    }


def request_spend(usage: Usage, price: Price | None) -> Spend:
    """One model request's :class:`Spend`: its tokens, and its cost at ``price`` (``None``:
    unknown, counted in :attr:`Spend.unpriced`)."""
    return Spend(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        cost=0.0 if price is None else price.cost(usage),
        unpriced=1 if price is None else 0,
        requests=1,
    )


def format_cost(cost: float | None, unpriced: int = 0, *, requests: int | None = None) -> str:
    """A cost for people: ``$0.0123``; ``unknown`` when nothing was priced; ``$0.0123 + unknown
    (2 unpriced requests)`` when some requests had no price. ``requests``: how many the cost
    covers, to tell "all unpriced" from "some" (default: all when ``cost`` is ``None``)."""
    if cost is None or (requests is not None and unpriced >= requests > 0):
        return "unknown"
    shown = f"${cost:,.4f}" if cost < 1 else f"${cost:,.2f}"
    if unpriced:
        plural = "s" if unpriced != 1 else ""
        return f"{shown} + unknown ({unpriced} unpriced request{plural})"
    return shown


#: The descriptor that logs a session's change of model (``tether.agents``'s ``model``).
_MODEL_CHANGE = "model"


@dataclass(frozen=True, slots=True)
class LogSpend:
    """What a stretch of one session's log spent (:func:`log_spend`)."""

    spend: Spend
    models: tuple[str | None, ...]
    """The models that made its requests, in the order they first did."""
    unpriced_models: tuple[str | None, ...]
    """Those of them without a price."""


def log_spend(
    events: Iterable[Event],
    *,
    model: str | None,
    prices: Mapping[str, Price] | None = None,
    default: str | None = None,
) -> LogSpend:
    """What ``events`` (a stretch of one session's log) spent: each answer's usage (a remote
    agent's: what it reported) and each compaction's summary request, priced by the model
    that made it. ``model``: the session's model after the stretch (its header's); the log's
    ``model`` descriptors say which one ran before each change. ``default``: the model of a
    session that recorded none (its agent's profile model)."""
    from ..contracts import AssistantMessage, CompactionEvent, DescriptorEvent
    from ..models import price_for

    listed = list(events)
    changes = [e for e in listed if isinstance(e, DescriptorEvent) and e.kind == _MODEL_CHANGE]
    if changes:
        first = changes[0].data.get("old")
        model = first if isinstance(first, str) else None
    if model is None:
        model = default
    found: dict[str | None, Price | None] = {}
    total = Spend()
    for event in listed:
        if isinstance(event, DescriptorEvent):
            new = event.data.get("new")
            if event.kind == _MODEL_CHANGE and isinstance(new, str):
                model = new
            continue
        if isinstance(event, AssistantMessage):
            usage = event.remote_usage if event.remote_usage is not None else event.usage
        elif isinstance(event, CompactionEvent) and (
            event.strategy == "summary" or event.usage.input_tokens
        ):
            usage = event.usage
        else:
            continue
        if model not in found:
            found[model] = price_for(model, None, prices)
        total += request_spend(usage, found[model])
    return LogSpend(
        total,
        tuple(found),
        tuple(spec for spec, price in found.items() if price is None),
    )
