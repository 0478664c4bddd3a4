"""Authority: who may start, continue, interrupt or report for which continuable child.

Every check reads the durable lineage (a session's ``parent_session`` chain) and the agents
open in this process, never what a caller says about itself:

* follow-ups come only from the exact live agent of the child's ``parent_session``;
* interrupts from an exact live ancestor, or from the human who owns the root session;
* the human continues a child through an open agent of its chain whose root a person started;
* reports come only from the exact agent of a live activation, to its direct parent (checked
  where the activation is known: :mod:`tether.subagents._delivery`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ErrorCode, SubagentError, TetherError

if TYPE_CHECKING:
    from ..agents import Agent
    from ..store import SessionHeader, SessionStore

__all__ = (
    "ancestors_in",
    "authorize_ancestor",
    "authorize_human_root",
    "authorize_live",
    "authorize_owner",
    "authorize_parent",
    "child_header",
)


def authorize_live(agent: Agent, what: str) -> None:
    """``agent`` must be the exact agent open in this process for its session."""
    runtime = agent.runtime
    if runtime is None or runtime.live_agents.get(agent.session_id) is not agent:
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'only the exact live agent of a session may {what}; agent "{agent.session_id}" '
            "is not open in this process",
            remedy="call from inside `async with agent:`",
        )


def authorize_parent(parent: Agent, header: SessionHeader) -> None:
    """``parent`` must run the child's durable direct parent session."""
    if header.parent_session != parent.session_id:
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'subagent "{header.id}" belongs to another parent session; only its direct '
            "parent may send it work",
            remedy="send through the agent that started it",
        )


def authorize_ancestor(by: Agent, target_id: str, chain: list[str]) -> None:
    """``by`` must be on ``chain``, the target's durable parent chain."""
    if by.session_id not in chain:
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'agent "{by.session_id}" is not an ancestor of "{target_id}"',
            remedy="only the agents above a subagent may interrupt it",
        )


async def authorize_human_root(
    store: SessionStore, target_id: str, chain: list[str], human_root: str
) -> None:
    """The root of ``chain`` (the target's parent chain) must be ``human_root``, a session a
    person started."""
    root = await store.header(chain[-1]) if chain else None
    if root is None or root.id != human_root or root.origin != "user":
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'"{target_id}" is not below "{human_root}", a root session a person started',
        )


async def authorize_owner(host: Agent, header: SessionHeader) -> None:
    """``host`` must be an open agent of a session on the child's chain whose root a person
    started (the human owns that tree)."""
    chain = await ancestors_in(host.store, header)
    try:
        root = await host.store.header(chain[-1]) if chain else header
    except TetherError:
        root = None  # an ancestor is missing: nobody can be shown to own the chain
    if root is None or root.origin != "user" or host.session_id not in chain:
        raise SubagentError(
            ErrorCode.UNAUTHORIZED,
            f'session "{header.id}" is not below a session the human owns here',
            remedy="open the child's root session (or one of its ancestors)",
        )


async def child_header(agent: Agent, child_id: str) -> SessionHeader:
    """The stored header of ``child_id`` in ``agent``'s store; an unknown id is
    ``SUBAGENT_UNAVAILABLE``."""
    try:
        return await agent.store.header(child_id)
    except TetherError as exc:
        if exc.code is not ErrorCode.SESSION_NOT_FOUND:
            raise
        raise SubagentError(
            ErrorCode.SUBAGENT_UNAVAILABLE,
            f'subagent "{child_id}" is unavailable: there is no such session',
            remedy="list your subagents with list_agents",
        ) from None


async def ancestors_in(store: SessionStore, header: SessionHeader) -> list[str]:
    """The durable parent chain of ``header`` in ``store``, nearest first (cycles stop the
    walk)."""
    chain: list[str] = []
    current = header
    while current.parent_session is not None and current.parent_session not in chain:
        chain.append(current.parent_session)
        try:
            current = await store.header(current.parent_session)
        except TetherError:
            break
    return chain
