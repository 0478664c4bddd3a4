"""tether-postgres: a session store on PostgreSQL, shared by every process and host.

A profile selects it with ``[tether] store = "postgresql://USER@HOST:PORT/DATABASE"`` (or
``postgres://...``, or a libpq keyword string after ``postgresql:``) and ``"postgres"`` in
``[tether] plugins``. See docs/scale-out.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tether
from tether.store import StoreProvider

from ._schema import SCHEMA_VERSION
from ._store import DEFAULT_POOL_SIZE, PostgresStore, describe

__all__ = ("DEFAULT_POOL_SIZE", "SCHEMA_VERSION", "PostgresStore", "describe", "open_postgres")


def open_postgres(rest: str, base: Path) -> PostgresStore:
    """The store for ``postgresql:REST``: ``REST`` is the URL after its scheme (``//host/db``)
    or a libpq keyword string (``host=... dbname=...``)."""
    return PostgresStore("postgresql:" + rest if rest.startswith("//") else rest)


@tether.hookimpl
def tether_store_providers() -> Iterable[StoreProvider]:
    return [
        StoreProvider(
            "postgresql", open_postgres, "PostgreSQL, shared by every host", argument="//URL"
        ),
        StoreProvider(
            "postgres", open_postgres, "PostgreSQL (same as postgresql:)", argument="//URL"
        ),
    ]
