"""The trust boundary of project files: a path a file names stays inside that file's folder.

A profile, a file it extends and an agent folder's ``agent.toml`` name other files
(instructions, plugin folders, agent folders, skill roots, model scripts, the file ``extends``
names). Each such path must resolve, symbolic links followed, inside the folder of the file that
wrote it (for an agent folder: the agent's folder): a cloned repository's ``agent.toml`` cannot
put ``/etc/passwd`` in a system prompt, and a link inside the folder that points outside is
outside. A path outside is refused with ``PATH_OUTSIDE_FOLDER`` unless the profile the user
runs (the file ``--profile`` names, or ``tether.toml`` of the current directory: never a file it
extends, never an ``agent.toml``) lists it, or a folder holding it, in ``[tether]
allow_outside`` (see docs/trust.md). A key set in code (:func:`tether.loading.profile_from_dict`
without a file) is the host program's own word and is not checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from ..errors import ErrorCode, ProfileError

__all__ = (
    "ALLOW_KEY",
    "BOUNDARY_CONTEXT",
    "Boundary",
    "allowed_paths",
    "boundary_of",
    "is_inside",
    "real_path",
)

#: The ``[tether]`` key of the profile the user runs that lets paths reach outside their folder.
ALLOW_KEY = "allow_outside"
#: The key in a pydantic validation context that holds the :class:`Boundary` of a settings table.
BOUNDARY_CONTEXT = "tether_boundary"


def real_path(path: Path) -> Path:
    """``path`` absolute, with every symbolic link followed as far as it exists (a missing tail
    is kept as written); a path that cannot be resolved (a link loop) is returned absolute."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.abspath(path))


def is_inside(path: Path, folder: Path) -> bool:
    """Whether the resolved ``path`` is ``folder`` or below it (both resolved)."""
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Boundary:
    """What the profile the user runs allows outside the folders of the files that name paths."""

    allowed: tuple[Path, ...] = ()
    """Resolved paths of ``[tether] allow_outside``: each, and everything below it, may be
    named from any file of the profile."""
    profile: Path | None = None
    """The profile the user runs: where ``allow_outside`` goes (named in the fix)."""
    fields: Mapping[str, Path] = field(default_factory=dict[str, Path])
    """For a settings table: the file that wrote each field."""
    table: str = ""
    """For a settings table: its key (``[agent.main.plugin.skills-fs]``), for errors."""

    def check(self, path: Path, *, folder: Path, file: Path | None, key: str) -> Path:
        """``path`` resolved, when it is inside ``folder`` (the folder that declares it: the
        folder of ``file``, which wrote ``key``, or an agent's folder for the files it holds) or
        an allowed path; else ``PATH_OUTSIDE_FOLDER`` naming the file, the key, the path and the
        fix."""
        resolved = real_path(path)
        home = real_path(folder)
        if is_inside(resolved, home) or any(is_inside(resolved, a) for a in self.allowed):
            return resolved
        shown = str(path) if str(path) == str(resolved) else f"{path} (resolved: {resolved})"
        where = f"in {self.profile}" if self.profile is not None else "in the profile you run"
        raise ProfileError(
            ErrorCode.PATH_OUTSIDE_FOLDER,
            f"{key} names {shown}, outside {home}, the folder that declares it",
            file=file,
            key=key,
            remedy=f"move the file into {home}, or allow it {where}: [tether] {ALLOW_KEY} = "
            f'["{resolved}"] (only the profile you run can; see docs/trust.md)',
        )

    def check_setting(self, name: str | None, path: Path) -> Path:
        """:meth:`check` for field ``name`` of a settings table, against the folder of the file
        that wrote it; a field set in code is not checked."""
        file = self.fields.get(name or "")
        if file is None:
            return path
        key = f"{self.table} {name}" if self.table else str(name)
        return self.check(path, folder=file.parent, file=file, key=key)


def boundary_of(context: object) -> Boundary | None:
    """The :class:`Boundary` a validation context holds, if any."""
    if not isinstance(context, Mapping):
        return None
    found = cast("Mapping[str, object]", context).get(BOUNDARY_CONTEXT)
    return found if isinstance(found, Boundary) else None


def allowed_paths(entries: Iterable[Path]) -> tuple[Path, ...]:
    """``[tether] allow_outside`` entries, resolved."""
    return tuple(real_path(entry) for entry in entries)
