"""Fixtures of the caller tests: the function models' roles, a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.store import SQLiteStore

from . import brains


@pytest.fixture(autouse=True)
def roles() -> Iterator[dict[str, Any]]:
    brains.ROLES.clear()
    brains.REQUESTS.clear()
    yield brains.ROLES
    brains.ROLES.clear()
    brains.REQUESTS.clear()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()
