"""Where skills live for a working directory: the roots, their ranks and their sources."""

from __future__ import annotations

import importlib.resources
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ._settings import Settings, split_package_root

__all__ = (
    "CUSTOM_RANK",
    "PACKAGE_RANK",
    "PROJECT_RANK",
    "USER_RANK",
    "Root",
    "find_roots",
    "project_root",
)

log = logging.getLogger("tether.skills.fs")

#: ``<project>/.agents/skills`` (dsh's project-agents rank).
PROJECT_RANK = 200.0
#: Folders named in ``roots`` (dsh's custom rank).
CUSTOM_RANK = 300.0
#: ``~/.agents/skills`` (dsh's user-agents rank).
USER_RANK = 500.0
#: ``pkg:PACKAGE/FOLDER`` roots: skills a library ships, below the user's own.
PACKAGE_RANK = 550.0

_AGENTS_SKILLS = (".agents", "skills")


@dataclass(frozen=True, slots=True)
class Root:
    """One folder of skills."""

    path: Path | None
    """The folder; ``None`` when a ``pkg:`` root's package could not be found."""
    rank: float
    source: str
    """``project-agents``, ``custom``, ``user-agents`` or ``package``."""
    label: str
    """How the settings spelled it, for messages."""


def project_root(cwd: Path) -> Path:
    """The nearest ancestor of ``cwd`` (itself included) holding ``.git``, else ``cwd``."""
    start = cwd.absolute()
    for folder in (start, *start.parents):
        if os.path.exists(os.path.join(folder, ".git")):  # a folder, or a worktree's file
            return folder
    return start


def _package_folder(spec: str, *, report: bool) -> Path | None:
    package, parts = split_package_root(spec)
    try:
        base = importlib.resources.files(package)
    except ModuleNotFoundError as exc:
        if report:
            missing = exc.name or package
            if package == missing or package.startswith(f"{missing}."):
                log.warning(
                    "skills root %s skipped: package %s is not installed; install it "
                    "(uv add ...) or remove the root from [plugin.skills-fs] roots",
                    spec,
                    package,
                )
            else:
                log.warning(
                    "skills root %s skipped: importing %s failed: %s; fix its installation",
                    spec,
                    package,
                    exc,
                )
        return None
    except Exception as exc:  # a package whose import fails must not break the catalog
        if report:
            log.warning(
                "skills root %s skipped: importing %s failed: %s: %s; fix its installation",
                spec,
                package,
                type(exc).__name__,
                exc,
            )
        return None
    folder = base.joinpath(*parts) if parts else base
    if not isinstance(folder, Path):
        if report:
            log.warning(
                "skills root %s skipped: package %s is not installed as files on disk (zipped?); "
                "install it unzipped",
                spec,
                package,
            )
        return None
    return folder


def find_roots(settings: Settings, cwd: Path, *, report: bool = True) -> list[Root]:
    """The roots to scan for ``cwd``, best rank first (settings order within a rank).

    A folder reached twice (the project root is the home folder, a custom root repeats the
    user root) is scanned once, under its best rank. ``report`` logs roots that cannot be
    resolved.
    """
    roots: list[Root] = []
    if settings.project:
        folder = project_root(cwd).joinpath(*_AGENTS_SKILLS)
        roots.append(Root(folder, PROJECT_RANK, "project-agents", str(folder)))
    for root in settings.roots:
        if isinstance(root, str):
            roots.append(Root(_package_folder(root, report=report), PACKAGE_RANK, "package", root))
        else:
            folder = root if root.is_absolute() else cwd / root
            roots.append(Root(folder, CUSTOM_RANK, "custom", str(root)))
    if settings.user:
        try:
            folder = Path.home().joinpath(*_AGENTS_SKILLS)
        except RuntimeError:  # no $HOME and no password entry
            if report:
                log.warning("user skills root skipped: the home folder is unknown; set $HOME")
        else:
            roots.append(Root(folder, USER_RANK, "user-agents", str(folder)))
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
