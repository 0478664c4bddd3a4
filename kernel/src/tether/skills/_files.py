"""Reading a skill file safely: regular files only, never more than a cap; and a skill's
bundled files, confined to the skill's folder.

A skill root may come with a cloned repository, so its files are untrusted: a ``SKILL.md`` that
is a FIFO would block an ``open()`` until some writer appears, ``/dev/zero`` (or a link to it)
never ends, a multi-gigabyte file would be read whole. Every reader of skill files (the
file-system provider, the strict validator) goes through :func:`read_skill_file`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..ground import FileRefused, describe_file_type, read_regular_file

__all__ = (
    "SKILL_FILE_MAX_BYTES",
    "SkillFileRefused",
    "SkillFileTooLarge",
    "bundled_path",
    "describe_file_type",
    "read_bundled_file",
    "read_skill_file",
)

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


class SkillFileTooLarge(SkillFileRefused):
    """A file over the cap: ``size`` is its size in bytes (``None`` when it grew past the cap
    while it was read), ``limit`` the cap."""

    def __init__(
        self, path: str, problem: str, remedy: str, *, size: int | None, limit: int
    ) -> None:
        super().__init__(path, problem, remedy)
        self.size = size
        self.limit = limit


def _refuse_special(path: str, mode: int) -> SkillFileRefused:
    kind = describe_file_type(mode)
    return SkillFileRefused(
        path,
        f"it is {kind}, not a regular file",
        "replace it with a regular file (only regular files are read as skills)",
    )


def _refuse_size(path: str, size: int | None, limit: int, setting: str | None) -> SkillFileRefused:
    problem = _size_problem(size, limit)
    remedy = "move detail into files beside it (references/)"
    remedy = f"{remedy}, or raise {setting}" if setting else remedy
    return SkillFileTooLarge(path, problem, remedy, size=size, limit=limit)


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


_AS_LISTED = "as load_skill lists them"
_RELATIVE = f"give a path relative to the skill's folder, {_AS_LISTED}"
_DRIVE = re.compile(r"^[A-Za-z]:")


def bundled_path(path: str) -> str:
    """``path`` as a clean relative path inside a skill's folder (``./a//b`` → ``a/b``).

    Every provider gets the path in this form (:meth:`SkillRegistry.read_file` checks it first),
    so none has to tell ``..`` or an absolute path apart itself.

    :raises SkillFileRefused: empty, absolute (``/x``, ``C:/x``), with ``..``, with ``\\``
        or a control character, or naming the folder itself.
    """
    if not path:
        raise SkillFileRefused(path, "it is empty", _RELATIVE)
    if not path.isprintable():
        raise SkillFileRefused(path, "it holds a control character", _RELATIVE)
    if path.startswith("/") or _DRIVE.match(path):
        raise SkillFileRefused(path, "it is an absolute path", _RELATIVE)
    if "\\" in path:
        raise SkillFileRefused(
            path, "it uses \\ between folders", f"write / between folders, {_AS_LISTED}"
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise SkillFileRefused(
            path,
            "it leaves the skill's folder (..)",
            f"give a path inside the skill's folder, {_AS_LISTED}",
        )
    if not parts:
        raise SkillFileRefused(path, "it names the skill's folder, not a file", _RELATIVE)
    return "/".join(parts)


def read_bundled_file(folder: str | Path, path: str, *, max_bytes: int) -> tuple[str, bytes]:
    """``(real path, content)`` of the file ``path`` (relative, see :func:`bundled_path`) in a
    skill's ``folder``: for providers that keep skills in folders.

    Symlinks are followed, inside the folder or out of it, and the file they lead to must lie
    inside the folder (itself with its links resolved): a link to ``~/.ssh/id_rsa`` beside a
    ``SKILL.md`` is refused. Then the file is read as :func:`read_skill_file` reads one: a
    regular file, at most ``max_bytes``.

    :raises SkillFileRefused: a bad path, a file outside the folder, not a regular file (a
        folder, a FIFO, a device), a symlink loop; :class:`SkillFileTooLarge` over the cap.
    :raises FileNotFoundError: also ``NotADirectoryError``: nothing is there.
    :raises OSError: anything else (permissions, I/O errors).
    """
    clean = bundled_path(path)
    base = os.path.realpath(folder)
    real = os.path.realpath(os.path.join(base, *clean.split("/")))
    if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
        raise SkillFileRefused(
            clean,
            f"it leads outside the skill's folder (to {real})",
            "read only the skill's own files",
        )
    try:
        _status, data = read_regular_file(real, max_bytes)
    except FileRefused as exc:
        if exc.reason == "special":
            kind = describe_file_type(exc.mode)
            remedy = (
                f"name a file in it, {_AS_LISTED}"
                if kind == "a folder"
                else "only regular files are read"
            )
            raise SkillFileRefused(clean, f"it is {kind}, not a regular file", remedy) from None
        if exc.reason == "size":
            raise SkillFileTooLarge(
                clean,
                _size_problem(exc.size, max_bytes),
                "read a smaller file",
                size=exc.size,
                limit=max_bytes,
            ) from None
        raise SkillFileRefused(
            clean,
            "it is a symlink loop (a link that leads back to itself)",
            "fix or remove the link",
        ) from None
    return real, data


def _size_problem(size: int | None, limit: int) -> str:
    if size is None:
        return f"it grew past the cap of {limit:,} bytes while it was read"
    return f"it is {size:,} bytes, over the cap of {limit:,} bytes"
