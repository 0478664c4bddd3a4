"""spawn, fork and the LimitedProvider test double pass the provider conformance suite."""

from __future__ import annotations

import pytest

import tether_fork
import tether_spawn
from tether.subagents import SubagentCapabilities
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
        (offer,) = tether_spawn.tether_offers()
        return offer


class TestForkProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return ForkProvider()

    @pytest.fixture
    def offer(self):
        (offer,) = tether_fork.tether_offers()
        return offer


class TestLimitedProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return LimitedProvider(capabilities=SubagentCapabilities(depth_limit=True))

    @pytest.fixture
    def offer(self, provider):
        (offer,) = provider.tether_offers()
        return offer
