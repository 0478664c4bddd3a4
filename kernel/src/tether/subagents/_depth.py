"""Delegation depth: a durable, monotone count of delegations between a session and its root."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ErrorCode, SubagentError

if TYPE_CHECKING:
    from ..agents import Agent

__all__ = ("DEFAULT_MAX_DEPTH", "child_depth", "delegation_depth_of", "validate_depth")

#: The delegation tool's default ``max_depth``.
DEFAULT_MAX_DEPTH = 3


def validate_depth(value: object, what: str = "delegation depth") -> int:
    """``value`` as a depth: a non-negative ``int`` (``True`` is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SubagentError(
            ErrorCode.SUBAGENT_INVALID,
            f"{what} must be a non-negative integer, not {value!r}",
            remedy="pass an int >= 0",
        )
    return value


def delegation_depth_of(agent: Agent, option: int | None = None) -> int:
    """``max(durable header depth, runtime option)``: a restart can never lower it."""
    header = validate_depth(agent.header.delegation_depth)
    return header if option is None else max(header, validate_depth(option))


def child_depth(parent: Agent, max_depth: int | None) -> int:
    """The depth of a new child of ``parent``; above ``max_depth`` is an error."""
    depth = delegation_depth_of(parent) + 1
    if max_depth is not None and depth > validate_depth(max_depth, "max_depth"):
        raise SubagentError(
            ErrorCode.SUBAGENT_DEPTH_EXCEEDED,
            f"subagent depth {depth} exceeds max_depth {max_depth}",
            remedy="answer without delegating, or raise max_depth in the delegation tool's "
            "settings" + (" (max_depth = 0 forbids delegation)" if max_depth == 0 else ""),
        )
    return depth
