"""Approvals: a tool marked ``needs_approval`` runs only when its agent's policy allows it.

An agent's ``approval`` is ``ask`` (the default: the runtime's permission host, the person at the
interactive ``tether run`` or the client of ``tether acp``, decides; with no host the call is
refused), ``allow`` or ``deny``. A delegated child's policy is pinned to ``deny`` when it is
composed: it cannot ask anyone, and it never gets more than its parent.

The same host answers the permission questions ACP children forward up (``tether-acp``,
``permission = "ask"``), so one person or one client answers for a whole delegation forest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ("ApprovalPolicy", "PermissionHost", "PermissionQuestion", "ask_permission")

ApprovalPolicy = Literal["ask", "allow", "deny"]


@dataclass(frozen=True)
class PermissionQuestion:
    """What a permission host is asked."""

    session: str
    """The session that asks (the agent about to call the tool, or an ACP child's mirror)."""
    asker: str
    """Who asks, in words: ``agent "main"`` or ``ACP agent "claude"``."""
    title: str
    """What would run: a tool call (``shell({"cmd": "ls"})``) or an ACP tool call's title."""
    kind: str | None
    """An ACP tool kind (``read``, ``edit``, ``execute``, ...) when known."""
    options: tuple[tuple[str, str, str], ...]
    """``(option_id, name, kind)`` per choice; kinds are ACP's ``allow_once``,
    ``allow_always``, ``reject_once``, ``reject_always``."""
    tool_call_id: str | None = None
    """The id of the tool call asked about, when the question is about an agent's own tool call
    (a host that shows the call, such as ``tether acp``, asks about it by this id)."""


PermissionHost = Callable[[PermissionQuestion], Awaitable[str | None]]
"""Answers a question with the chosen ``option_id``, or ``None`` to refuse."""

#: The choices a tool approval offers.
TOOL_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("allow", "Allow once", "allow_once"),
    ("reject", "Reject", "reject_once"),
)


async def ask_permission(host: PermissionHost | None, question: PermissionQuestion) -> str | None:
    """``host``'s answer (an ``option_id``), or ``None`` when there is no host or it refused."""
    if host is None:
        return None
    return await host(question)
