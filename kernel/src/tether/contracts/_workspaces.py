"""The workspace contract: where an agent's files live and where its commands run
(docs/workspaces.md).

Every agent has a **workspace**: a folder on this machine (:attr:`Workspace.root`) that its file
tools are confined to, that a loaded skill's bundled files are written into
(``skills/<name>/``), where oversized tool results are kept (``.tether/results/``), and that ACP
and MCP roots report. By default it is a per-session folder under the store's location
(``<store folder>/workspaces/<session id>/``), or the project folder when the profile says so
(``[tether] workspace = {kind = "project"}``). The root-only copy and forks share their
parent's; declared subagents and spawns get their own unless their definition says to share.

A :class:`WorkspaceBackend` (offered by the ``tether_workspace_backends`` hook) opens
workspaces and runs commands in them: ``local`` runs them as plain subprocesses in the folder;
an *isolated* backend (``userns``: a user-namespace sandbox) runs them where nothing outside the
workspace can be read or written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

__all__ = ("CommandResult", "Workspace", "WorkspaceBackend", "WorkspaceKind")

WorkspaceKind = Literal["session", "project"]
"""``session``: a folder of the session's own under the store's location (the default);
``project``: the profile's folder, shared by every session of the profile."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """One agent's workspace: its folder and the backend that runs commands in it.

    ``owner`` is the session the workspace belongs to (removed with it); a shared workspace
    names the session it was shared from in ``shared_from`` and belongs to that session."""

    root: Path
    """The folder, absolute and resolved (no symbolic link in it)."""
    backend: str
    """The name of the :class:`WorkspaceBackend` that opened it (``local``, ``userns``)."""
    owner: str
    """The id of the session that owns it."""
    kind: WorkspaceKind = "session"
    shared_from: str | None = None
    """The session whose workspace this is, when the agent shares its parent's."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command run in a workspace did: its exit status and its output, each cut to the
    backend's limit (``truncated`` says whether anything was cut)."""

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False


@runtime_checkable
class WorkspaceBackend(Protocol):
    """Opens workspaces and runs commands in them (``tether_workspace_backends``).

    ``open`` creates the folder if it is missing (idempotent, safe when two processes open the
    same workspace at once) and answers quickly: it runs for every new child. ``run`` runs
    ``argv`` with the workspace root as its working folder; an ``isolated`` backend guarantees
    the command cannot read or write outside the root (nor see the host's processes).
    ``remove`` deletes the workspace's folder and everything in it; idempotent. A backend that
    cannot work on this machine raises ``WORKSPACE_UNAVAILABLE`` saying why."""

    name: str
    isolated: bool

    async def open(self, root: Path, *, owner: str) -> Workspace: ...

    async def run(
        self,
        workspace: Workspace,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit: int = 100_000,
    ) -> CommandResult: ...

    async def remove(self, workspace: Workspace) -> None: ...
