"""The files an ACP child may read and write through ``fs/*``: its sandbox.

Only regular files inside the agent's ``roots``, each linked once, up to ``max_file_bytes``;
everything else is refused with the JSON-RPC error the ACP spec names (``-32002`` for a file
that does not exist, ``-32602`` for a request the sandbox refuses, ``-32603`` for a failure of
the file system itself), whose ``data`` says which path and why.

Why each rule:

* **Off the event loop.** File I/O runs in a worker thread, so a slow disk never stalls the
  parent (its other children, its timeouts, Ctrl-C). A read in progress stops at its next chunk
  when the request is cancelled.
* **Regular files only.** A FIFO blocks whoever opens it until a writer comes, and a device
  never ends; both are refused after opening without blocking (``O_NONBLOCK``), so nothing
  waits on them.
* **One link.** A hard link inside a root reaches a file outside it, and nothing in the file
  says where its other names are; a file with more than one link is refused.
* **The real location.** Paths are resolved (``..`` and symbolic links, never through
  ``/proc``) before the roots are checked, the last component is opened without following a
  link, and on Linux the opened file's (or, for a write, its folder's) real location is checked
  again through ``/proc/self/fd``, so swapping a folder for a link mid-request gains nothing.
* **Sizes capped.** A whole-file read of a file over the cap is refused before any byte is
  read; a ``line``/``limit`` read scans line by line and is refused once its text passes the
  cap; a write over the cap is refused before anything is touched.
* **Writes lose nothing.** Content is checked (valid Unicode, size) before the file is
  touched, then written to a temporary file in the same folder and renamed over the target, so
  a failed write (a full disk) leaves the old content whole.

The path rules, the checks after opening and the atomic replacement are the kernel's
confinement (``tether.ground``'s ``resolve_path``, ``check_opened``, ``replace_file``:
docs/files.md), shared with the workspace file tools; this module maps their refusals to
ACP's errors.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from tether.ground import (
    OPEN_FLAGS,
    PathRefused,
    check_opened,
    check_regular,
    check_single_link,
    is_within,
    path_text_problem,
    replace_file,
    resolve_path,
)

if TYPE_CHECKING:
    import acp

__all__ = (
    "DEFAULT_MAX_FILE_BYTES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "RESOURCE_NOT_FOUND",
    "FileRefused",
    "FileSandbox",
)

_T = TypeVar("_T")

#: ``max_file_bytes`` unless an agent's settings say otherwise: 10 MiB.
DEFAULT_MAX_FILE_BYTES = 10 * 2**20
#: JSON-RPC error codes of the ACP spec used here.
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
_TITLES = {
    RESOURCE_NOT_FOUND: "Resource not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
}
#: Bytes read at a time; a cancelled request stops between two chunks.
CHUNK = 64 * 2**10
_OPEN_FLAGS = OPEN_FLAGS  # never wait on a FIFO or a device, never follow a link swapped in last


class FileRefused(Exception):
    """A file request answered with a JSON-RPC error; ``refusal``: the sandbox said no (as
    opposed to a missing file or a failing disk), which the child's log notes."""

    def __init__(self, code: int, reason: str, *, refusal: bool = True) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.refusal = refusal

    def to_request_error(self, path: str) -> acp.RequestError:
        import acp

        return acp.RequestError(
            self.code, f"{_TITLES[self.code]}: {self.reason}", {"path": path, "reason": self.reason}
        )


class FileSandbox:
    """Reads and writes for one child, inside ``roots``, one request at a time."""

    def __init__(self, roots: tuple[Path, ...], max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> None:
        self.roots = tuple(Path(os.path.realpath(root)) for root in roots)
        self.max_bytes = max_bytes
        self._limiter: anyio.CapacityLimiter | None = None

    async def run(self, function: Callable[..., _T], *args: Any) -> _T:
        """``function(*args, stop)`` in a worker thread; ``stop`` is set when the request is
        cancelled, and the function returns at its next chunk. One request of this child at a
        time, which also bounds the memory its reads take."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        stop = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                function, *args, stop, abandon_on_cancel=True, limiter=self._limiter
            )
        finally:
            stop.set()

    # ------------------------------------------------------------------ paths

    def check(self, path: str) -> Path:
        """The resolved path, if it may be used; else :class:`FileRefused` saying why."""
        problem = path_text_problem(path)
        if problem is not None:
            raise FileRefused(INVALID_PARAMS, problem)
        if not os.path.isabs(path):
            raise FileRefused(INVALID_PARAMS, "not an absolute path; send an absolute one")
        try:
            resolved = resolve_path(path, Path("/"))
        except PathRefused as exc:
            if exc.outside:
                raise FileRefused(INVALID_PARAMS, self._outside(exc.reason)) from None
            raise FileRefused(
                INVALID_PARAMS, f"the path cannot be resolved: {exc.reason}"
            ) from None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise FileRefused(INVALID_PARAMS, "the path is too long") from None
            raise FileRefused(INVALID_PARAMS, f"the path cannot be resolved: {_why(exc)}") from None
        if not is_within(resolved, self.roots):
            raise FileRefused(INVALID_PARAMS, self._outside())
        return resolved

    def _outside(self, why: str | None = None) -> str:
        roots = ", ".join(map(str, self.roots))
        text = f"outside the folders this agent may use: {roots}"
        return text if why is None else f"{text} ({why})"

    def _check_real_location(self, fd: int, what: str) -> None:
        """On Linux: where the opened file (or folder) really is must be inside the roots."""
        try:
            check_opened(fd, self.roots, what)
        except PathRefused:
            raise FileRefused(
                INVALID_PARAMS, f"{what} is really outside the folders this agent may use"
            ) from None

    def _check_file(self, info: os.stat_result) -> None:
        try:
            check_regular(info)
            check_single_link(info)
        except PathRefused as exc:
            raise FileRefused(INVALID_PARAMS, exc.reason) from None

    # ------------------------------------------------------------------ read

    def read(self, path: str, line: int | None, limit: int | None, stop: threading.Event) -> str:
        """``fs/read_text_file``: the file's text, or ``limit`` lines from line ``line``."""
        target = self.check(path)
        try:
            fd = os.open(target, os.O_RDONLY | _OPEN_FLAGS)
        except OSError as exc:
            raise _os_refusal(exc) from None
        try:
            info = os.fstat(fd)
            self._check_file(info)  # before a file object: FileIO refuses folders itself
            self._check_real_location(fd, "the file")
            if line is None and limit is None and info.st_size > self.max_bytes:
                raise FileRefused(
                    INVALID_PARAMS,
                    f"the file is {info.st_size} bytes, more than max_file_bytes "
                    f"({self.max_bytes}); read part of it with line and limit",
                )
            file = os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise
        try:
            with file:
                if line is None and limit is None:
                    data = _read_all(file, self.max_bytes, stop)
                else:
                    data = _read_lines(file, max(line or 1, 1), limit, self.max_bytes, stop)
        except OSError as exc:  # a failing disk
            raise _os_refusal(exc) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FileRefused(
                INVALID_PARAMS,
                f"not UTF-8 text (an invalid byte at offset {exc.start} of what was read)",
            ) from None

    # ------------------------------------------------------------------ write

    def write(self, path: str, content: str, stop: threading.Event) -> None:
        """``fs/write_text_file``: replace (or create) the file with ``content``."""
        target = self.check(path)
        data = _require_unicode(content, "the content")
        if len(data) > self.max_bytes:
            raise FileRefused(
                INVALID_PARAMS,
                f"the content is {len(data)} bytes, more than max_file_bytes ({self.max_bytes}); "
                "nothing was written",
            )
        try:
            info: os.stat_result | None = os.lstat(target)
        except FileNotFoundError:
            info = None
        except NotADirectoryError:
            raise FileRefused(INVALID_PARAMS, "a folder on the path is a file") from None
        except OSError as exc:
            raise _os_refusal(exc) from None
        if info is not None:
            self._check_file(info)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | _OPEN_FLAGS)
        except (FileExistsError, NotADirectoryError):
            raise FileRefused(INVALID_PARAMS, "a folder on the path is a file") from None
        except OSError as exc:
            raise _os_refusal(exc) from None
        try:
            self._check_real_location(folder, "the file's folder")
            _replace(folder, target.name, data, info, stop)
        finally:
            os.close(folder)


def _replace(
    folder: int, name: str, data: bytes, info: os.stat_result | None, stop: threading.Event
) -> None:
    """Write ``data`` to a temporary file in ``folder`` and rename it over ``name``."""
    mode = stat.S_IMODE(info.st_mode) if info is not None else None
    try:
        replace_file(folder, name, data, mode, stop)
    except PathRefused as exc:
        raise FileRefused(INVALID_PARAMS, exc.reason) from None
    except OSError as exc:
        if exc.errno == errno.ECANCELED:
            raise FileRefused(
                INTERNAL_ERROR, "cancelled; nothing was written", refusal=False
            ) from None
        raise FileRefused(
            INTERNAL_ERROR, f"could not write: {_why(exc)}; the file is unchanged", refusal=False
        ) from None


def _read_all(file: Any, cap: int, stop: threading.Event) -> bytes:
    data = bytearray()
    while True:
        if stop.is_set():
            raise FileRefused(INTERNAL_ERROR, "cancelled", refusal=False)
        chunk = file.read(CHUNK)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > cap:  # it grew since it was measured
            raise FileRefused(
                INVALID_PARAMS,
                f"the file is more than max_file_bytes ({cap}); read part of it with line and "
                "limit",
            )


def _read_lines(file: Any, first: int, limit: int | None, cap: int, stop: threading.Event) -> bytes:
    """Lines ``first`` .. ``first + limit - 1`` (1-based; ``\\n`` ends a line), scanning the
    file a chunk at a time: memory stays within the cap whatever the file's size."""
    if limit == 0:
        return b""
    end = None if limit is None else first + limit  # the first line not wanted
    out = bytearray()
    number = 1  # the line the next byte belongs to
    while end is None or number < end:
        if stop.is_set():
            raise FileRefused(INTERNAL_ERROR, "cancelled", refusal=False)
        chunk = file.read(CHUNK)
        if not chunk:
            break
        start = 0
        while start < len(chunk) and (end is None or number < end):
            newline = chunk.find(b"\n", start)
            after = len(chunk) if newline < 0 else newline + 1
            if number >= first:
                out += chunk[start:after]
            start = after
            if newline >= 0:
                number += 1
        if len(out) > cap:
            raise FileRefused(
                INVALID_PARAMS,
                f"the lines asked for are more than max_file_bytes ({cap}); ask for fewer",
            )
    return bytes(out)


def _require_unicode(text: str, what: str) -> bytes:
    """``text`` as UTF-8, or :class:`FileRefused` naming where a lone surrogate sits."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FileRefused(
            INVALID_PARAMS,
            f"{what} is not valid Unicode (a lone surrogate U+{ord(text[exc.start]):04X} at "
            f"character {exc.start}); send valid text",
        ) from None


def _os_refusal(exc: OSError) -> FileRefused:
    """An ``OSError`` of opening or inspecting a path, as the spec's error."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return FileRefused(RESOURCE_NOT_FOUND, "no such file", refusal=False)
    if exc.errno == errno.ELOOP:
        return FileRefused(
            INVALID_PARAMS,
            "the path leads through a symbolic link that cannot be followed (a loop, or a link "
            "made while the request was checked)",
        )
    if exc.errno == errno.ENXIO:  # a FIFO without a reader, a socket, a device without a driver
        return FileRefused(INVALID_PARAMS, "not a regular file; only regular files are served")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return FileRefused(INVALID_PARAMS, f"not allowed: {_why(exc)}")
    if exc.errno == errno.ENAMETOOLONG:
        return FileRefused(INVALID_PARAMS, "the path is too long")
    return FileRefused(INTERNAL_ERROR, _why(exc), refusal=False)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
