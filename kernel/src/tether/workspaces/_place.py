"""Where an agent's workspace is: the ``workspace`` record of its session, and the agent's
collaborator that opens it (``agent.workspace``).

A session's workspace is decided once, when the session is created, and recorded in its log as
a ``workspace`` descriptor (:class:`WorkspacePlan`): its kind, its backend, the session that
owns it, the session it was shared from, and its folder when one was given (an ACP client's
working folder). A restored session, a continued child and ``remove_workspaces`` read the
record, so they find the same folder; the folder itself is derived again from the record (the
store's location and the profile's folder may move with the project).

* a root session: the profile's ``[tether] workspace`` (default: a folder of its own under
  the store's location, the ``local`` backend), or the folder it was composed with (``cwd``);
* a child (``tether.subagents``): its parent's, shared, or a folder of its own on its parent's
  backend (:func:`child_plan`).
"""

from __future__ import annotations

import dataclasses
import os
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contracts import DescriptorEvent, SessionStore, Workspace, WorkspaceKind
from ..errors import ErrorCode, WorkspaceError
from ._backends import DEFAULT_BACKEND, DEFAULT_KIND, KINDS

if TYPE_CHECKING:
    from ..agents import Agent
    from ..runtime import Runtime

__all__ = (
    "WORKSPACE_DESCRIPTOR",
    "AgentWorkspace",
    "WorkspacePlan",
    "child_plan",
    "profile_plan",
    "root_of",
)

#: The kind of the descriptor that records a session's workspace.
WORKSPACE_DESCRIPTOR = "workspace"


@dataclass(frozen=True, slots=True)
class WorkspacePlan:
    """What a session's ``workspace`` descriptor records."""

    kind: WorkspaceKind
    backend: str
    owner: str
    """The session whose workspace it is (removed with that session, when ``session``)."""
    shared_from: str | None = None
    """The session (the parent) it was shared from; ``None``: the session's own (``owner``
    says whose it is, the first session of a chain of sharing children)."""
    root: str | None = None
    """The folder, when it was given rather than derived (an explicit working folder)."""

    def descriptor(self) -> DescriptorEvent:
        """The record of this plan for the session's log."""
        data: dict[str, Any] = {"kind": self.kind, "backend": self.backend, "owner": self.owner}
        if self.shared_from is not None:
            data["shared_from"] = self.shared_from
        if self.root is not None:
            data["root"] = self.root
        return DescriptorEvent(kind=WORKSPACE_DESCRIPTOR, version=1, data=data)

    @classmethod
    def read(cls, event: DescriptorEvent, session_id: str) -> WorkspacePlan:
        """The plan a ``workspace`` descriptor records (``WORKSPACE_INVALID`` if it is not
        one this version wrote)."""
        data = event.data
        kind, backend, owner = data.get("kind"), data.get("backend"), data.get("owner")
        shared, root = data.get("shared_from"), data.get("root")
        if (
            kind not in KINDS
            or not isinstance(backend, str)
            or not isinstance(owner, str)
            or not (shared is None or isinstance(shared, str))
            or not (root is None or isinstance(root, str))
        ):
            raise WorkspaceError(
                ErrorCode.WORKSPACE_INVALID,
                f'session "{session_id}" records a workspace tether cannot read: {data!r}',
                remedy="the log was written by another version or edited; continue it with "
                "the tether that wrote it",
            )
        return cls(kind, backend, owner, shared, root)


def _check_owner(owner: str) -> str:
    if not owner or owner in (".", "..") or "/" in owner or "\\" in owner or "\0" in owner:
        raise WorkspaceError(
            ErrorCode.WORKSPACE_INVALID,
            f"session id {owner!r} cannot name a workspace folder",
            remedy="use a session id without '/', '\\\\' or NUL (tether's own ids are ses_...)",
        )
    return owner


def profile_plan(runtime: Runtime, session_id: str, cwd: Path | None = None) -> WorkspacePlan:
    """The workspace of a new root session of ``runtime``'s profile: ``cwd``, when it was
    composed with one, else ``[tether] workspace``."""
    table = runtime.kernel.profile.tether.workspace
    backend = table.backend if table is not None else DEFAULT_BACKEND
    if cwd is not None:
        return WorkspacePlan("project", backend, session_id, root=os.path.abspath(cwd))
    kind = table.kind if table is not None else DEFAULT_KIND
    return WorkspacePlan(
        "project" if kind == "project" else "session", backend, _check_owner(session_id)
    )


def child_plan(
    parent: Workspace, child_id: str, *, share: bool, parent_id: str | None = None
) -> WorkspacePlan:
    """A child's workspace: its parent's (``share``; ``shared_from`` names the parent session
    ``parent_id``, default the workspace's owner), else a folder of its own on the parent's
    backend (a ``project`` parent's child gets a ``session`` folder of its own too).

    A shared ``session`` workspace is found again from its owner, as its owner finds it; a
    shared ``project`` one records its folder."""
    if share:
        return WorkspacePlan(
            parent.kind,
            parent.backend,
            parent.owner,
            shared_from=parent_id or parent.owner,
            root=str(parent.root) if parent.kind == "project" else None,
        )
    return WorkspacePlan("session", parent.backend, _check_owner(child_id))


def root_of(plan: WorkspacePlan, runtime: Runtime, store: SessionStore | None = None) -> Path:
    """The folder of ``plan`` in ``runtime``: the recorded one, the profile's folder
    (``project``), or ``<workspaces folder of store>/<owner>`` (``session``; ``store``
    default: the runtime's)."""
    if plan.root is not None:
        return Path(plan.root)
    if plan.kind == "project":
        return runtime.kernel.profile.folder
    return runtime.workspaces.folder(store) / _check_owner(plan.owner)


class AgentWorkspace:
    """Where an agent works: the folder it was started from (``agent.cwd``) and its workspace
    (``agent.workspace``), decided from its log's record, or from its profile for a new root
    session (then recorded), and opened as the agent enters."""

    __slots__ = ("_cwd", "_owner", "_plan", "_workspace")

    def __init__(self, agent: Agent) -> None:
        self._owner = weakref.ref(agent)
        self._plan: WorkspacePlan | None = None
        self._workspace: Workspace | None = None
        # The process's working folder now, as a string: a Path is made on first use.
        cwd = agent.spec.cwd
        self._cwd: Path | str = cwd if cwd is not None else os.getcwd()

    @property
    def cwd(self) -> Path:
        """The folder the agent was started from (``agent.cwd``): the one it was given, else
        the process's when it was made. Skill providers look for skills from there."""
        cwd = self._cwd
        if isinstance(cwd, str):
            cwd = self._cwd = Path(cwd)
        return cwd

    @property
    def _agent(self) -> Agent:
        """The agent, held weakly (as its other collaborators hold it): no reference cycle
        leaves a finished agent to the cyclic collector."""
        agent = self._owner()
        assert agent is not None, "the agent was collected"
        return agent

    def restored(self, record: DescriptorEvent | None) -> None:
        """The session's log was read: its ``workspace`` record, if it has one."""
        if record is not None:
            self._plan = WorkspacePlan.read(record, self._agent.session_id)

    def _decided(self) -> WorkspacePlan | None:
        """The recorded plan, else the profile's for this session (``None``: no runtime)."""
        agent = self._agent
        runtime = agent.runtime
        if self._plan is not None or runtime is None:
            return self._plan
        header = agent.header
        root = header.parent_session is None and header.delegation_depth == 0
        return profile_plan(runtime, agent.session_id, agent.spec.cwd if root else None)

    async def enter(self, *, fresh: bool) -> None:
        """Open the workspace as the agent enters; a new session (``fresh``) records where."""
        agent = self._agent
        runtime = agent.runtime
        plan = self._decided()
        if plan is None or runtime is None:
            self._workspace = self._bare()
            return
        if self._plan is None:
            self._plan = plan
            if fresh:
                agent.lease.defer(plan.descriptor())
        backend = runtime.workspaces.backend(plan.backend)
        opened = await backend.open(root_of(plan, runtime, agent.store), owner=plan.owner)
        self._workspace = dataclasses.replace(
            opened, owner=plan.owner, kind=plan.kind, shared_from=plan.shared_from
        )

    def _bare(self) -> Workspace:
        """An agent without a runtime: its working folder, on no backend's terms."""
        agent = self._agent
        root = Path(os.path.realpath(self.cwd))
        return Workspace(root=root, backend=DEFAULT_BACKEND, owner=agent.session_id, kind="project")

    @property
    def current(self) -> Workspace:
        """The workspace: the one opened as the agent entered, else where it will be."""
        workspace = self._workspace
        if workspace is not None:
            return workspace
        plan = self._decided()
        runtime = self._agent.runtime
        if plan is None or runtime is None:
            return self._bare()
        root = Path(os.path.realpath(root_of(plan, runtime, self._agent.store)))
        return Workspace(
            root=root,
            backend=plan.backend,
            owner=plan.owner,
            kind=plan.kind,
            shared_from=plan.shared_from,
        )
