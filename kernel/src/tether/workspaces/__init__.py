"""Workspaces: where an agent's files live and where its commands run (docs/workspaces.md).

The contract (:class:`Workspace`, :class:`WorkspaceBackend`, :class:`CommandResult`) lives in
:mod:`tether.contracts`; this room holds what is built on it:

* ``_local`` and ``_userns``: the built-in backends, offered by the built-in plugin
  ``tether.workspaces`` (``_plugin``); ``_process`` runs one command for them;
* ``_backends``: the kinds, the default backend, and finding a backend by name;
* ``_place``: a session's ``workspace`` record and an agent's workspace (``agent.workspace``);
* ``_skills``: a loaded skill's bundled files, written into the workspace;
* ``_removal``: removing sessions' workspaces with the sessions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import CommandResult, Workspace, WorkspaceBackend, WorkspaceKind
    from ._backends import (
        DEFAULT_BACKEND,
        DEFAULT_KIND,
        KINDS,
        WORKSPACE_HOOK,
        WORKSPACE_KEY,
        check_kind,
        find_backend,
    )
    from ._local import LocalBackend
    from ._place import (
        WORKSPACE_DESCRIPTOR,
        AgentWorkspace,
        WorkspacePlan,
        child_plan,
        profile_plan,
        root_of,
    )
    from ._removal import recorded_plan, remove_workspaces
    from ._skills import (
        SKILL_FILE_MAX_BYTES,
        SKILL_FILES_MAX_BYTES,
        SKILL_FILES_MAX_COUNT,
        SKILL_MARKER,
        SKILLS_FOLDER,
        install_skill_files,
        skill_folder,
    )
    from ._userns import SANDBOX_ROOT, UsernsBackend

__all__ = (
    "DEFAULT_BACKEND",
    "DEFAULT_KIND",
    "KINDS",
    "SANDBOX_ROOT",
    "SKILLS_FOLDER",
    "SKILL_FILES_MAX_BYTES",
    "SKILL_FILES_MAX_COUNT",
    "SKILL_FILE_MAX_BYTES",
    "SKILL_MARKER",
    "WORKSPACE_DESCRIPTOR",
    "WORKSPACE_HOOK",
    "WORKSPACE_KEY",
    "AgentWorkspace",
    "CommandResult",
    "LocalBackend",
    "UsernsBackend",
    "Workspace",
    "WorkspaceBackend",
    "WorkspaceKind",
    "WorkspacePlan",
    "check_kind",
    "child_plan",
    "find_backend",
    "install_skill_files",
    "profile_plan",
    "recorded_plan",
    "remove_workspaces",
    "root_of",
    "skill_folder",
)

_LAZY: dict[str, str] = {
    **dict.fromkeys(
        ("CommandResult", "Workspace", "WorkspaceBackend", "WorkspaceKind"), ".contracts"
    ),
    **dict.fromkeys(
        (
            "DEFAULT_BACKEND",
            "DEFAULT_KIND",
            "KINDS",
            "WORKSPACE_HOOK",
            "WORKSPACE_KEY",
            "check_kind",
            "find_backend",
        ),
        "_backends",
    ),
    "LocalBackend": "_local",
    **dict.fromkeys(
        (
            "WORKSPACE_DESCRIPTOR",
            "AgentWorkspace",
            "WorkspacePlan",
            "child_plan",
            "profile_plan",
            "root_of",
        ),
        "_place",
    ),
    **dict.fromkeys(("recorded_plan", "remove_workspaces"), "_removal"),
    **dict.fromkeys(
        (
            "SKILL_FILE_MAX_BYTES",
            "SKILL_FILES_MAX_BYTES",
            "SKILL_FILES_MAX_COUNT",
            "SKILL_MARKER",
            "SKILLS_FOLDER",
            "install_skill_files",
            "skill_folder",
        ),
        "_skills",
    ),
    **dict.fromkeys(("SANDBOX_ROOT", "UsernsBackend"), "_userns"),
}

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
