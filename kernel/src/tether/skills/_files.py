"""Reading a skill file safely: regular files only, never more than a cap.

A skill root may come with a cloned repository, so its files are untrusted: a ``SKILL.md`` that
is a FIFO would block an ``open()`` until some writer appears, ``/dev/zero`` (or a link to it)
never ends, a multi-gigabyte file would be read whole. Every reader of skill files (the
file-system provider, the strict validator) goes through :func:`read_skill_file`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ("SKILL_FILE_MAX_BYTES", "SkillFileRefused", "describe_file_type", "read_skill_file")

#: The default cap on one skill file (``SKILL.md`` or a flat ``NAME.md``): 1 MiB, twenty times
#: the largest skill of the public collections tether is tested with.
SKILL_FILE_MAX_BYTES = 1024 * 1024

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


class SkillFileRefused(Exception):
    """A skill file that exists but is not read: not a regular file, larger than the cap, or
    a symlink loop. Permanent until someone changes the file: the entry is skipped, and the
    listing around it stays complete.

    ``problem`` says what is wrong ("it is a FIFO..."), ``remedy`` how to fix it.
    """

    def __init__(self, path: str, problem: str, remedy: str) -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        super().__init__(f"{path}: {problem}; {remedy}")


def describe_file_type(mode: int) -> str:
    """``"a FIFO (named pipe)"``, ``"a character device"``... for a ``st_mode`` that is not a
    regular file's."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "not a regular file"


def _refuse_special(path: str, mode: int) -> SkillFileRefused:
    kind = describe_file_type(mode)
    return SkillFileRefused(
        path,
        f"it is {kind}, not a regular file",
        "replace it with a regular file (only regular files are read as skills)",
    )


def _refuse_size(path: str, size: int | None, limit: int, setting: str | None) -> SkillFileRefused:
    if size is None:
        problem = f"it grew past the cap of {limit:,} bytes while it was read"
    else:
        problem = f"it is {size:,} bytes, over the cap of {limit:,} bytes"
    remedy = "move detail into files beside it (references/)"
    return SkillFileRefused(path, problem, f"{remedy}, or raise {setting}" if setting else remedy)


def read_skill_file(
    path: str | Path, *, max_bytes: int = SKILL_FILE_MAX_BYTES, setting: str | None = None
) -> tuple[os.stat_result, bytes]:
    """``(status, content)`` of a regular file of at most ``max_bytes`` bytes.

    ``status`` is the ``fstat`` of the file actually read. ``setting`` names where the cap is
    set, for the message of a file over it.

    :raises SkillFileRefused: not a regular file (after following symlinks), over the cap, or
        a symlink loop on the way.
    :raises FileNotFoundError: also ``NotADirectoryError``: nothing is there.
    :raises OSError: anything else (permissions, I/O errors): maybe transient.
    """
    name = os.fspath(path)
    try:
        status = os.stat(name)  # stat never blocks, whatever the file is
        if not stat.S_ISREG(status.st_mode):
            raise _refuse_special(name, status.st_mode)
        if status.st_size > max_bytes:
            raise _refuse_size(name, status.st_size, max_bytes, setting)
        descriptor = os.open(name, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SkillFileRefused(
                name,
                "it is a symlink loop (a link that leads back to itself)",
                "fix or remove the link",
            ) from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):  # swapped for something else since the stat
            raise _refuse_special(name, status.st_mode)
        chunks: list[bytes] = []
        remaining = max_bytes + 1  # one byte more tells a file that grew past the cap
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            raise _refuse_size(name, None, max_bytes, setting)
        return status, b"".join(chunks)
    finally:
        os.close(descriptor)
