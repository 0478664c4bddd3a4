"""The ``local`` workspace backend: a folder on this machine, commands run as plain
subprocesses in it. It confines nothing: a command can read and write wherever the process
can (the ``userns`` backend is the isolated one)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..contracts import CommandResult, Workspace

__all__ = ("LocalBackend", "make_folder", "remove_folder")


#: Folders workspaces were made in, resolved once: ``str(parent)`` -> its real path. A new
#: child's workspace is then one ``mkdir`` (or one ``lstat``), not a walk of every component.
_REAL_PARENTS: dict[str, str] = {}
#: How many resolved parents are remembered (a process makes workspaces in a few folders).
_REAL_PARENTS_MAX = 256


def _real_parent(parent: str) -> str:
    real = _REAL_PARENTS.get(parent)
    if real is None:
        if len(_REAL_PARENTS) >= _REAL_PARENTS_MAX:
            _REAL_PARENTS.clear()
        real = _REAL_PARENTS[parent] = os.path.realpath(parent)
    return real


def make_folder(root: Path) -> Path:
    """Create ``root`` (and its parents) if missing, and return it resolved (no symbolic link
    in it). Safe when two processes make it at once. The folder it is made in is resolved
    once per process; ``root`` itself is made with ``mkdir`` (never a link) or found by
    ``lstat`` to be a folder, else resolved in full."""
    path = os.path.abspath(root)
    parent, name = os.path.split(path)
    try:
        os.mkdir(path, 0o755)
    except FileNotFoundError:
        os.makedirs(path, mode=0o755, exist_ok=True)
    except FileExistsError:
        if not os.path.isdir(path):
            raise  # a file in the way
        if os.path.islink(path):
            return Path(os.path.realpath(path))  # a link to a folder: where it leads
    return Path(_real_parent(parent), name)


def remove_folder(root: Path) -> None:
    """Delete ``root`` and everything in it; nothing when it is already gone. A symbolic link
    in it is removed, never followed."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(root)


class LocalBackend:
    """Workspaces as folders of this machine; commands as subprocesses with the folder as
    their working directory, the process's environment (with ``env`` over it), a time limit
    that kills the command's process group, and output cut to a limit."""

    name = "local"
    isolated = False

    async def open(self, root: Path, *, owner: str) -> Workspace:
        """The workspace at ``root``, created if missing (a ``mkdir``: well under a
        millisecond, which is what a new child pays)."""
        return Workspace(root=make_folder(root), backend=self.name, owner=owner)

    async def run(
        self,
        workspace: Workspace,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit: int = 100_000,
    ) -> CommandResult:
        """Run ``argv`` in the workspace's folder (see the class docstring)."""
        from ._process import run_process  # loading a profile imports no process machinery

        merged = {**os.environ, **env} if env else None
        return await run_process(
            argv,
            cwd=workspace.root,
            timeout=timeout,
            env=merged,
            stdin=stdin,
            output_limit=output_limit,
        )

    async def remove(self, workspace: Workspace) -> None:
        """Delete the workspace's folder (idempotent)."""
        import anyio.to_thread

        await anyio.to_thread.run_sync(remove_folder, workspace.root)
