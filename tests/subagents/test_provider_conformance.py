"""spawn, fork and the LimitedProvider test double pass the provider conformance suite."""

from __future__ import annotations

import pytest

from tether.loading import SUBAGENT_PROVIDER, Offer
from tether.subagents import SubagentCapabilities, declared_capabilities
from tether.testing.subagent_provider_conformance import SubagentProviderConformance
from tether.testing.subagents import LimitedProvider
from tether_fork import ForkProvider
from tether_spawn import SpawnProvider


class TestSpawnProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return SpawnProvider()

    @pytest.fixture
    def offer(self):
        # Derived from what the provider declares, as the kernel derives it at load.
        return Offer(kind=SUBAGENT_PROVIDER, capabilities=declared_capabilities(SpawnProvider()))


class TestForkProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return ForkProvider()

    @pytest.fixture
    def offer(self):
        return Offer(kind=SUBAGENT_PROVIDER, capabilities=declared_capabilities(ForkProvider()))


class TestLimitedProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return LimitedProvider(capabilities=SubagentCapabilities(depth_limit=True))

    @pytest.fixture
    def offer(self, provider):
        (offer,) = provider.tether_offers()
        return offer
