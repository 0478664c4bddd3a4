"""Where skills live for a working directory: the roots, their ranks and their sources."""

from __future__ import annotations

import importlib.resources
import os
from dataclasses import dataclass
from pathlib import Path

from ._settings import FOLDERS, Settings, split_package_root

__all__ = (
    "CUSTOM_RANK",
    "PACKAGE_RANK",
    "PROJECT_RANK",
    "PROJECT_SOURCE_PREFIX",
    "USER_RANK",
    "Root",
    "find_roots",
    "inside",
    "project_root",
)

#: ``<project>/.agents/skills`` (dsh's project-agents rank); the project's other folders rank
#: one more each (``.claude/skills`` 201), below runtime skills (250).
PROJECT_RANK = 200.0
#: Folders named in ``roots`` (dsh's custom rank).
CUSTOM_RANK = 300.0
#: The source of a project's folder starts with this (``project-agents``, ``project-claude``).
PROJECT_SOURCE_PREFIX = "project-"
#: ``~/.agents/skills`` (dsh's user-agents rank); the home folder's other folders rank one more
#: each (``~/.claude/skills`` 501), above package roots (550).
USER_RANK = 500.0
#: ``pkg:PACKAGE/FOLDER`` roots: skills a library ships, below the user's own.
PACKAGE_RANK = 550.0


@dataclass(frozen=True, slots=True)
class Root:
    """One folder of skills."""

    path: Path | None
    """The folder; ``None`` when it could not be found (see :attr:`problem`)."""
    rank: float
    source: str
    """``project-agents``, ``project-claude``..., ``custom``, ``user-agents``,
    ``user-claude``... or ``package``."""
    label: str
    """How the settings spelled it, for messages."""
    problem: tuple[str, str] | None = None
    """Why :attr:`path` is ``None``, as (problem, remedy)."""
    boundary: str | None = None
    """For a project's folder: the project root (symlinks resolved), which every skill of
    the root, followed through its links, must stay inside."""

    @property
    def explicit(self) -> bool:
        """Named in the settings (``roots``): missing or empty, it deserves a word."""
        return self.source in ("custom", "package")


def inside(path: str, boundary: str) -> bool:
    """Whether ``path``, symlinks resolved, is ``boundary`` or below it (``boundary`` resolved
    already)."""
    real = os.path.realpath(path)
    return real == boundary or real.startswith(boundary.rstrip(os.sep) + os.sep)


def project_root(cwd: Path) -> Path:
    """The nearest ancestor of ``cwd`` (itself included) holding ``.git``, else ``cwd``."""
    start = cwd.absolute()
    for folder in (start, *start.parents):
        if os.path.exists(os.path.join(folder, ".git")):  # a folder, or a worktree's file
            return folder
    return start


def _package_folder(spec: str) -> tuple[Path | None, tuple[str, str] | None]:
    """The folder of a ``pkg:`` root, or ``None`` and why (problem, remedy)."""
    package, parts = split_package_root(spec)
    try:
        base = importlib.resources.files(package)
    except ModuleNotFoundError as exc:
        missing = exc.name or package
        if package == missing or package.startswith(f"{missing}."):
            return None, (
                f"package {package} is not installed",
                "install it (uv add ...) or remove the root from [plugin.skills-fs] roots",
            )
        return None, (f"importing {package} failed: {exc}", "fix its installation")
    except Exception as exc:  # a package whose import fails must not break the catalog
        return None, (
            f"importing {package} failed: {type(exc).__name__}: {exc}",
            "fix its installation",
        )
    folder = base.joinpath(*parts) if parts else base
    if not isinstance(folder, Path):
        return None, (
            f"package {package} is not installed as files on disk (zipped?)",
            "install it unzipped",
        )
    return folder, None


def find_roots(settings: Settings, cwd: Path) -> list[Root]:
    """The roots to scan for ``cwd``, best rank first (settings order within a rank).

    A folder reached twice (the project root is the home folder, a custom root repeats the
    user root) is scanned once, under its best rank. A root that cannot be resolved has no
    path and says why.
    """
    roots: list[Root] = []
    if settings.project:
        project = project_root(cwd)
        boundary = os.path.realpath(project)
        for index, family in enumerate(settings.folders):
            folder = project / FOLDERS[family][0]
            roots.append(
                Root(
                    folder,
                    PROJECT_RANK + index,
                    f"{PROJECT_SOURCE_PREFIX}{family}",
                    str(folder),
                    None,
                    boundary,
                )
            )
    for root in settings.roots:
        if isinstance(root, str):
            folder, problem = _package_folder(root)
            roots.append(Root(folder, PACKAGE_RANK, "package", root, problem))
        else:
            folder = root if root.is_absolute() else cwd / root
            roots.append(Root(folder, CUSTOM_RANK, "custom", str(root)))
    if settings.user and settings.folders:
        try:
            home = Path.home()
        except RuntimeError:  # no $HOME and no password entry
            problem = ("the home folder is unknown", "set $HOME")
            family = settings.folders[0]  # one line says it for every folder of the home
            label = f"~/{FOLDERS[family][1]}"
            roots.append(Root(None, USER_RANK, f"user-{family}", label, problem))
        else:
            for index, family in enumerate(settings.folders):
                folder = home / FOLDERS[family][1]
                roots.append(Root(folder, USER_RANK + index, f"user-{family}", str(folder)))
    roots.sort(key=lambda root: root.rank)
    seen: set[str] = set()
    unique: list[Root] = []
    for root in roots:
        if root.path is not None:
            real = os.path.realpath(root.path)
            if real in seen:
                continue
            seen.add(real)
        unique.append(root)
    return unique
