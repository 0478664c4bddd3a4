"""Prices: what a model's tokens cost, per million tokens in US dollars (docs/budgets.md).

A model's price comes, first found, from: the profile's ``[prices.NAME]`` tables (NAME a whole
spec, ``deepseek:deepseek-chat``, or the start of model names, ``gpt-5``), the model object's
own ``price`` attribute (a plugin's model that knows it), or the built-in table below, matched
on the longest prefix of the model's name (the part of the spec after the provider). Unknown:
``None``, and what its requests cost is shown as unknown, never as zero.

The built-in table holds the providers' published list prices as read on 2026-12-06; a
profile's ``[prices.NAME]`` overrides it (a price changed, a negotiated rate, a proxy's
markup). :func:`tether.budgets.profile_prices` turns a profile's tables into the mapping
:func:`price_for` takes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..contracts import Price
from ._windows import longest_prefix, model_name

__all__ = ("BUILTIN_PRICES", "price_for")

#: The built-in table: model-name prefix -> price (US dollars per million tokens), the
#: providers' published list prices (standard tier, no batch or regional surcharge) for the
#: first-party models of tether's presets, as read on 2026-12-06 from the providers' pricing
#: pages (OpenAI's API pricing, Anthropic's "Model pricing", DeepSeek's "Models & Pricing",
#: the Gemini API's pricing page). What the table does not model: Anthropic's 1-hour cache
#: writes (priced here at the 5-minute rate, which is what a plain ``cache_control`` writes),
#: Gemini 2.5 Pro's dearer rates above 200,000 prompt tokens, DeepSeek's off-peak discounts,
#: and Gemini's cache storage (per hour, not per request). A prefix matches every name that
#: starts with it (dated snapshots, ``-latest``); the longest match wins, so a family's
#: cheaper variants (``-mini``, ``-lite``) carry their own rows.
BUILTIN_PRICES: dict[str, Price] = {
    # DeepSeek (V3.2: the chat and reasoner modes share one price; a cache miss is input).
    "deepseek-chat": Price(input=0.28, cached_input=0.028, output=0.42),
    "deepseek-reasoner": Price(input=0.28, cached_input=0.028, output=0.42),
    # OpenAI: GPT-5 family (cached input a tenth of input).
    "gpt-5": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "gpt-5-nano": Price(input=0.05, cached_input=0.005, output=0.4),
    "gpt-5-pro": Price(input=15.0, output=120.0),
    "gpt-5.1": Price(input=1.25, cached_input=0.125, output=10.0),
    "gpt-5.1-codex-mini": Price(input=0.25, cached_input=0.025, output=2.0),
    "gpt-5.2": Price(input=1.75, cached_input=0.175, output=14.0),
    "gpt-5.2-pro": Price(input=21.0, output=168.0),
    "gpt-5.4": Price(input=2.5, cached_input=0.25, output=15.0),
    "gpt-5.4-mini": Price(input=0.75, cached_input=0.075, output=4.5),
    "gpt-5.4-nano": Price(input=0.2, cached_input=0.02, output=1.25),
    "gpt-5.4-pro": Price(input=30.0, output=180.0),
    "gpt-5.5": Price(input=5.0, cached_input=0.5, output=30.0),
    "gpt-5.5-pro": Price(input=30.0, output=180.0),
    # OpenAI: GPT-4.1 (cached a quarter) and GPT-4o (cached half) families.
    "gpt-4.1": Price(input=2.0, cached_input=0.5, output=8.0),
    "gpt-4.1-mini": Price(input=0.4, cached_input=0.1, output=1.6),
    "gpt-4.1-nano": Price(input=0.1, cached_input=0.025, output=0.4),
    "gpt-4o": Price(input=2.5, cached_input=1.25, output=10.0),
    "gpt-4o-mini": Price(input=0.15, cached_input=0.075, output=0.6),
    # OpenAI: o-series reasoning models (reasoning tokens are billed as output).
    "o1": Price(input=15.0, cached_input=7.5, output=60.0),
    "o1-mini": Price(input=1.1, cached_input=0.55, output=4.4),
    "o1-pro": Price(input=150.0, output=600.0),
    "o3": Price(input=2.0, cached_input=0.5, output=8.0),
    "o3-mini": Price(input=1.1, cached_input=0.55, output=4.4),
    "o3-pro": Price(input=20.0, output=80.0),
    "o4-mini": Price(input=1.1, cached_input=0.275, output=4.4),
    # Anthropic: cached_input is a cache hit (a tenth of input), cache_write the 5-minute
    # write (1.25 times input).
    "claude-opus-4": Price(input=15.0, cached_input=1.5, cache_write=18.75, output=75.0),
    "claude-opus-4-5": Price(input=5.0, cached_input=0.5, cache_write=6.25, output=25.0),
    "claude-opus-4-6": Price(input=5.0, cached_input=0.5, cache_write=6.25, output=25.0),
    "claude-opus-4-7": Price(input=5.0, cached_input=0.5, cache_write=6.25, output=25.0),
    "claude-opus-4-8": Price(input=5.0, cached_input=0.5, cache_write=6.25, output=25.0),
    "claude-opus-5": Price(input=5.0, cached_input=0.5, cache_write=6.25, output=25.0),
    "claude-sonnet-4": Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0),
    "claude-haiku-4": Price(input=1.0, cached_input=0.1, cache_write=1.25, output=5.0),
    "claude-3-7-sonnet": Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0),
    "claude-3-5-sonnet": Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0),
    "claude-3-5-haiku": Price(input=0.8, cached_input=0.08, cache_write=1.0, output=4.0),
    "claude-3-opus": Price(input=15.0, cached_input=1.5, cache_write=18.75, output=75.0),
    "claude-3-haiku": Price(input=0.25, cached_input=0.03, cache_write=0.3, output=1.25),
    # Gemini 2.x (paid tier, text; 2.5 Pro at its rates for prompts up to 200,000 tokens).
    "gemini-2.5-pro": Price(input=1.25, cached_input=0.125, output=10.0),
    "gemini-2.5-flash": Price(input=0.3, cached_input=0.03, output=2.5),
    "gemini-2.5-flash-lite": Price(input=0.1, cached_input=0.01, output=0.4),
    "gemini-2.0-flash": Price(input=0.1, cached_input=0.025, output=0.4),
    "gemini-2.0-flash-lite": Price(input=0.075, output=0.3),
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
    name = model_name(spec)
    if prices:
        if spec is not None and spec in prices:
            return prices[spec]
        found = longest_prefix(name, prices)
        if found is not None:
            return found
    told = getattr(model, "price", None)
    if isinstance(told, Price):
        return told
    return longest_prefix(name, BUILTIN_PRICES)
