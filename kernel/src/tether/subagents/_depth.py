"""Delegation depth: a durable, monotone count of delegations between a session and its root.

A child's depth is computed in one place, :func:`child_depth`: the subagent service's check of
a start uses it (and reports what it found with the start), the local-child kit records what it
gives in the child's durable header, and everything after reads that header.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..errors import ErrorCode, SubagentError

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = ("DEFAULT_MAX_DEPTH", "child_depth")

#: The delegation tool's default ``max_depth``.
DEFAULT_MAX_DEPTH = 3


def child_depth(parent: Agent, max_depth: int | None = None) -> int:
    """The delegation depth of a new child of ``parent``: one more than the depth in the
    parent's durable header (a header's depth only grows, so a restart never lowers it).
    Deeper than ``max_depth`` (counted from the root; ``None``: no limit) is
    ``SUBAGENT_DEPTH_EXCEEDED``; a ``max_depth`` that is not an ``int >= 0`` (``True`` is not
    a number here) is ``SUBAGENT_INVALID``."""
    depth = parent.header.delegation_depth + 1
    if max_depth is None:
        return depth
    given = cast(object, max_depth)  # what a caller was given (a request a provider built)
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise SubagentError(
            ErrorCode.SUBAGENT_INVALID,
            f"max_depth must be a non-negative integer, not {given!r}",
            remedy="pass an int >= 0, or None to leave the depth to the provider",
        )
    if depth > max_depth:
        raise SubagentError(
            ErrorCode.SUBAGENT_DEPTH_EXCEEDED,
            f"subagent depth {depth} exceeds max_depth {max_depth}",
            remedy="answer without delegating, or raise max_depth in the delegation tool's "
            "settings" + (" (max_depth = 0 forbids delegation)" if max_depth == 0 else ""),
        )
    return depth
