"""Prices: the built-in table matched on the longest prefix of a model's name, a profile's
``[prices.NAME]`` over it (by whole spec, then by prefix), unknown models without a price,
and what a response's usage costs with cached and cache-write tokens."""

from __future__ import annotations

import pytest

from tether.budgets import format_cost, profile_prices, request_spend
from tether.contracts import Price, Spend, Usage
from tether.loading import profile_from_dict
from tether.models import BUILTIN_PRICES, price_for


def test_the_longest_prefix_wins():
    assert price_for("openai:gpt-5") == BUILTIN_PRICES["gpt-5"]
    assert price_for("openai:gpt-5-mini-2025-08-07") == BUILTIN_PRICES["gpt-5-mini"]
    assert price_for("openai:gpt-4.1-nano") == BUILTIN_PRICES["gpt-4.1-nano"]
    assert price_for("openai:gpt-4o-mini-2024-07-18") == BUILTIN_PRICES["gpt-4o-mini"]
    # A newer Opus is not priced as the old one its name starts like.
    assert price_for("anthropic:claude-opus-4-1-20250805") == BUILTIN_PRICES["claude-opus-4"]
    assert price_for("anthropic:claude-opus-4-5-20251101") == BUILTIN_PRICES["claude-opus-4-5"]
    assert price_for("anthropic:claude-opus-4-5") == Price(
        input=5.0, cached_input=0.5, cache_write=6.25, output=25.0
    )
    assert price_for("anthropic:claude-sonnet-4-5-20250929") == BUILTIN_PRICES["claude-sonnet-4"]
    # A family's cheaper variant has its own row.
    assert price_for("gemini:gemini-2.5-flash-lite") == BUILTIN_PRICES["gemini-2.5-flash-lite"]
    assert price_for("gemini:gemini-2.5-flash") == BUILTIN_PRICES["gemini-2.5-flash"]
    assert price_for("openai:o3-mini") == BUILTIN_PRICES["o3-mini"]
    assert price_for("openai:o3") == BUILTIN_PRICES["o3"]


def test_a_spec_is_read_past_its_provider_and_endpoint():
    assert price_for("deepseek:deepseek-chat") == BUILTIN_PRICES["deepseek-chat"]
    assert (
        price_for("openai-compatible:gpt-4o@http://localhost:8000/v1") == (BUILTIN_PRICES["gpt-4o"])
    )
    assert price_for("deepseek:DeepSeek-Reasoner") == BUILTIN_PRICES["deepseek-reasoner"]


@pytest.mark.parametrize(
    "spec", ["scripted:script.toml", "ollama:llama3.2", "openai:my-finetune", "", None]
)
def test_an_unknown_model_has_no_price(spec):
    assert price_for(spec) is None


def test_every_anthropic_row_prices_cache_writes_and_every_row_its_cache_hits_below_input():
    for name, price in BUILTIN_PRICES.items():
        if name.startswith("claude-"):
            # 1.25 times input (Haiku 3: $0.30 as published, not $0.3125).
            assert price.cache_write == pytest.approx(price.input * 1.25, rel=0.05), name
        if price.cached_input is not None:
            assert price.cached_input < price.input, name
        assert price.output >= price.input, name


def _profile(prices: dict[str, dict[str, float]]):
    return profile_from_dict({"prices": prices})


def test_a_profile_overrides_by_whole_spec_then_by_prefix():
    profile = _profile(
        {
            "deepseek:deepseek-chat": {"input": 1.0, "output": 2.0},
            "gpt-5": {"input": 9.0, "output": 90.0, "cached_input": 0.9},
            "my-model": {"input": 0.5, "output": 1.5, "cache_write": 0.75},
        }
    )
    prices = profile_prices(profile)
    assert prices["gpt-5"] == Price(input=9.0, output=90.0, cached_input=0.9)
    # The whole spec: only that provider's model.
    assert price_for("deepseek:deepseek-chat", prices=prices) == Price(input=1.0, output=2.0)
    assert price_for("other:deepseek-chat", prices=prices) == BUILTIN_PRICES["deepseek-chat"]
    # A prefix in the profile beats the built-in table's longer one: the profile is asked
    # first, and gpt-5-mini starts with gpt-5.
    assert price_for("openai:gpt-5-mini", prices=prices) == prices["gpt-5"]
    # A model tether does not know, priced by the profile.
    assert (
        price_for("openai-compatible:my-model-7b@http://x/v1", prices=prices)
        == (prices["my-model"])
    )
    # What the profile does not name keeps the built-in price.
    assert (
        price_for("anthropic:claude-haiku-4-5", prices=prices) == (BUILTIN_PRICES["claude-haiku-4"])
    )


def test_a_profile_without_prices_gives_an_empty_table():
    assert profile_prices(None) == {}
    assert profile_prices(profile_from_dict({})) == {}


def test_a_model_object_may_know_its_own_price():
    class Priced:
        name = "house-model"
        price = Price(input=1.0, output=1.0)

    assert price_for(None, Priced()) == Price(input=1.0, output=1.0)
    # The profile still wins.
    prices = profile_prices(_profile({"house": {"input": 2.0, "output": 2.0}}))
    assert price_for(None, Priced(), prices) == Price(input=2.0, output=2.0)


def test_cost_prices_plain_cached_and_written_input_apart():
    price = BUILTIN_PRICES["claude-sonnet-4"]  # 3 in, 0.30 hit, 3.75 write, 15 out
    usage = Usage(
        input_tokens=1_000_000,
        cached_input_tokens=600_000,
        cache_write_input_tokens=300_000,
        output_tokens=100_000,
    )
    # 100k plain at 3, 600k hits at 0.30, 300k writes at 3.75, 100k out at 15.
    assert price.cost(usage) == pytest.approx(0.3 + 0.18 + 1.125 + 1.5)


def test_cache_rates_default_to_input():
    price = Price(input=2.0, output=4.0)
    usage = Usage(input_tokens=500_000, cached_input_tokens=250_000, output_tokens=250_000)
    assert price.cost(usage) == pytest.approx(1.0 + 1.0)


def test_a_request_spend_says_when_its_cost_is_unknown():
    usage = Usage(input_tokens=1000, cached_input_tokens=400, output_tokens=10)
    priced = request_spend(usage, Price(input=1.0, output=2.0, cached_input=0.1))
    assert priced.cost == pytest.approx((600 * 1.0 + 400 * 0.1 + 10 * 2.0) / 1e6)
    assert priced == Spend(
        input_tokens=1000,
        output_tokens=10,
        cached_input_tokens=400,
        cost=priced.cost,
        requests=1,
    )
    unpriced = request_spend(usage, None)
    assert unpriced.cost == 0
    assert unpriced.unpriced == 1
    assert not unpriced.cost_known
    total = priced + unpriced
    assert total.requests == 2
    assert total.unpriced == 1


def test_format_cost_never_shows_an_unknown_cost_as_zero():
    assert format_cost(None) == "unknown"
    assert format_cost(0.0, 2, requests=2) == "unknown"
    assert format_cost(0.01234) == "$0.0123"
    assert format_cost(12.3456) == "$12.35"
    assert format_cost(0.5, 1, requests=3) == "$0.5000 + unknown (1 unpriced request)"
    assert format_cost(0.0) == "$0.0000"


def test_a_log_is_priced_by_the_model_of_each_request():
    from tether.budgets import log_spend
    from tether.store import AssistantMessage, CompactionEvent, DescriptorEvent, UserMessage

    events = [
        UserMessage(message_id="m1", content="hi"),
        AssistantMessage(content="a", usage=Usage(input_tokens=1_000_000, output_tokens=0)),
        # The session recorded no model before: it ran its agent's profile model.
        DescriptorEvent(kind="model", data={"old": None, "new": "openai:gpt-4o-mini"}),
        AssistantMessage(content="b", usage=Usage(input_tokens=1_000_000, output_tokens=0)),
        CompactionEvent(summary="s", usage=Usage(input_tokens=1_000_000, output_tokens=0)),
        DescriptorEvent(kind="model", data={"old": "openai:gpt-4o-mini", "new": "local:x"}),
        AssistantMessage(content="c", usage=Usage(input_tokens=10, output_tokens=1)),
    ]
    spent = log_spend(events, model="local:x", default="openai:gpt-4o")
    assert spent.models == ("openai:gpt-4o", "openai:gpt-4o-mini", "local:x")
    assert spent.unpriced_models == ("local:x",)
    assert spent.spend.requests == 4
    assert spent.spend.unpriced == 1
    assert spent.spend.cost == pytest.approx(2.5 + 0.15 + 0.15)
    assert spent.spend.input_tokens == 3_000_010

    # A remote agent's answer counts what it reported; only a profile prices it.
    remote = AssistantMessage(
        content="r", usage=Usage(), remote_usage=Usage(input_tokens=2_000_000, output_tokens=0)
    )
    prices = {"a2a:researcher": Price(input=1.0, output=1.0)}
    assert log_spend([remote], model="a2a:researcher").spend.unpriced == 1
    priced = log_spend([remote], model="a2a:researcher", prices=prices).spend
    assert priced.cost == pytest.approx(2.0)
    assert priced.input_tokens == 2_000_000
