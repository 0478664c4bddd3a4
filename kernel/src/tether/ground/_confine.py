"""Confinement: a path a model (or a remote agent) names stays inside the folders it may use.

The rules, shared by the first-party file tools (``tether-files``, confined to an agent's
workspace), the eviction of oversized tool results and ``tether-acp``'s ``fs/*`` sandbox
(confined to an ACP child's roots):

* **The text.** A path with a NUL character, or that is not valid Unicode (a lone surrogate),
  is refused before the file system sees it.
* **Resolved before checked.** A relative path is taken against the root; ``..`` and every
  symbolic link on the way (any component, the last one too, chains of them) are followed by
  :func:`resolve_path`, one component at a time, and the *result* must be inside a root. A
  ``..`` that leaves the root and comes back in is fine; a link whose target is outside is
  outside, wherever it sits.
* **No /proc.** A path that passes through ``/proc`` (``/proc/self/root/...``,
  ``/proc/self/fd/3``, a link to them) is refused even when it seems to lead back inside: its
  links are "magic" (they open what a process holds, not what their text says).
* **Checked again once open.** The last component is opened with ``O_NOFOLLOW`` (a link swapped
  in after the check fails to open) and ``O_NONBLOCK`` (a FIFO or a device never blocks the
  opener), and on Linux where the opened file (or, for a write, its folder) *really* is is read
  back through ``/proc/self/fd`` and checked again (:func:`check_opened`), so swapping a folder
  for a link between the check and the use gains nothing.
* **Hard links.** A regular file with more than one link may be another name of a file outside
  the root, and nothing in the file says where its other names are. Writing to one is refused
  (:func:`check_single_link`): tether writes by replacing (a temporary file renamed over the
  name), which would silently split the names, and a writer that writes in place would change
  the file outside. Reading one is a caller's choice: ACP children refuse it; the workspace
  tools allow it (``fs.protected_hardlinks``, on by default on Linux, lets nobody link a file
  they could not already read, and tools such as uv and ``git clone --local`` fill project
  folders with hard links).
* **Writes lose nothing.** :func:`replace_file` writes a temporary file in the same folder and
  renames it over the target, so a failed write leaves the old content whole.

:func:`confine` applies the path rules to one workspace root and raises
``PATH_OUTSIDE_WORKSPACE`` (:class:`tether.errors.WorkspaceError`); :func:`write_confined`
writes a whole file inside a root by all of them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from ..errors import ErrorCode, WorkspaceError

__all__ = (
    "OPEN_FLAGS",
    "PathRefused",
    "check_opened",
    "check_regular",
    "check_single_link",
    "confine",
    "is_within",
    "path_text_problem",
    "real_location",
    "replace_file",
    "resolve_path",
    "write_confined",
)

#: Never wait on a FIFO or a device, never adopt a terminal, never follow a link swapped in as
#: the last component, never leak the descriptor into a subprocess started meanwhile.
OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
#: Symbolic links followed while resolving one path at most (Linux's own limit).
MAX_LINKS = 40
#: Bytes written at a time; a cancelled write stops between two chunks.
CHUNK = 64 * 2**10
_PROC = Path("/proc")
_PROC_FD = Path("/proc/self/fd")


class PathRefused(Exception):
    """A path or a file the confinement refuses, with the reason in words (``the path contains
    a NUL character``). ``outside``: it leads out of the roots (a ``..``, a link, an absolute
    path elsewhere, ``/proc``), as opposed to one that cannot be used at all."""

    def __init__(self, reason: str, *, outside: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.outside = outside


def path_text_problem(path: str, what: str = "the path") -> str | None:
    """Why ``path`` cannot be a path at all (a NUL, a lone surrogate), or ``None``."""
    if "\0" in path:
        return f"{what} contains a NUL character"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"{what} is not valid Unicode (a lone surrogate U+{ord(path[exc.start]):04X} at "
            f"character {exc.start})"
        )
    return None


def is_within(path: Path, roots: Sequence[Path]) -> bool:
    """Whether the resolved ``path`` is one of ``roots`` (resolved) or below one."""
    return any(path == root or path.is_relative_to(root) for root in roots)


def _under_proc(path: Path) -> bool:
    return path == _PROC or path.is_relative_to(_PROC)


def resolve_path(path: str, base: Path) -> Path:
    """``path`` (relative paths against ``base``) with ``..`` and every symbolic link on the way
    followed, one component at a time, as the kernel would; a missing tail is kept as written
    (``..`` in it taken lexically). :class:`PathRefused` when it passes through ``/proc``
    (``outside``) or its links loop; ``OSError`` when the file system cannot say (a name too
    long, a folder that may not be read)."""
    current = Path("/") if os.path.isabs(path) else base
    pending = list(reversed(PurePosixPath(path).parts))
    links = 0
    while pending:
        part = pending.pop()
        if part in ("/", "//"):
            current = Path("/")
            continue
        if part in ("", "."):
            continue
        if part == "..":
            current = current.parent
            continue
        candidate = current / part
        if _under_proc(candidate):
            raise PathRefused(
                "the path goes through /proc, whose links lead anywhere", outside=True
            )
        try:
            info = os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            current = candidate  # the rest does not exist: kept as written
            continue
        if not stat.S_ISLNK(info.st_mode):
            current = candidate
            continue
        links += 1
        if links > MAX_LINKS:
            raise PathRefused(
                f"the path follows more than {MAX_LINKS} symbolic links (a loop of links)"
            )
        target = os.readlink(candidate)
        if os.path.isabs(target):
            current = Path("/")
        pending.extend(reversed(PurePosixPath(target).parts))
    return Path(os.path.normpath(current))


def real_location(fd: int) -> Path | None:
    """Where the open file (or folder) ``fd`` really is, read through ``/proc/self/fd``;
    ``None`` where that cannot be told (no ``/proc``, a file deleted meanwhile)."""
    try:
        real = os.readlink(_PROC_FD / str(fd))
    except OSError:
        return None
    if not real.startswith("/") or real.endswith(" (deleted)"):
        return None
    return Path(real)


def check_opened(fd: int, roots: Sequence[Path], what: str = "the file") -> None:
    """:class:`PathRefused` (``outside``) when the opened ``fd`` really is outside ``roots``
    (a folder on the path was swapped for a link after the path was checked)."""
    real = real_location(fd)
    if real is not None and not is_within(real, roots):
        raise PathRefused(f"{what} is really outside ({real})", outside=True)


def describe_kind(mode: int) -> str:
    """``a FIFO``, ``a socket``... for a ``st_mode`` that is not a regular file's."""
    for test, kind in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return kind
    return "special file"


def check_regular(info: os.stat_result) -> None:
    """:class:`PathRefused` unless ``info`` is a regular file's."""
    if stat.S_ISDIR(info.st_mode):
        raise PathRefused("the path is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise PathRefused(
            f"not a regular file (a {describe_kind(info.st_mode)}); only regular files are served"
        )


def check_single_link(info: os.stat_result) -> None:
    """:class:`PathRefused` when the file has more than one hard link (see the module)."""
    if info.st_nlink > 1:
        raise PathRefused(
            f"the file has {info.st_nlink} hard links; a hard link can reach a file outside "
            "the allowed folders, so files with more than one are refused"
        )


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def confine(path: str, root: Path) -> Path:
    """``path`` (relative to ``root``, or absolute inside it) resolved, when it stays inside
    ``root`` (resolved); else ``PATH_OUTSIDE_WORKSPACE`` naming the path, the root and the fix.
    Nothing is opened: use :func:`check_opened` on what is opened afterwards."""
    shown = _quoted(path)
    remedy = "use a path inside it, relative to the workspace, such as notes/todo.md"
    problem = path_text_problem(path)
    if problem is not None:
        raise WorkspaceError(
            ErrorCode.PATH_OUTSIDE_WORKSPACE,
            f"path {shown} is refused: {problem}",
            where=f"workspace {root}",
            remedy="use a plain path relative to the workspace, such as notes/todo.md",
        )
    try:
        resolved = resolve_path(path, root)
    except PathRefused as exc:
        raise WorkspaceError(
            ErrorCode.PATH_OUTSIDE_WORKSPACE,
            f"path {shown} is refused: {exc.reason}",
            where=f"workspace {root}",
            remedy=remedy,
        ) from None
    except OSError as exc:
        raise WorkspaceError(
            ErrorCode.PATH_OUTSIDE_WORKSPACE,
            f"path {shown} cannot be resolved ({exc.strerror or exc})",
            where=f"workspace {root}",
            remedy=remedy,
        ) from None
    if not is_within(resolved, (root,)):
        lexical = Path(os.path.normpath(root / path))
        how = "leads through a symbolic link out of" if is_within(lexical, (root,)) else "leaves"
        raise WorkspaceError(
            ErrorCode.PATH_OUTSIDE_WORKSPACE,
            f"path {shown} {how} the workspace {root} (it resolves to {resolved})",
            remedy=remedy,
        )
    return resolved


def replace_file(
    folder: int,
    name: str,
    data: bytes,
    mode: int | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Write ``data`` to a temporary file in the open ``folder`` and rename it over ``name``
    (``mode``: the permission bits to keep; ``None``: a new file's, after the umask). If
    ``name`` became something else than a regular file with one link meanwhile,
    :class:`PathRefused`; a failing disk, or ``stop`` set, raises ``OSError`` with the old
    content whole."""
    temporary = f".{name}.tether-{os.getpid()}-{threading.get_ident()}.tmp"
    fd = os.open(
        temporary,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | OPEN_FLAGS,
        0o666 if mode is None else mode,
        dir_fd=folder,
    )
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # the umask narrowed it at creation
            view = memoryview(data)
            while view:
                if stop is not None and stop.is_set():
                    raise OSError(errno.ECANCELED, "cancelled")
                view = view[os.write(fd, view[:CHUNK]) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            current: os.stat_result | None = os.lstat(name, dir_fd=folder)
        except FileNotFoundError:
            current = None
        if current is not None:  # it may have changed since the caller looked: again
            if not stat.S_ISREG(current.st_mode):
                raise PathRefused("the path is no longer a regular file")
            if current.st_nlink > 1:
                raise PathRefused("the file has more than one hard link")
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)


def write_confined(root: Path, path: str, data: bytes) -> Path:
    """Write ``data`` as the whole file ``path`` inside ``root`` by every rule above: the path
    confined (:func:`confine`), missing folders made, the folder opened without following a
    link and checked again once open, an existing file a regular file of one link, the content
    replaced atomically. Returns the resolved path. ``PATH_OUTSIDE_WORKSPACE``, or
    :class:`PathRefused` for a file that may not be written, or ``OSError`` from the disk."""
    target = confine(path, root)
    if target == root:
        raise PathRefused("the path is the workspace folder itself, not a file")
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)
    try:
        try:
            check_opened(folder, (root,), "the file's folder")
        except PathRefused as exc:
            raise WorkspaceError(
                ErrorCode.PATH_OUTSIDE_WORKSPACE,
                f"path {_quoted(path)} is refused: {exc.reason}",
                where=f"workspace {root}",
                remedy="use a path inside it, relative to the workspace",
            ) from None
        try:
            info: os.stat_result | None = os.lstat(target.name, dir_fd=folder)
        except FileNotFoundError:
            info = None
        if info is not None:
            check_regular(info)
            check_single_link(info)
        replace_file(
            folder, target.name, data, None if info is None else stat.S_IMODE(info.st_mode)
        )
    finally:
        os.close(folder)
    return target
