"""Rules every store enforces the same way."""

from __future__ import annotations

from ..errors import ErrorCode, StoreError
from ._events import InboxAccepted, SessionHeader

__all__ = ("check_depth", "check_mail", "session_not_found")


def session_not_found(session_id: str) -> StoreError:
    """``SESSION_NOT_FOUND``: the error every store raises for an unknown session id."""
    return StoreError(
        ErrorCode.SESSION_NOT_FOUND,
        f'no session "{session_id}"',
        remedy="list the stored sessions with `tether sessions list`",
    )


def check_depth(header: SessionHeader, depth: object) -> bool:
    """True if ``depth`` raises the header's depth; an error if it would lower it.

    ``depth`` is typed ``object`` because callers pass what they were given: anything that is
    not a non-negative ``int`` is refused here with a clear error.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise StoreError(
            ErrorCode.DEPTH_LOWERED,
            f"delegation depth must be a non-negative integer, not {depth!r}",
            remedy="pass an int >= 0",
        )
    if depth < header.delegation_depth:
        raise StoreError(
            ErrorCode.DEPTH_LOWERED,
            f'delegation depth of session "{header.id}" is {header.delegation_depth}; '
            f"it cannot be lowered to {depth}",
            remedy="depth only grows; a restart must not reset it",
        )
    return depth > header.delegation_depth


def check_mail(message: object) -> None:
    """Only an accepted inbox message can be posted: it becomes an ``inbox/accepted`` event."""
    if not isinstance(message, InboxAccepted):
        raise TypeError(
            f"a mailbox holds InboxAccepted messages, not {type(message).__name__}; "
            "wrap the text in InboxAccepted(message_id=..., content=...)"
        )
