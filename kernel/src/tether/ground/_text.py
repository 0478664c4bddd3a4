"""Small text files a profile or a model script is read from, and the TOML in them.

:func:`read_text_file` reads a regular UTF-8 file (never a FIFO or a device; an optional byte
order mark; at most :data:`MAX_TEXT_BYTES`), :func:`parse_toml_text` parses TOML with every
failure located (at most :data:`MAX_NESTING` levels of nesting), and :func:`format_loc` writes a
key path the way TOML does. Both readers raise :class:`TextFileError`, for the caller to give
its own error code: a profile's is a ``ProfileError``, a script's a ``ModelError``.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, cast

from ._files import FileRefused, describe_file_type, read_regular_file

__all__ = (
    "MAX_NESTING",
    "MAX_TEXT_BYTES",
    "TextFileError",
    "file_problem",
    "format_loc",
    "parse_toml_text",
    "read_text_file",
    "too_deep",
)

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(part: str) -> str:
    return part if _BARE_KEY.match(part) else '"' + part.replace('"', '\\"') + '"'


def format_loc(prefix: tuple[str, ...], loc: tuple[int | str, ...]) -> str:
    """Render a key path the way TOML writes it: ``[agent.main.plugin.x] roots[0]``."""
    table = ".".join(_toml_key(p) for p in prefix)
    rest = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for "the key itself is invalid"
            continue
        if isinstance(part, int):
            rest += f"[{part}]"
        else:
            rest += f".{_toml_key(part)}" if rest else _toml_key(part)
    if table and rest:
        return f"[{table}] {rest}"
    return f"[{table}]" if table else rest


#: How deeply tables and arrays may nest in a profile or a model script. Far more than any
#: profile needs, and far less than what would exhaust Python's recursion limit in the code
#: that reads them (a document nested thousands deep is an attack or a mistake).
MAX_NESTING = 100


#: The largest profile or model script read, in bytes: a bigger file is the wrong file (a log,
#: a disk image), and reading it whole would take the memory it takes.
MAX_TEXT_BYTES = 16 * 2**20


class TextFileError(Exception):
    """Why a profile, script or other text file cannot be read (see :func:`read_text_file`).

    ``reason`` completes a sentence that starts with the file's role (``profile is not UTF-8
    text: ...``); ``where`` is a place in the file (``line 3, column 9``) when known;
    ``missing`` is true when nothing exists at the path; ``folder`` when it is a folder.
    """

    def __init__(
        self,
        path: Path,
        reason: str,
        *,
        where: str | None = None,
        remedy: str | None = None,
        missing: bool = False,
        folder: bool = False,
    ) -> None:
        self.path = path
        self.reason = reason
        self.where = where
        self.remedy = remedy
        self.missing = missing
        self.folder = folder
        super().__init__(f"{path}: {reason}")


def file_problem(path: Path) -> TextFileError | None:
    """Why ``path`` is not a regular file that can be opened, or ``None`` when it is.

    A FIFO or a device is refused before it is opened: reading it would block or never end.
    """
    try:
        mode = path.stat().st_mode  # follows symlinks
    except FileNotFoundError:
        if path.is_symlink():
            target = os.readlink(path)
            return TextFileError(
                path, f"is a symbolic link to {target}, which does not exist", missing=True
            )
        return TextFileError(path, "does not exist", missing=True)
    except NotADirectoryError:
        return TextFileError(path, "does not exist (a folder above it is a file)", missing=True)
    except OSError as exc:
        return TextFileError(path, f"cannot be reached: {exc.strerror or exc}")
    except ValueError as exc:  # a NUL character in the path
        return TextFileError(path, f"is not a usable path: {exc}")
    if stat.S_ISDIR(mode):
        return TextFileError(path, "is a folder, not a file", folder=True)
    if not stat.S_ISREG(mode):
        return TextFileError(
            path,
            f"is {describe_file_type(mode)}, not a regular file",
            remedy="point it at a regular file (a FIFO or device would block or never end)",
        )
    return None


def read_text_file(path: Path) -> str:
    """The text of the regular UTF-8 file ``path``, without a leading byte order mark (as
    some editors write); :class:`TextFileError` when it is missing, not a regular file,
    unreadable or not UTF-8 (naming the first bad byte's line and column)."""
    problem = file_problem(path)
    if problem is not None:
        raise problem
    try:
        _status, data = read_regular_file(path, MAX_TEXT_BYTES)
    except FileRefused as exc:
        if exc.reason == "size":
            raise TextFileError(
                path,
                f"is larger than {MAX_TEXT_BYTES // 2**20} MiB",
                remedy="point it at the right file (profiles and scripts are small)",
            ) from None
        if exc.reason == "loop":
            raise TextFileError(
                path, "is a symlink loop", remedy="fix or remove the link"
            ) from None
        raise TextFileError(  # swapped for something else since file_problem looked
            path,
            f"is {describe_file_type(exc.mode)}, not a regular file",
            remedy="point it at a regular file (a FIFO or device would block or never end)",
        ) from None
    except OSError as exc:
        raise TextFileError(
            path,
            f"cannot be read: {exc.strerror or exc}",
            remedy="make it readable by this user",
        ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
        offset = exc.start + start
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        raise TextFileError(
            path,
            f"is not UTF-8 text: byte 0x{data[offset]:02x} cannot start or continue a character",
            where=f"line {line}, column {column}",
            remedy="save the file as UTF-8",
        ) from None


_TOML_POSITION = re.compile(r"^(?P<reason>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)$")
_TOML_AT_END = re.compile(r"^(?P<reason>.*?)\s*\(at end of document\)$")


def parse_toml_text(path: Path, text: str) -> dict[str, Any]:
    """``tomllib.loads(text)``, with every failure a :class:`TextFileError` that says where:
    a syntax error, an integer too long to convert, nesting deeper than :data:`MAX_NESTING`."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        reason = str(exc)
        found = _TOML_POSITION.match(reason)
        if found:
            where = f"line {found['line']}, column {found['col']}"
            reason = found["reason"]
        elif at_end := _TOML_AT_END.match(reason):
            lines = text.count("\n") + (0 if text.endswith("\n") else 1)
            where = f"end of file, after line {lines}"
            reason = at_end["reason"]
        else:
            where = "position unknown"
        raise TextFileError(
            path, f"is not valid TOML: {reason}", where=where, remedy="fix the TOML syntax there"
        ) from None
    except RecursionError:
        raise _too_deep(path, None) from None
    except ValueError as exc:  # an integer with more digits than Python converts
        raise TextFileError(
            path,
            f"is not valid TOML here: {str(exc).split(';')[0]}",
            remedy="shorten the number",
        ) from None
    deep = too_deep(document)
    if deep is not None:
        raise _too_deep(path, deep)
    return document


def too_deep(document: object, limit: int = MAX_NESTING) -> tuple[str | int, ...] | None:
    """The key path of a value nested more than ``limit`` tables or arrays deep in a parsed
    document, or ``None``; iterative, so a deep document cannot exhaust the stack here."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(document, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > limit:
            return path
        if isinstance(value, dict):
            table = cast(dict[object, object], value)
            stack.extend((item, (*path, str(key))) for key, item in table.items())
        elif isinstance(value, list):
            items = cast(list[object], value)
            stack.extend((item, (*path, index)) for index, item in enumerate(items))
    return None


def _too_deep(path: Path, key: tuple[str | int, ...] | None) -> TextFileError:
    shown = format_loc((), key[:6]) + " ..." if key else None
    return TextFileError(
        path,
        f"nests tables or arrays more than {MAX_NESTING} levels deep",
        where=shown,
        remedy="flatten the structure",
    )
