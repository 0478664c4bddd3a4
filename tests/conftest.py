"""Shared helpers for the root test suite; tether's own fixtures come from tether.testing."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
