"""What a SQLite file that cannot be used means for the person running tether.

SQLite reports a damaged file, a read-only one or a full disk as exceptions named after its C
result codes (``sqlite3.DatabaseError: file is not a database``). The store turns each into a
:class:`StoreError` that names the file and says what to do: ``STORE_CORRUPT`` when the file is
not a tether session store it can read (not a database, damaged, another program's database),
``STORE_UNAVAILABLE`` when it cannot be opened or written (its folder is a file, it is a folder
itself, it is read-only, the disk is full or failing). A lock is not a failure: the store waits
for it (``_sqlite_locks``) and only then reports ``STORE_BUSY``.

Errors that say the code itself is wrong (a ``sqlite3.ProgrammingError``, an
``IntegrityError`` a caller did not expect, a syntax error in a statement) are left alone: they
are bugs, and the command line reports them as such.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from ..errors import ErrorCode, StoreError
from ..ground import describe_file_type

__all__ = ("check_location", "foreign", "location_failure", "store_failure")

# SQLite's primary result codes (the low byte of an extended code).
_PERM = 3
_READONLY = 8
_IOERR = 10
_CORRUPT = 11
_FULL = 13
_CANTOPEN = 14
_AUTH = 23
_NOTADB = 26

#: Texts of SQLITE_ERROR that mean the file's tables are not the ones tether created.
_SCHEMA_TEXTS = ("no such table", "no such column", "already exists")

_ELSEWHERE = "point the profile's [tether] store at another file"


def store_failure(exc: sqlite3.Error, path: Path) -> StoreError | None:
    """The :class:`StoreError` that explains ``exc``, or ``None`` when it is a bug in the caller
    (or a lock, which the caller waits for)."""
    if isinstance(exc, sqlite3.ProgrammingError | sqlite3.IntegrityError):
        return None
    text = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        if "Could not decode to UTF-8" in text:  # raised by Python's module, not by SQLite
            return _corrupt(
                path,
                f"the session store holds text that is not UTF-8: {text}",
                "another program wrote to it; restore it from a backup or " + _ELSEWHERE,
            )
        return None
    primary = code & 0xFF
    if primary == _NOTADB:
        return _corrupt(
            path,
            f"the session store is not a SQLite database ({text})",
            f"{_ELSEWHERE}, or move this one away (a new, empty store is then created in its "
            "place); if it held sessions, restore it from a backup",
        )
    if primary == _CORRUPT:
        return _corrupt(
            path,
            f"the session store is damaged ({text})",
            "restore it from a backup, or move it away to start a new, empty store "
            "(`sqlite3 FILE .recover` may save what it holds); nothing was changed",
        )
    if primary == 1 and any(part in text for part in _SCHEMA_TEXTS):
        return _corrupt(
            path,
            f"the session store does not have tether's tables ({text})",
            f"another program wrote it, or it was damaged; {_ELSEWHERE}, or restore it from "
            "a backup",
        )
    if primary == _READONLY:
        return _unavailable(
            path,
            f"the session store is read-only ({text})",
            "make the file and its folder writable by this user (SQLite also writes FILE-wal "
            f"and FILE-shm next to it), or {_ELSEWHERE}; nothing was written",
        )
    if primary in (_CANTOPEN, _PERM, _AUTH):
        return _unavailable(
            path,
            f"the session store cannot be opened ({text})",
            "check that this user may read and write the file and its folder (SQLite also "
            f"creates FILE-wal and FILE-shm next to it), or {_ELSEWHERE}",
        )
    if primary == _FULL:
        return _unavailable(
            path,
            f"the disk that holds the session store is full ({text})",
            "free some space and run the command again; nothing was written",
        )
    if primary == _IOERR:
        return _unavailable(
            path,
            f"reading or writing the session store failed ({text})",
            "check the disk and the file system that hold it (`dmesg` shows device errors), "
            f"or {_ELSEWHERE}; the last write was rolled back",
        )
    return None


def check_location(path: Path) -> None:
    """Refuse a store path that cannot be a SQLite file before SQLite touches it: a folder, a
    FIFO or a device (which SQLite would block on or write beside), or a path below a file.
    Creates the missing folders above it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise _below_a_file(path) from None
    except OSError as exc:
        raise location_failure(exc, path) from exc
    except ValueError as exc:  # a NUL character: no file system takes it
        raise _unavailable(
            path, f"the session store path cannot name a file ({exc})", _ELSEWHERE
        ) from None
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise _unavailable(
                path,
                "the session store is a folder, not a file",
                f"point the profile's [tether] store at a file, e.g. sqlite:{path}/sessions.db",
            )
        if not stat.S_ISREG(mode):
            raise _unavailable(
                path,
                f"the session store is {describe_file_type(mode)}, not a regular file",
                _ELSEWHERE,
            )
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _below_a_file(path) from None
    except OSError as exc:
        raise location_failure(exc, path) from exc


def location_failure(exc: OSError, path: Path) -> StoreError:
    """``STORE_UNAVAILABLE`` for an operating-system error met while reaching the file."""
    reason = exc.strerror or str(exc)
    return _unavailable(
        path,
        f"the session store or its folder cannot be created or opened ({reason})",
        "check that this user may create and write the file and its folder, or " + _ELSEWHERE,
    )


def foreign(path: Path, tables: list[str]) -> StoreError:
    """``STORE_CORRUPT``: a SQLite database that another program created (no tether schema)."""
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    return _corrupt(
        path,
        f"the session store is another program's SQLite database (tables: {shown}), "
        "not a tether session store",
        f"{_ELSEWHERE}; tether does not add its tables to a database it did not create",
    )


def _below_a_file(path: Path) -> StoreError:
    blocker = next(
        (p for p in path.parents if p.exists() and not p.is_dir()),
        path.parent,
    )
    return _unavailable(
        path,
        f"the session store cannot be created: {blocker} is a file, not a folder",
        f"{_ELSEWHERE}, or move {blocker} away",
    )


def _corrupt(path: Path, message: str, remedy: str) -> StoreError:
    return StoreError(ErrorCode.STORE_CORRUPT, message, file=_shown(path), remedy=remedy)


def _unavailable(path: Path, message: str, remedy: str) -> StoreError:
    return StoreError(ErrorCode.STORE_UNAVAILABLE, message, file=_shown(path), remedy=remedy)


def _shown(path: Path) -> Path:
    return Path(os.path.abspath(path))
