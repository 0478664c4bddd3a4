"""The ``local`` workspace backend: a folder on this machine, commands run as plain
subprocesses in it. It confines nothing: a command can read and write wherever the process
can (the ``userns`` backend is the isolated one)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from ..contracts import CommandResult, Workspace
from ._process import run_process

__all__ = ("LocalBackend", "make_folder", "remove_folder")


def make_folder(root: Path) -> Path:
    """Create ``root`` (and its parents) if missing, and return it resolved. Safe when two
    processes make it at once."""
    os.makedirs(root, mode=0o755, exist_ok=True)
    return Path(os.path.realpath(root))


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
        await anyio.to_thread.run_sync(remove_folder, workspace.root)
