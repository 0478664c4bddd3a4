"""Ending stored sessions: closing, deleting and pruning them (``tether sessions
close|delete|prune``, docs/sessions.md), and the workspaces that go with them.

The store does each removal in one transaction (:class:`~tether.contracts.SessionLifecycle`);
a session's workspace is removed after that transaction committed, so a crash in between leaves
a folder without a session (removed by the next prune), never a session without its folder.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..contracts import SessionHeader, SessionLifecycle, SessionRemoval, SessionStore
from ..errors import CapabilityError, ErrorCode, StoreError
from ..ground import implements
from ..store import SQLiteStore

__all__ = (
    "PruneOutcome",
    "PrunePlan",
    "close_session",
    "delete_session",
    "lifecycle_of",
    "plan_prune",
    "prune",
    "remove_session_workspaces",
)

#: The folder, beside a SQLite store's file, that holds its sessions' local workspaces.
WORKSPACES = "workspaces"


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


def remove_session_workspaces(
    store: SessionStore, session_ids: list[str] | tuple[str, ...]
) -> list[Path]:
    """Remove the local workspaces of ``session_ids`` (``<store folder>/workspaces/<id>/``,
    when present); the folders removed. The one place sessions' workspaces are removed."""
    if not isinstance(store, SQLiteStore):
        return []  # no local folder of its own
    root = store.path.parent / WORKSPACES
    removed: list[Path] = []
    for session_id in session_ids:
        path = root / session_id
        if path.parent != root or session_id in ("", ".", ".."):
            continue  # not a plain name: never anything outside the workspaces folder
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            continue
        removed.append(path)
    return removed


async def close_session(
    store: SessionStore, session_id: str, *, now: float | None = None
) -> tuple[str, ...]:
    """Close ``session_id`` and its lifetime tree (children not started detached); the ids
    closed now. Their workspaces stay, as their logs do."""
    at = time.time() if now is None else now
    return await lifecycle_of(store).close_session(session_id, at=at)


async def delete_session(
    store: SessionStore, session_id: str, *, tree: bool = False, now: float | None = None
) -> SessionRemoval:
    """Delete ``session_id`` (with ``tree``, every session below it) and close the rest of
    its lifetime tree; then remove the deleted sessions' workspaces."""
    at = time.time() if now is None else now
    removal = await lifecycle_of(store).delete_session(session_id, at=at, tree=tree)
    remove_session_workspaces(store, removal.deleted)
    return removal


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


async def prune(store: SessionStore, plan: PrunePlan, *, now: float | None = None) -> PruneOutcome:
    """Delete the sessions of ``plan``, one transaction each (a crash keeps each whole or
    gone); an open session a live process drives is skipped (``busy``); then remove the
    deleted sessions' workspaces."""
    lifecycle = lifecycle_of(store)
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
    remove_session_workspaces(store, outcome.deleted)
    return outcome
