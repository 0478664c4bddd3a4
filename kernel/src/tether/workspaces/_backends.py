"""Which backend a name means, and the kinds a workspace can be: what ``[tether] workspace``
is checked against at load (``WORKSPACE_INVALID``) and what a runtime opens with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from ..contracts import WorkspaceBackend, WorkspaceKind
from ..errors import ErrorCode, WorkspaceError

__all__ = (
    "DEFAULT_BACKEND",
    "DEFAULT_KIND",
    "KINDS",
    "WORKSPACE_HOOK",
    "WORKSPACE_KEY",
    "check_kind",
    "find_backend",
)

#: The hook that offers workspace backends.
WORKSPACE_HOOK = "tether_workspace_backends"
#: Where a profile sets its workspace, for messages.
WORKSPACE_KEY = "[tether] workspace"
#: The backend of a profile that names none.
DEFAULT_BACKEND = "local"
#: The kind of a profile that names none: a folder per session.
DEFAULT_KIND: WorkspaceKind = "session"
#: Every kind a workspace can be.
KINDS: tuple[WorkspaceKind, ...] = get_args(WorkspaceKind)


def check_kind(kind: str, *, key: str = WORKSPACE_KEY) -> WorkspaceKind:
    """``kind`` if it is one of :data:`KINDS`, else ``WORKSPACE_INVALID``."""
    for known in KINDS:
        if kind == known:
            return known
    raise WorkspaceError(
        ErrorCode.WORKSPACE_INVALID,
        f'unknown workspace kind "{kind}"',
        key=key,
        remedy='write kind = "session" (a folder per session, the default) or kind = "project" '
        "(the profile's folder)",
    )


def find_backend(
    name: str, backends: Iterable[WorkspaceBackend], *, key: str = WORKSPACE_KEY
) -> WorkspaceBackend:
    """The first of ``backends`` called ``name``, else ``WORKSPACE_INVALID`` listing them."""
    known: dict[str, WorkspaceBackend] = {}
    for backend in backends:
        known.setdefault(backend.name, backend)
    found = known.get(name)
    if found is not None:
        return found
    import difflib  # an error's path only

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f'did you mean "{close[0]}"? ' if close else ""
    listing = ", ".join(
        f'"{b.name}"' + (" (isolated)" if b.isolated else "") for b in known.values()
    )
    raise WorkspaceError(
        ErrorCode.WORKSPACE_INVALID,
        f'unknown workspace backend "{name}"',
        key=key,
        remedy=f"{hint}known backends: {listing or 'none'}; a plugin in [tether] plugins can "
        "offer others (tether_workspace_backends)",
    )
