"""Listing: the continuable children (or descendants) of a session, with their state here.

The tree comes from storage (every session's durable ``parent_session``), so a listing shows
children this process never ran; the state comes from the activations live in this process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import TetherError
from ..store import SessionHeader

if TYPE_CHECKING:
    from ..agents import Agent
    from ._activation import Activations

__all__ = ("AgentEntry", "creation_order", "list_continuable")

EntryStatus = Literal["running", "waiting", "ready"]


@dataclass(frozen=True)
class AgentEntry:
    """One continuable child in a listing."""

    id: str
    parent: str
    depth: int
    label: str | None
    status: EntryStatus | None
    """``running``/``waiting``: live in this process; ``ready``: stored, restorable."""
    diagnostic: str | None = None
    """Instead of a status: ``corrupt`` (its log cannot be read)."""


def creation_order(header: SessionHeader) -> tuple[float, str]:
    """Sort key: oldest first (ties by id)."""
    return header.created_at, header.id


async def list_continuable(
    activations: Activations,
    agent: Agent,
    *,
    scope: Literal["children", "descendants"] = "children",
    offset: int = 0,
    limit: int | None = None,
) -> tuple[list[AgentEntry], int]:
    """The continuable children (or descendants) of ``agent``'s session from storage, with
    their status here; ``(page, total)``. Descendants are in pre-order."""
    entries: list[AgentEntry] = []
    await _collect(activations, agent, agent.session_id, scope == "descendants", entries)
    total = len(entries)
    end = None if limit is None else offset + limit
    return entries[offset:end], total


async def _collect(
    activations: Activations, agent: Agent, root: str, deep: bool, into: list[AgentEntry]
) -> None:
    """Pre-order, oldest first per parent; an explicit stack, so a deep chain does not use up
    the call stack, and ``seen`` stops a corrupt parent cycle."""
    seen: set[str] = set()
    stack: list[SessionHeader | str] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, SessionHeader):
            entry = await _entry(activations, agent, item)
            if entry is not None:
                into.append(entry)
            if not deep:
                continue
            parent = item.id
        else:
            parent = item
        children = await agent.store.sessions(parent=parent)
        fresh = [h for h in children if h.id not in seen and h.id != root]
        seen.update(h.id for h in fresh)
        fresh.sort(key=creation_order, reverse=True)
        stack.extend(fresh)


async def _entry(
    activations: Activations, agent: Agent, header: SessionHeader
) -> AgentEntry | None:
    parent = header.parent_session or ""
    activation = activations.get(header.id)
    if activation is not None:
        state = activations.state(activation)
        status: EntryStatus = "running" if state in ("running", "settled") else "waiting"
        return AgentEntry(header.id, parent, header.delegation_depth, header.label, status)
    try:
        descriptor = await activations.descriptor(agent, header)
    except TetherError:
        return AgentEntry(header.id, parent, header.delegation_depth, header.label, None, "corrupt")
    if descriptor is None:
        return None  # a one-shot child or an ordinary session
    return AgentEntry(header.id, parent, header.delegation_depth, header.label, "ready")
