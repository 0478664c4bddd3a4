"""What every store does the same way when sessions end (``SessionLifecycle``): the
``SESSION_CLOSED`` error, which appends accept a message, and how a retention age is written."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import ErrorCode, StoreError
from ._events import SessionHeader
from ._lease import LeaseOwner

__all__ = ("ACCEPTED", "accepts", "check_open", "held_open", "parse_age", "session_closed")

#: The event type that records a message accepted for a session (``InboxAccepted``).
ACCEPTED = "inbox/accepted"

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$")
_AGE_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def session_closed(
    session_id: str, closed_at: float, *, file: Path | None = None, where: str | None = None
) -> StoreError:
    """``SESSION_CLOSED``: the error every store raises for a message to a closed session."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(closed_at))
    return StoreError(
        ErrorCode.SESSION_CLOSED,
        f"session {session_id} was closed at {when}; it takes no more messages",
        file=file,
        where=where,
        remedy=f"start a new session; the closed one can still be read: tether sessions show "
        f"{session_id}",
    )


def held_open(
    session_id: str, holder: LeaseOwner, *, file: Path | None = None, where: str | None = None
) -> StoreError:
    """``SESSION_BUSY``: a session to delete is open and another live process holds it."""
    return StoreError(
        ErrorCode.SESSION_BUSY,
        f'session "{session_id}" is open and driven by another process: {holder.describe()}',
        file=file,
        where=where,
        remedy=f"close it first (tether sessions close {session_id}): its driver finishes the "
        "turn it runs and takes no more messages; then delete it (nothing was deleted)",
    )


def check_open(header: SessionHeader, *, file: Path | None = None) -> None:
    """``SESSION_CLOSED`` if ``header`` is a closed session's."""
    if header.closed_at is not None:
        raise session_closed(header.id, header.closed_at, file=file)


def accepts(kinds: Iterable[str]) -> bool:
    """Whether an append of events of these types accepts a message (what a closed session
    refuses); the lease holder's other events (the rest of its turn) are still written."""
    return ACCEPTED in kinds


def parse_age(text: str, *, where: str) -> float:
    """A retention age (``30d``, ``12h``, ``90min``, ``2w``, ``45s``; ``m`` is minutes), in
    seconds; a ``ValueError`` that says how to write one otherwise. ``where`` names the
    setting in the message."""
    match = _AGE.match(text) if isinstance(text, str) else None  # pyright: ignore[reportUnnecessaryIsInstance]
    if match is None:
        raise ValueError(
            f"{where} = {text!r} is not an age: write a number and a unit, s, min, h, d or w "
            '("30d", "12h")'
        )
    seconds = float(match.group(1)) * _AGE_UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f'{where} = {text!r} is no time at all: give more than 0 ("30d")')
    return seconds
