"""Reading a file from outside safely: regular files only, never more than a cap.

Profiles, scripts, instructions and skills may come with a cloned repository, so tether treats
every such path as hostile until read: a FIFO would block an ``open()`` until some writer
appears, ``/dev/zero`` (or a link to it) never ends, a multi-gigabyte file would be read whole.
:func:`read_regular_file` is the one reader behind ``tether.ground.read_text_file`` and
``tether.skills.read_skill_file``; each turns :class:`FileRefused` into its own message.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Literal

__all__ = ("FileRefused", "describe_file_type", "read_regular_file")

# Opening never blocks (a FIFO swapped in after the check), never adopts a terminal, and the
# descriptor does not leak into a subprocess started meanwhile.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def describe_file_type(mode: int) -> str:
    """``"a FIFO (named pipe)"``, ``"a character device"``, ``"a folder"``... for a
    ``st_mode`` that is not a regular file's."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"


class FileRefused(Exception):
    """A file that exists but is not read: permanent until someone changes it.

    ``reason`` is ``special`` (not a regular file: ``mode`` says what it is), ``size`` (over
    the cap: ``size`` is its size, or ``None`` when it grew past the cap while it was read) or
    ``loop`` (a symlink loop on the way).
    """

    def __init__(
        self,
        path: str,
        reason: Literal["special", "size", "loop"],
        *,
        mode: int = 0,
        size: int | None = None,
    ) -> None:
        self.path = path
        self.reason = reason
        self.mode = mode
        self.size = size
        super().__init__(f"{path}: {reason}")


def read_regular_file(path: str | Path, max_bytes: int) -> tuple[os.stat_result, bytes]:
    """``(status, content)`` of the regular file ``path`` (symlinks followed) of at most
    ``max_bytes`` bytes. ``status`` is the ``fstat`` of the file actually read.

    :raises FileRefused: not a regular file, over the cap, or a symlink loop.
    :raises FileNotFoundError: also ``NotADirectoryError``: nothing is there.
    :raises OSError: anything else (permissions, I/O errors): maybe transient.
    :raises ValueError: a NUL character in the path.
    """
    name = os.fspath(path)
    try:
        status = os.stat(name)  # stat never blocks, whatever the file is
        if not stat.S_ISREG(status.st_mode):
            raise FileRefused(name, "special", mode=status.st_mode)
        if status.st_size > max_bytes:
            raise FileRefused(name, "size", size=status.st_size)
        descriptor = os.open(name, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused(name, "loop") from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):  # swapped for something else since the stat
            raise FileRefused(name, "special", mode=status.st_mode)
        chunks: list[bytes] = []
        remaining = max_bytes + 1  # one byte more tells a file that grew past the cap
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            raise FileRefused(name, "size")
        return status, b"".join(chunks)
    finally:
        os.close(descriptor)
