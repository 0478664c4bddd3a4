"""Real processes for the PostgreSQL store tests (the store tests' ``store_worker.py``)."""

from __future__ import annotations

from tests.store.conftest import spawn

__all__ = ("spawn",)
