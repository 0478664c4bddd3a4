"""Shared helpers for the root test suite; tether's own fixtures come from tether.testing."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# The fuzz tests run on a busy 2-core machine: no per-example deadline (a slow example is not a
# bug), no example database left in the checkout. `HYPOTHESIS_PROFILE=long` searches harder.
settings.register_profile(
    "suite",
    deadline=None,
    database=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("long", parent=settings.get_profile("suite"), max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
