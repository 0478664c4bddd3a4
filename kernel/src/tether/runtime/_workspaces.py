"""A runtime's workspaces: its backends by name, and the folder session workspaces live in.

* a SQLite store: ``workspaces/`` next to the database file (``.tether/workspaces/`` by
  default), so a session and its workspace live and move together;
* the memory store, whose sessions end with the process: a temporary folder of the runtime's
  own, removed when the runtime closes (or is collected, or the process exits);
* any other store (a server's, PostgreSQL): ``.tether/workspaces/`` in the profile's folder.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..contracts import SessionStore, WorkspaceBackend
from ..workspaces._backends import find_backend
from ._state import StateKey

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ("WORKSPACES", "RuntimeWorkspaces")

#: Where session workspaces live when the store says nothing of its own location.
PROFILE_WORKSPACES = Path(".tether") / "workspaces"


class RuntimeWorkspaces:
    """The workspace backends of one runtime (asked of its plugins once) and the folders
    session workspaces are made in, one per store its agents use."""

    __slots__ = ("__weakref__", "_backends", "_cleanups", "_folders", "_runtime")

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._backends: dict[str, WorkspaceBackend] | None = None
        # id(store) -> (the store, kept so its id is not reused, and its folder).
        self._folders: dict[int, tuple[SessionStore | None, Path]] = {}
        self._cleanups: list[Callable[[], object]] = []

    def backend(self, name: str) -> WorkspaceBackend:
        """The backend ``name``: the first the global layer's plugins offer, in profile order
        (the built-in plugin last); ``WORKSPACE_INVALID`` listing them when none does."""
        backends: dict[str, WorkspaceBackend] | None = self._backends
        if backends is None:
            from ..loading._workspaces import workspace_backends

            backends = {}
            for backend in workspace_backends(self._runtime.kernel):
                backends.setdefault(backend.name, backend)  # the first of a name wins
            self._backends = backends
        found = backends.get(name)
        return found if found is not None else find_backend(name, backends.values())

    def folder(self, store: SessionStore | None = None) -> Path:
        """The folder session workspaces of ``store`` (default: the runtime's) are made in:
        next to a SQLite store's file, a temporary folder for a memory store (removed with the
        runtime), else ``.tether/workspaces`` in the profile's folder (docs/workspaces.md)."""
        if store is None:
            store = self._runtime.store
        known = self._folders.get(id(store))
        if known is not None and known[0] is store:
            return known[1]
        folder = self._locate(store)
        self._folders[id(store)] = (store, folder)
        return folder

    def _locate(self, store: SessionStore | None) -> Path:
        from ..store._memory import MemoryStore
        from ..store._sqlite import SQLiteStore

        if isinstance(store, SQLiteStore):
            return store.path.absolute().parent / "workspaces"
        if isinstance(store, MemoryStore):
            folder = Path(tempfile.mkdtemp(prefix="tether-workspaces-"))
            self._cleanups.append(weakref.finalize(self, shutil.rmtree, folder, True))
            return folder
        return self._runtime.kernel.profile.folder / PROFILE_WORKSPACES

    async def aclose(self) -> None:
        """The runtime closes: the temporary folders (the memory stores') go with it."""
        for cleanup in self._cleanups:
            cleanup()


#: The runtime's workspaces (``Runtime.workspaces``).
WORKSPACES = StateKey("tether workspaces", RuntimeWorkspaces)
