"""The built-in plugin ``tether.workspaces``: the ``local`` and ``userns`` workspace backends.

Every kernel loads it in its global layer, after the profile's plugins, exactly as it loads an
installed plugin (see :data:`tether.loading.BUILTIN_PLUGINS`): a plugin of the profile that
offers a backend of the same name wins.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..contracts import WorkspaceBackend
from ..hookspecs import hookimpl
from ._local import LocalBackend
from ._userns import UsernsBackend

__all__ = ("tether_workspace_backends",)


@hookimpl
def tether_workspace_backends() -> Iterable[WorkspaceBackend]:
    """The built-in backends (new objects per kernel: a backend remembers its own checks)."""
    return (LocalBackend(), UsernsBackend())
