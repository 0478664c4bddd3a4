"""What every file tool shares: the agent's workspace, a confined path, a file opened by the
confinement's rules, and errors the model reads."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from tether.agents import Agent, ToolError
from tether.errors import WorkspaceError
from tether.ground import OPEN_FLAGS, PathRefused, check_opened, confine

__all__ = (
    "BINARY_PROBE",
    "is_binary",
    "open_file",
    "open_folder",
    "os_error",
    "quoted",
    "relative",
    "root_of",
    "target",
)

#: Bytes looked at to tell a binary file (a NUL in them) from text, as git and grep do.
BINARY_PROBE = 8192


def quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def root_of(agent: Agent) -> Path:
    """The agent's workspace folder, resolved."""
    return agent.workspace.root


def target(root: Path, path: str) -> Path:
    """``path`` confined to ``root``; a refusal is the model's ``PATH_OUTSIDE_WORKSPACE``."""
    try:
        return confine(path, root)
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None


def relative(root: Path, path: Path) -> str:
    """``path`` as the model names it: relative to the workspace (``.`` for the root)."""
    return path.relative_to(root).as_posix() or "."


def os_error(path: str, exc: OSError) -> ToolError:
    """An ``OSError`` of opening ``path``, in the model's words with what to do."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return ToolError(
            f"there is no file or folder {quoted(path)} in the workspace; list_files shows "
            "what is there"
        )
    if exc.errno == errno.ELOOP:
        return ToolError(
            f"path {quoted(path)} ends in a symbolic link that cannot be followed (it changed "
            "while it was checked)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ToolError(f"path {quoted(path)} may not be opened ({exc.strerror})")
    return ToolError(f"path {quoted(path)} could not be opened ({exc.strerror or exc})")


def _checked(root: Path, path: str, fd: int, what: str) -> None:
    try:
        check_opened(fd, (root,), what)
    except PathRefused as exc:
        os.close(fd)
        raise ToolError(
            f"path {quoted(path)} is refused: {exc.reason}; use a path inside the workspace "
            "[PATH_OUTSIDE_WORKSPACE]"
        ) from None


def open_file(root: Path, path: str) -> tuple[int, os.stat_result, Path]:
    """``path`` opened for reading: confined, the last component not followed, a regular file,
    where it really is checked again; the descriptor (the caller closes it), its status and the
    resolved path."""
    resolved = target(root, path)
    try:
        fd = os.open(resolved, os.O_RDONLY | OPEN_FLAGS)
    except OSError as exc:
        raise os_error(path, exc) from None
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise ToolError(f"{quoted(path)} is a folder, not a file; list_files lists it")
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolError(f"{quoted(path)} is not a regular file (a FIFO, a device or a socket)")
    _checked(root, path, fd, "the file")
    return fd, info, resolved


def open_folder(root: Path, path: str) -> tuple[int, Path]:
    """``path`` opened as a folder by the same rules; the descriptor and the resolved path."""
    resolved = target(root, path)
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)
    except NotADirectoryError:
        raise ToolError(f"{quoted(path)} is a file, not a folder") from None
    except OSError as exc:
        raise os_error(path, exc) from None
    _checked(root, path, fd, "the folder")
    return fd, resolved


def is_binary(head: bytes) -> bool:
    """Whether the first bytes of a file say it is not text."""
    return b"\0" in head[:BINARY_PROBE]
