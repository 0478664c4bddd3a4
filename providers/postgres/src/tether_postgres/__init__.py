"""tether-postgres: a session store on PostgreSQL, shared by every process and host.

A profile selects it with ``[tether] store = "postgresql://USER@HOST:PORT/DATABASE"`` (or
``postgres://...``, or a libpq keyword string after ``postgresql:``) and ``"postgres"`` in
``[tether] plugins``. See docs/scale-out.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict

import tether
from tether.errors import ErrorCode, StoreError
from tether.store import (
    OptionReader,
    StoreProvider,
    duration,
    read_store_options,
    split_store_options,
)

from . import _store
from ._schema import SCHEMA_VERSION
from ._store import DEFAULT_POOL_SIZE, PostgresStore, describe

__all__ = (
    "DEFAULT_POOL_SIZE",
    "SCHEMA_VERSION",
    "STORE_OPTIONS",
    "PostgresStore",
    "check_postgres",
    "describe",
    "open_postgres",
    "postgres_options",
)


#: The options tether reads from a ``postgresql://...?KEY=VALUE`` spec (the others are libpq's):
#: each maps to the ``PostgresStore`` argument it sets.
STORE_OPTIONS = {
    "connect_timeout": "connect_timeout",
    "statement_timeout": "statement_timeout",
    "busy_timeout": "busy_timeout",
    "idle_in_transaction_session_timeout": "idle_in_transaction_timeout",
}
#: Names a user may reach for, and the option that means it.
_SAME_AS = {"lock_timeout": "busy_timeout", "idle_timeout": "idle_in_transaction_session_timeout"}


def _connect_timeout(key: str, text: str) -> float:
    # A bare number is whole seconds, as libpq reads its own connect_timeout.
    return float(text) if text.isdigit() and int(text) > 0 else duration()(key, text)


_READERS: dict[str, OptionReader[object]] = {
    "connect_timeout": _connect_timeout,
    "statement_timeout": duration(),
    "busy_timeout": duration(zero=True),
    "idle_in_transaction_session_timeout": duration(),
}
_KEYWORD = re.compile(r"(?:^|\s)(" + "|".join([*STORE_OPTIONS, *_SAME_AS]) + r")\s*=\s*(\S*)")


def postgres_options(rest: str) -> tuple[str, dict[str, Any]]:
    """The libpq connection string of ``postgresql:REST`` (tether's options taken out) and
    the ``PostgresStore`` arguments those options set. ``REST`` is the URL after its scheme
    (``//host/db?statement_timeout=30s&sslmode=require``) or a libpq keyword string
    (``host=db dbname=tether statement_timeout=30s``)."""
    found: dict[str, str] = {}
    if rest.startswith("//"):
        url, mark, query = rest.partition("?")
        kept: list[str] = []
        for pair in query.split("&") if mark else []:
            key = unquote(pair.partition("=")[0]).strip()
            if key in STORE_OPTIONS or key in _SAME_AS:
                if key in found:
                    raise _twice(key)
                found.update(split_store_options("?" + pair, store="postgresql")[1])
            elif pair:
                kept.append(pair)
        conninfo = "postgresql:" + url + ("?" + "&".join(kept) if kept else "")
    else:

        def take(match: re.Match[str]) -> str:
            key, value = match.group(1), match.group(2)
            if key in found:
                raise _twice(key)
            found[key] = value
            return ""

        conninfo = _KEYWORD.sub(take, rest)
    for key in found:
        if key in _SAME_AS:
            raise StoreError(
                ErrorCode.STORE_SPEC_INVALID,
                f'unknown postgresql store option "{key}"',
                key="[tether] store",
                remedy=f"write {_SAME_AS[key]}=..., the name it has for every store",
            )
    values = read_store_options(found, _READERS, store="postgresql")
    return conninfo, {STORE_OPTIONS[key]: value for key, value in values.items()}


def _twice(key: str) -> StoreError:
    return StoreError(
        ErrorCode.STORE_SPEC_INVALID,
        f'the postgresql store option "{key}" is given twice',
        key="[tether] store",
        remedy=f"keep one {key}=VALUE",
    )


def check_postgres(rest: str) -> None:
    """At load: the options read and the connection string readable by libpq (an unknown
    parameter too); connects to nothing."""
    conninfo, _ = postgres_options(rest)
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise _store.unreadable(exc) from None


def open_postgres(rest: str, base: Path) -> PostgresStore:
    """The store for ``postgresql:REST``: ``REST`` is the URL after its scheme (``//host/db``)
    or a libpq keyword string (``host=... dbname=...``), with tether's options
    (:data:`STORE_OPTIONS`) among its parameters."""
    conninfo, options = postgres_options(rest)
    return PostgresStore(conninfo, **options)


@tether.hookimpl
def tether_store_providers() -> Iterable[StoreProvider]:
    return [
        StoreProvider(
            "postgresql",
            open_postgres,
            "PostgreSQL, shared by every host",
            argument="//URL",
            check=check_postgres,
        ),
        StoreProvider(
            "postgres",
            open_postgres,
            "PostgreSQL (same as postgresql:)",
            argument="//URL",
            check=check_postgres,
        ),
    ]
