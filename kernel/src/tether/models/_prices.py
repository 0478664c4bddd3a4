"""Prices: what a model's tokens cost, per million tokens in US dollars (docs/budgets.md).

A model's price comes, first found, from: the profile's ``[prices.NAME]`` tables (NAME a whole
spec, ``deepseek:deepseek-chat``, or the start of model names, ``gpt-5``), the model object's
own ``price`` attribute (a plugin's model that knows it), or the built-in table below, matched
on the longest prefix of the model's name (the part of the spec after the provider). Unknown:
``None``, and what its requests cost is shown as unknown, never as zero.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..contracts import Price

__all__ = ("BUILTIN_PRICES", "price_for")

#: The built-in table: model-name prefix -> price (US dollars per million tokens), the
#: providers' published list prices for the first-party models of tether's presets.
BUILTIN_PRICES: dict[str, Price] = {
    "deepseek-chat": Price(input=0.28, cached_input=0.028, output=0.42),
    "deepseek-reasoner": Price(input=0.28, cached_input=0.028, output=0.42),
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "gpt-5-nano": Price(input=0.05, cached_input=0.005, output=0.4),
    "gpt-4.1": Price(input=2.0, cached_input=0.5, output=8.0),
    "gpt-4.1-mini": Price(input=0.4, cached_input=0.1, output=1.6),
    "gpt-4.1-nano": Price(input=0.1, cached_input=0.025, output=0.4),
    "gpt-4o": Price(input=2.5, cached_input=1.25, output=10.0),
    "gpt-4o-mini": Price(input=0.15, cached_input=0.075, output=0.6),
    "o1": Price(input=15.0, cached_input=7.5, output=60.0),
    "o3": Price(input=2.0, cached_input=0.5, output=8.0),
    "o4-mini": Price(input=1.1, cached_input=0.275, output=4.4),
    "claude-opus-4": Price(input=15.0, cached_input=1.5, cache_write=18.75, output=75.0),
    "claude-opus-4-5": Price(input=5.0, cached_input=0.5, cache_write=6.25, output=25.0),
    "claude-sonnet-4": Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0),
    "claude-haiku-4": Price(input=1.0, cached_input=0.1, cache_write=1.25, output=5.0),
    "claude-3-5-haiku": Price(input=0.8, cached_input=0.08, cache_write=1.0, output=4.0),
    "gemini-2.5-pro": Price(input=1.25, cached_input=0.125, output=10.0),
    "gemini-2.5-flash": Price(input=0.3, cached_input=0.03, output=2.5),
    "gemini-2.0-flash": Price(input=0.1, cached_input=0.025, output=0.4),
}


def price_for(
    spec: str | None, model: object = None, prices: Mapping[str, Price] | None = None
) -> Price | None:
    """The price of the model ``spec`` names (``model``: the model object, when made):
    the profile's ``prices`` (a whole spec first, then the longest name prefix), the model's
    ``price`` attribute, or the built-in table; ``None`` when nobody knows it."""
    if spec is None:
        named = getattr(model, "name", None)
        spec = named if isinstance(named, str) else None
    name = _name(spec)
    if prices:
        if spec is not None and spec in prices:
            return prices[spec]
        found = _longest(name, prices)
        if found is not None:
            return found
    told = getattr(model, "price", None)
    if isinstance(told, Price):
        return told
    return _longest(name, BUILTIN_PRICES)


def _name(spec: object) -> str:
    if not isinstance(spec, str):
        return ""
    name = spec.partition(":")[2] or spec
    return name.partition("@")[0].lower()  # openai-compatible:MODEL@URL


def _longest(name: str, table: Mapping[str, Price]) -> Price | None:
    if not name:
        return None
    best: tuple[int, Price] | None = None
    for prefix, price in table.items():
        if name.startswith(prefix.lower()) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), price)
    return None if best is None else best[1]
