"""Files the store tests need that a plain write cannot make."""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

#: Linux ``FS_IOC_GETFLAGS`` / ``FS_IOC_SETFLAGS`` and the immutable attribute (``chattr +i``).
_GETFLAGS, _SETFLAGS, _IMMUTABLE = 0x80086601, 0x40086602, 0x10


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make ``path`` read-only for this process, even as root (which ignores file modes): the
    immutable attribute when running as root, the file mode otherwise."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        try:
            yield
        finally:
            path.chmod(0o644)
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, _GETFLAGS, b"\0" * 4))[0]
        try:
            fcntl.ioctl(fd, _SETFLAGS, struct.pack("i", flags | _IMMUTABLE))
        except OSError as exc:
            pytest.skip(f"cannot make a file read-only for root here: {exc}")
        try:
            yield
        finally:
            fcntl.ioctl(fd, _SETFLAGS, struct.pack("i", flags))
    finally:
        os.close(fd)
