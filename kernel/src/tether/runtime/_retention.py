"""Ending stored sessions: closing, deleting and pruning them (``tether sessions
close|delete|prune``, docs/sessions.md), and the workspaces that go with them.

The store does each removal in one transaction (:class:`~tether.contracts.SessionLifecycle`);
a session's workspace is removed after that transaction committed, so a crash in between leaves
a folder without a session (removed by the next prune), never a session without its folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..contracts import SessionHeader, SessionLifecycle, SessionRemoval, SessionStore
from ..errors import CapabilityError, ErrorCode, StoreError
from ..ground import implements
from ..store import tree_of
from ..workspaces import WorkspacePlan, recorded_plan, remove_workspaces

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = (
    "PruneOutcome",
    "PrunePlan",
    "close_session",
    "delete_session",
    "lifecycle_of",
    "plan_prune",
    "prune",
)


def lifecycle_of(store: SessionStore) -> SessionLifecycle:
    """``store`` as a :class:`SessionLifecycle`; ``UNSUPPORTED_CAPABILITY`` for a store that
    cannot end sessions (a third-party store that predates it)."""
    if not implements(store, SessionLifecycle):
        raise CapabilityError(
            ErrorCode.UNSUPPORTED_CAPABILITY,
            f"the session store {type(store).__name__} cannot close or delete sessions",
            key="[tether] store",
            remedy="use a store that implements SessionLifecycle (sqlite:PATH, memory, "
            "postgresql://...), or upgrade the store's plugin",
        )
    return store


async def _plans(runtime: Runtime, session_ids: list[str]) -> dict[str, WorkspacePlan | None]:
    """The ``workspace`` records of ``session_ids`` and of every session below them, read
    before a removal: once the store deleted a session its record is gone with it."""
    store = runtime.store
    assert store is not None
    ids: list[str] = []
    for session_id in session_ids:
        try:
            ids.extend(header.id for header in await tree_of(store, session_id))
        except StoreError as exc:
            if exc.code is not ErrorCode.SESSION_NOT_FOUND:
                raise  # gone already: the removal says so, or skips it (prune)
    return {sid: await recorded_plan(store, sid) for sid in dict.fromkeys(ids)}


async def _remove_workspaces(
    runtime: Runtime, deleted: tuple[str, ...] | list[str], plans: dict[str, WorkspacePlan | None]
) -> list[Path]:
    """Remove the deleted sessions' own workspaces, after the store's transaction committed
    (:func:`tether.workspaces.remove_workspaces`, with the records read before it)."""
    return await remove_workspaces(runtime, deleted, plans=plans)


async def close_session(
    runtime: Runtime, session_id: str, *, now: float | None = None
) -> tuple[str, ...]:
    """Close ``session_id`` and its lifetime tree (children not started detached) in the
    runtime's store; the ids closed now. Their workspaces stay, as their logs do."""
    at = time.time() if now is None else now
    return await lifecycle_of(_store(runtime)).close_session(session_id, at=at)


async def delete_session(
    runtime: Runtime, session_id: str, *, tree: bool = False, now: float | None = None
) -> SessionRemoval:
    """Delete ``session_id`` (with ``tree``, every session below it) from the runtime's store
    and close the rest of its lifetime tree; then remove the deleted sessions' workspaces."""
    at = time.time() if now is None else now
    lifecycle = lifecycle_of(_store(runtime))
    plans = await _plans(runtime, [session_id])
    removal = await lifecycle.delete_session(session_id, at=at, tree=tree)
    await _remove_workspaces(runtime, removal.deleted, plans)
    return removal


def _store(runtime: Runtime) -> SessionStore:
    if runtime.store is None:
        raise StoreError(
            ErrorCode.STORE_UNAVAILABLE,
            "no session store to end sessions in",
            remedy="give the runtime a store",
        )
    return runtime.store


@dataclass(frozen=True)
class PrunePlan:
    """What ``prune`` would do: the sessions old enough to delete, oldest first, and the open
    sessions below them that deleting them would close."""

    doomed: tuple[SessionHeader, ...]
    closes: tuple[SessionHeader, ...]
    older_than: float
    """Seconds: a session is old enough once closed (or, open, created) this long ago."""


@dataclass
class PruneOutcome:
    """What ``prune`` did."""

    deleted: list[str] = field(default_factory=list[str])
    closed: list[str] = field(default_factory=list[str])
    busy: list[str] = field(default_factory=list[str])
    """Open sessions a live process drives: left alone (close them first)."""


def age_of(header: SessionHeader, now: float) -> float:
    """Seconds since a session was closed, or, while open, since it was created."""
    return now - (header.closed_at if header.closed_at is not None else header.created_at)


async def plan_prune(
    store: SessionStore, *, older_than: float, closed_only: bool, now: float | None = None
) -> PrunePlan:
    """The sessions ``prune`` removes: closed (or, unless ``closed_only``, open) ones whose
    age (:func:`age_of`) is at least ``older_than`` seconds. Reads only."""
    lifecycle_of(store)
    at = time.time() if now is None else now
    headers = await store.sessions()
    doomed = sorted(
        (
            h
            for h in headers
            if (h.closed_at is not None or not closed_only) and age_of(h, at) >= older_than
        ),
        key=lambda h: (h.closed_at or h.created_at, h.id),
    )
    gone = {h.id for h in doomed}
    children: dict[str, list[SessionHeader]] = {}
    for header in headers:
        if header.parent_session is not None and not header.detached:
            children.setdefault(header.parent_session, []).append(header)
    closes: dict[str, SessionHeader] = {}
    frontier: list[str] = [h.id for h in doomed]
    seen = set(gone)
    while frontier:
        below = [c for parent in frontier for c in children.get(parent, [])]
        frontier = []
        for child in below:
            if child.id not in seen:
                seen.add(child.id)
                frontier.append(child.id)
                if child.closed_at is None:
                    closes[child.id] = child
    return PrunePlan(tuple(doomed), tuple(closes.values()), older_than)


async def prune(runtime: Runtime, plan: PrunePlan, *, now: float | None = None) -> PruneOutcome:
    """Delete the sessions of ``plan`` from the runtime's store, one transaction each (a crash
    keeps each whole or gone); an open session a live process drives is skipped (``busy``);
    then remove the deleted sessions' workspaces."""
    lifecycle = lifecycle_of(_store(runtime))
    plans = await _plans(runtime, [header.id for header in plan.doomed])
    at = time.time() if now is None else now
    outcome = PruneOutcome()
    for header in plan.doomed:
        try:
            removal = await lifecycle.delete_session(header.id, at=at)
        except StoreError as exc:
            if exc.code is ErrorCode.SESSION_BUSY:
                outcome.busy.append(header.id)
                continue
            if exc.code is ErrorCode.SESSION_NOT_FOUND:
                continue  # another process deleted it meanwhile
            raise
        outcome.deleted.extend(removal.deleted)
        outcome.closed.extend(removal.closed)
    deleted = set(outcome.deleted)
    outcome.closed = [sid for sid in outcome.closed if sid not in deleted]
    await _remove_workspaces(runtime, outcome.deleted, plans)
    return outcome
