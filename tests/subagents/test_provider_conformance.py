"""spawn, fork and the LimitedProvider test double pass the provider conformance suite."""

from __future__ import annotations

import pytest

from tether.subagents import SubagentCapabilities
from tether.testing.subagent_provider_conformance import SubagentProviderConformance
from tether.testing.subagents import LimitedProvider
from tether_fork import ForkProvider
from tether_spawn import SpawnProvider


class TestSpawnProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return SpawnProvider()


class TestForkProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return ForkProvider()


class TestLimitedProvider(SubagentProviderConformance):
    @pytest.fixture
    def provider(self):
        return LimitedProvider(capabilities=SubagentCapabilities(depth_limit=True))
