"""Leases: which process drives a session ("one session, one driver"), and whether it still runs.

A lease names its owner: the host, the process id, the process's start time and a token unique
to one store object. On the owner's own host, the owner is alive while that process runs (the
pid exists, is not a zombie, and started when the lease says, so a reused pid does not count);
a store on another host cannot see the process and trusts the lease's expiry instead, which
the owner pushes forward with ``renew()``.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ErrorCode, StoreError

__all__ = ("DEFAULT_LEASE_TTL", "LeaseOwner", "session_busy")

#: Seconds a lease lasts past its last renewal, as seen from another host.
DEFAULT_LEASE_TTL = 30.0

_HOST = socket.gethostname()
_PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class LeaseOwner:
    """The identity a store writes into the leases it holds (``SessionStore.owner``)."""

    host: str
    """The host name of the owner's machine (``socket.gethostname()``)."""
    pid: int
    """The owner's process id on that host."""
    started: float | None
    """When the process started, in seconds after its host booted (Linux: field 22 of
    ``/proc/<pid>/stat`` over ``SC_CLK_TCK``); ``None`` where the system does not say. Seconds
    after boot, not a wall-clock time: it does not move when the clock is set."""
    token: str
    """Unique to one store object: two stores in one process are two owners."""

    @classmethod
    def current(cls) -> LeaseOwner:
        """A new owner for this process, with a fresh token."""
        pid = os.getpid()
        return cls(host=_HOST, pid=pid, started=process_started(pid), token=os.urandom(8).hex())

    def alive(self, expires_at: float, *, now: float | None = None) -> bool:
        """Whether the owner of a lease that expires at ``expires_at`` (Unix time) still runs.

        On this host: its process exists and started when the lease says (a pid the system
        reused for another process is dead). On another host: the lease has not expired.
        """
        if self.host != _HOST:
            return expires_at > (time.time() if now is None else now)
        return process_alive(self.pid, self.started)

    def describe(self) -> str:
        """``pid 4242 on host "box", started 2026-11-30 00:13:57``, as errors name an owner."""
        text = f'pid {self.pid} on host "{self.host}"'
        wall = _wall_time(self.started) if self.host == _HOST else None
        if wall is not None:
            text += ", started " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall))
        return text


def process_started(pid: int) -> float | None:
    """When process ``pid`` of this host started, in seconds after boot; ``None`` if unknown."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def process_alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` of this host runs and, if both are known, started at ``started``."""
    if pid <= 0:  # os.kill(0, ...) would signal our own process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return False
    stat = _stat(pid)
    if stat is None:
        return True  # no /proc (macOS, BSD): the pid exists, which is all we can tell
    state, now_started = stat
    if state in ("Z", "X"):
        return False  # exited; only its parent has not reaped it yet
    return started is None or now_started is None or now_started == started


def _stat(pid: int) -> tuple[str, float | None] | None:
    """The state letter and start time (seconds after boot) of ``pid`` from ``/proc``."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or ")".
    fields = text[text.rfind(")") + 2 :].split()
    try:
        ticks = int(fields[19])  # field 22, counting the pid as 1
        return fields[0], ticks / _clock_ticks()
    except (IndexError, ValueError):
        return (fields[0] if fields else "?"), None


def _clock_ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


def _wall_time(started: float | None) -> float | None:
    """Unix time of a start time counted from this host's boot, for people to read."""
    if started is None:
        return None
    try:
        for line in (_PROC / "stat").read_text().splitlines():
            if line.startswith("btime "):
                return int(line.split()[1]) + started
    except (OSError, ValueError):
        pass
    return None


def session_busy(
    session_id: str,
    holder: LeaseOwner,
    *,
    alive: bool,
    file: Path | None = None,
    where: str | None = None,
) -> StoreError:
    """``SESSION_BUSY``: ``holder``, not this store, holds the lease of ``session_id``; ``file``
    (a store's file) or ``where`` (any other place, such as a server) names the store."""
    if alive and holder.host == _HOST and holder.pid == os.getpid():
        return StoreError(
            ErrorCode.SESSION_BUSY,
            f'session "{session_id}" is driven by another store object of this process: '
            f"{holder.describe()}",
            file=file,
            where=where,
            remedy="write through the store object that holds it, or release it there first "
            "(`store.release(session_id)`, or close that store); nothing was written",
        )
    if alive:
        return StoreError(
            ErrorCode.SESSION_BUSY,
            f'session "{session_id}" is driven by another process: {holder.describe()}',
            file=file,
            where=where,
            remedy="wait for that process to finish, send the message with "
            f"`tether sessions send {session_id} MESSAGE` (it is delivered to that process), "
            "or stop that process; nothing was written",
        )
    return StoreError(
        ErrorCode.SESSION_BUSY,
        f'session "{session_id}" is leased to {holder.describe()}, which has stopped',
        file=file,
        where=where,
        remedy=f"restore the session first (continue it with `tether run --session {session_id}`, "
        "or call `store.acquire()` from Python): that takes the lease over and closes the turn "
        "it left open; nothing was written",
    )
