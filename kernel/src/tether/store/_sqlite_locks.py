"""Waiting for a SQLite file another program holds locked, without stalling the event loop.

SQLite's own busy handler sleeps inside the C call, on the calling thread: with the default
5-second timeout, one locked file freezes every task of the process. The connection therefore
waits only briefly (``SQLITE_BUSY_MS``); past that, the work is retried from scratch after an
``anyio.sleep`` with a growing delay, until the store's ``busy_timeout`` is spent
(``STORE_BUSY``). Each attempt is one statement or one ``BEGIN IMMEDIATE`` transaction that
rolls back on any error, so a retried write never leaves half of itself behind. Any other
failure of the file (damaged, read-only, disk full) is raised at once as the ``StoreError``
that explains it (``_sqlite_faults``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import anyio

from ..errors import ErrorCode, StoreError
from ._sqlite_faults import store_failure

__all__ = (
    "DEFAULT_BUSY_TIMEOUT",
    "SQLITE_BUSY_MS",
    "Transaction",
    "locked",
    "raise_failure",
    "retry",
    "retry_blocking",
    "waitable",
)

T = TypeVar("T")

#: Seconds a store waits for a file another program keeps locked before ``STORE_BUSY``.
DEFAULT_BUSY_TIMEOUT = 30.0
#: Milliseconds SQLite itself waits for a lock inside one call (blocking the thread).
SQLITE_BUSY_MS = 20
#: The first and the longest pause between two attempts, in seconds.
FIRST_BACKOFF = 0.002
MAX_BACKOFF = 0.1

_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED (extended codes share the low byte)


def locked(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says another connection holds a lock (worth waiting for)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def waitable(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is a lock another connection holds, which is worth waiting for."""
    return isinstance(exc, sqlite3.OperationalError) and locked(exc)


def raise_failure(exc: sqlite3.Error, path: Path) -> NoReturn:
    """Raise the :class:`StoreError` that explains ``exc`` (a damaged or unwritable file), or
    ``exc`` itself when it is a bug in the caller. Called inside ``except``."""
    failure = store_failure(exc, path)
    if failure is None:
        raise exc
    raise failure from exc


def store_busy(path: Path, waited: float) -> StoreError:
    """``STORE_BUSY``: the file stayed locked for ``waited`` seconds."""
    return StoreError(
        ErrorCode.STORE_BUSY,
        f"session store stayed locked by another program for {waited:g} s",
        file=path,
        remedy="find the program that holds the file locked (`fuser FILE` lists them) and let "
        "it finish, then try again (from Python, a store opened with a longer busy_timeout "
        "waits longer); nothing was changed",
    )


async def retry(work: Callable[[], T], *, path: Path, budget: float, tried: bool = False) -> T:
    """``work()``, again after a pause each time the file is locked, for ``budget`` seconds
    (``tried``: the caller's own first attempt found it locked)."""
    if not tried:
        try:
            return work()
        except sqlite3.Error as exc:
            if not waitable(exc):
                raise_failure(exc, path)
    deadline = time.monotonic() + budget
    delay = FIRST_BACKOFF
    while True:
        await anyio.sleep(delay)
        try:
            return work()
        except sqlite3.Error as exc:
            if not waitable(exc):
                raise_failure(exc, path)
            if time.monotonic() >= deadline:
                raise store_busy(path, budget) from exc
        delay = min(delay * 2, MAX_BACKOFF)


def retry_blocking(work: Callable[[], T], *, path: Path, budget: float) -> T:
    """``retry`` for code that cannot await (opening a store): sleeps on the thread."""
    deadline = time.monotonic() + budget
    delay = FIRST_BACKOFF
    while True:
        try:
            return work()
        except sqlite3.Error as exc:
            if not waitable(exc):
                raise_failure(exc, path)
            if time.monotonic() >= deadline:
                raise store_busy(path, budget) from exc
        time.sleep(delay)
        delay = min(delay * 2, MAX_BACKOFF)


class Transaction:
    """``with Transaction(db):`` one ``BEGIN IMMEDIATE`` write transaction: it takes the write
    lock first, so its reads stay true until it commits; any error rolls it back whole."""

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if kind is None:
            try:
                self._db.execute("COMMIT")
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        # SQLite rolls some failures back itself; a second ROLLBACK would hide the first error.
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
