"""Reading a skill file safely: regular files only, never more than a cap.

A skill root may come with a cloned repository, so its files are untrusted: a ``SKILL.md`` that
is a FIFO would block an ``open()`` until some writer appears, ``/dev/zero`` (or a link to it)
never ends, a multi-gigabyte file would be read whole. Every reader of skill files (the
file-system provider, the strict validator) goes through :func:`read_skill_file`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._files import FileRefused, describe_file_type, read_regular_file

__all__ = ("SKILL_FILE_MAX_BYTES", "SkillFileRefused", "describe_file_type", "read_skill_file")

#: The default cap on one skill file (``SKILL.md`` or a flat ``NAME.md``): 1 MiB, twenty times
#: the largest skill of the public collections tether is tested with.
SKILL_FILE_MAX_BYTES = 1024 * 1024


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
    try:
        return read_regular_file(path, max_bytes)
    except FileRefused as exc:
        if exc.reason == "special":
            raise _refuse_special(exc.path, exc.mode) from None
        if exc.reason == "size":
            raise _refuse_size(exc.path, exc.size, max_bytes, setting) from None
        raise SkillFileRefused(
            exc.path,
            "it is a symlink loop (a link that leads back to itself)",
            "fix or remove the link",
        ) from None
