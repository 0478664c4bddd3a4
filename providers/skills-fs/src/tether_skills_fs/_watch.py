"""Being told of changes instead of looking for them: the skill folders watched through Linux's
inotify, so a turn learns whether anything changed by one ``read`` that returns at once,
however many skills there are.

A scan adds a watch on a folder **before** it reads it (:meth:`FolderWatch.add`), so a change
made after the read is always reported. Three kinds of watch, and which of their events count:

* a **root** folder: any entry added, removed, renamed, written or changed (a flat ``NAME.md``
  edited in place), hidden names (``.swap``) excepted; the folder itself removed or moved;
* a packaged skill's **folder**: its ``SKILL.md`` (or ``skill.md``) created, written, removed,
  renamed or changed; the folder itself removed or moved. Its other files (``scripts/``, a
  skill's scratch files) are not in the catalog and do not count;
* a skill **file** that is a symlink: the file it leads to, which lives in a folder that is not
  watched; every event counts.

A change of attributes alone (a time set, a mode or owner changed) counts only when it took the
reading away: a watch is only added on what can be read.

Where inotify is missing (not Linux), or refuses (``fs.inotify.max_user_instances`` or
``max_user_watches`` reached), :func:`open_watch` returns ``None`` or :meth:`FolderWatch.add`
``False``, and the provider looks for changes itself, as it always did (``_provider.py``).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import struct
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Literal

from ._layout import SKILL_FILES

__all__ = ("FolderWatch", "WatchKind", "open_watch")

log = logging.getLogger("tether.skills.fs")

#: What a watch is on; decides which of its events count (see the module docstring).
WatchKind = Literal["root", "folder", "file"]

# <sys/inotify.h>
_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name
#: Bytes read at a time: room for hundreds of events; more wait for the next read.
_READ_BYTES = 64 * 1024


class _Inotify:
    """The C library's inotify calls, found once (``ctypes`` is imported then, not with the
    plugin: a command that lists no skill never pays for it)."""

    def __init__(self) -> None:
        import ctypes

        self.get_errno = ctypes.get_errno
        libc = ctypes.CDLL(None, use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.init1.restype = ctypes.c_int
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int


@functools.cache
def _inotify() -> _Inotify | None:
    try:
        return _Inotify()
    except (OSError, AttributeError):  # no C library with inotify calls
        return None


def open_watch() -> FolderWatch | None:
    """A new inotify instance, or ``None`` where there is none (not Linux, or the per-user
    limit of instances reached, ``fs.inotify.max_user_instances``: logged at debug level)."""
    if not sys.platform.startswith("linux"):
        return None
    calls = _inotify()
    if calls is None:
        return None
    fd = calls.init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        code = calls.get_errno()
        log.debug("inotify_init1 failed (%s): skill edits are found by looking", os.strerror(code))
        return None
    return FolderWatch(fd, calls)


class FolderWatch:
    """Watches on folders (and symlinked skill files); :meth:`drain` tells which changed.

    Thread-safe: a scan adds watches in a worker thread while a turn drains in the event loop's.
    The descriptor is closed by :meth:`close`, or when the watch is collected.
    """

    def __init__(self, fd: int, calls: _Inotify) -> None:
        self._fd = fd
        self._calls = calls
        self._lock = threading.Lock()
        self._watched: dict[int, tuple[tuple[str, WatchKind], ...]] = {}
        """Per watch descriptor, the paths it watches (one inode reached by two paths, a skill
        linked into two roots, has one descriptor) and what each is."""
        self._full = False
        self._closer = weakref.finalize(self, os.close, fd)

    @property
    def full(self) -> bool:
        """Whether the system refused a watch (``fs.inotify.max_user_watches``)."""
        return self._full

    def add(self, path: str, kind: WatchKind) -> bool:
        """Watch ``path``; ``False`` when it cannot be watched (gone, unreadable, the watch
        limit reached: :attr:`full`), which the caller must make up for by looking."""
        if not self._closer.alive:
            return False
        wd = self._calls.add_watch(self._fd, os.fsencode(path), _MASK)
        if wd < 0:
            code = self._calls.get_errno()
            if code == errno.ENOSPC and not self._full:
                self._full = True
                log.warning(
                    "skill folders: the system's limit of inotify watches is reached "
                    "(fs.inotify.max_user_watches); skill files edited in place are found "
                    "by looking, at most every few seconds"
                )
            return False
        with self._lock:
            known = self._watched.get(wd, ())
            if (path, kind) not in known:  # tuples: one per skill folder, kept small
                self._watched[wd] = (*known, (path, kind))
        return True

    def drain(self) -> tuple[set[str], bool]:
        """The watched paths with an event that counts since the last call, and whether the
        kernel's queue overflowed (then anything may have changed). Never blocks."""
        changed: set[str] = set()
        overflow = False
        while self._closer.alive:
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:  # the descriptor failed: say everything changed
                log.warning("reading inotify events failed: %s", exc)
                return changed, True
            for wd, mask, name in _events(data):
                if mask & _IN_Q_OVERFLOW:
                    overflow = True
                    continue
                with self._lock:
                    paths = self._watched.get(wd)
                    if mask & _IN_IGNORED:  # the watch is gone (its folder was removed)
                        self._watched.pop(wd, None)
                    if paths is None:
                        continue
                    found = [path for path, kind in paths if _counts(kind, name)]
                if found and mask & ~(_IN_ATTRIB | _IN_ISDIR) == 0:
                    # Times, modes, owners: only a read taken away counts.
                    found = [path for path in found if _unreadable(path, name)]
                changed.update(found)
        return changed, overflow

    def close(self) -> None:
        """Close the inotify descriptor; later :meth:`add` calls return ``False``."""
        self._closer()


def _counts(kind: WatchKind, name: str) -> bool:
    """Whether an event about ``name`` (empty: the watched path itself) changes a listing."""
    if not name or kind == "file":
        return True
    if kind == "root":
        return not name.startswith(".")
    return name in SKILL_FILES


def _unreadable(path: str, name: str) -> bool:
    """Whether a change of attributes took away the reading of ``path`` (or its entry
    ``name``): a watch is only added on what can be read, so only that matters."""
    target = os.path.join(path, name) if name else path
    return os.path.lexists(target) and not os.access(target, os.R_OK)


def _events(data: bytes) -> Iterator[tuple[int, int, str]]:
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        name = data[offset : offset + length].rstrip(b"\0")
        offset += length
        yield wd, mask, os.fsdecode(name)
