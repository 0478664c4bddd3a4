"""Which workspace backend and kind a kernel's profile names: checked at load, opened by the
runtime (``Runtime.workspaces.backend``).

The workspaces room knows no :class:`~tether.loading.Kernel`; the walk from a kernel's profile
to its backends is loading's, as it is for stores (``_stores``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contracts import WorkspaceBackend
from ..errors import WorkspaceError
from ..workspaces._backends import (
    DEFAULT_BACKEND,
    WORKSPACE_HOOK,
    WORKSPACE_KEY,
    check_kind,
    find_backend,
)

if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ("check_profile_workspace", "workspace_backends")


def workspace_backends(kernel: Kernel) -> list[WorkspaceBackend]:
    """The backends the plugins of the kernel's global layer offer, in profile order (the
    built-in plugin last): the first of a name wins."""
    return [
        backend
        for plugin in kernel.global_scope.plugins
        for backend in plugin.collect(WORKSPACE_HOOK, WorkspaceBackend)
    ]


def check_profile_workspace(kernel: Kernel) -> None:
    """``[tether] workspace`` names a known kind and a backend some plugin offers, else
    ``WORKSPACE_INVALID`` naming the file and the key. A backend only a local plugin the
    command did not import could offer is not checked (docs/trust.md)."""
    table = kernel.profile.tether.workspace
    if table is None:
        return
    file = kernel.profile.file_of("tether", "workspace")
    try:
        check_kind(table.kind, key=f"{WORKSPACE_KEY}.kind")
        if table.backend != DEFAULT_BACKEND and not kernel.not_imported:
            backends = workspace_backends(kernel)
            find_backend(table.backend, backends, key=f"{WORKSPACE_KEY}.backend")
    except WorkspaceError as exc:
        raise WorkspaceError(
            exc.code, exc.message, file=file, key=exc.key, remedy=exc.remedy
        ) from None
