"""Removing sessions' workspaces with the sessions (``tether sessions delete|prune``).

A session's own workspace (kind ``session``, not shared from another session) is removed
through the backend that opened it. A shared workspace belongs to the session it was shared
from and stays; a ``project`` workspace is the profile's folder and always stays.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..contracts import DescriptorEvent, InboxAccepted, SessionStore, UserMessage, Workspace
from ..errors import ErrorCode, StoreError
from ._backends import DEFAULT_BACKEND, DEFAULT_KIND
from ._place import WORKSPACE_DESCRIPTOR, WorkspacePlan, root_of

if TYPE_CHECKING:
    from ..runtime import Runtime

__all__ = ("SETUP_EVENTS", "recorded_plan", "remove_workspaces")

#: How many events after a session's seed its ``workspace`` record is looked for in.
SETUP_EVENTS = 32


async def recorded_plan(store: SessionStore, session_id: str) -> WorkspacePlan | None:
    """The ``workspace`` record of the session (in its setup window), or ``None`` when it has
    none or the store no longer has the session."""
    try:
        header = await store.header(session_id)
    except StoreError as exc:
        if exc.code is ErrorCode.SESSION_NOT_FOUND:
            return None
        raise
    window = await store.events(session_id, after=header.seed_length, limit=SETUP_EVENTS)
    for stored in window:
        event = stored.event
        if isinstance(event, DescriptorEvent) and event.kind == WORKSPACE_DESCRIPTOR:
            return WorkspacePlan.read(event, session_id)
        if isinstance(event, UserMessage | InboxAccepted):
            break
    return None


async def remove_workspaces(
    runtime: Runtime,
    session_ids: Iterable[str],
    *,
    store: SessionStore | None = None,
    plans: Mapping[str, WorkspacePlan | None] | None = None,
) -> list[Path]:
    """Remove the workspaces the sessions ``session_ids`` own, through their backends, and
    return the folders removed. Idempotent: a folder already gone is skipped, and a session
    the store no longer has is taken to have had the profile's default workspace. A shared
    workspace (a child that shares its parent's) and a ``project`` one are never removed.
    Call it with the sessions still in ``store`` (default: the runtime's) so each one's
    record is read, or after deleting them with ``plans``: their records read before (what
    ``tether sessions delete|prune`` do: the folders go once the store's transaction
    committed)."""
    store = store if store is not None else runtime.store
    table = runtime.kernel.profile.tether.workspace
    removed: list[Path] = []
    for session_id in dict.fromkeys(session_ids):
        if plans is not None and session_id in plans:
            plan = plans[session_id]
        else:
            plan = await recorded_plan(store, session_id) if store is not None else None
        if plan is None:
            kind = table.kind if table is not None else DEFAULT_KIND
            if kind != "session" or not _plain(session_id):
                continue
            backend = table.backend if table is not None else DEFAULT_BACKEND
            plan = WorkspacePlan("session", backend, session_id)
        if (
            not _plain(session_id)
            or plan.kind != "session"
            or plan.shared_from is not None
            or plan.root is not None
            or plan.owner != session_id
        ):
            continue
        root = root_of(plan, runtime, store)
        if not os.path.lexists(root):
            continue
        backend = runtime.workspaces.backend(plan.backend)
        await backend.remove(Workspace(root=root, backend=plan.backend, owner=session_id))
        removed.append(root)
    return removed


def _plain(session_id: str) -> bool:
    """Whether ``session_id`` can name a folder of the workspaces folder (never a path)."""
    return session_id not in ("", ".", "..") and not any(c in session_id for c in "/\\\0")
