"""``[plugin.skills-fs]``: which skill roots to scan, and how far."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator

import tether
from tether.loading import ContainedPath
from tether.skills import SKILL_FILE_MAX_BYTES

__all__ = (
    "DEFAULT_MAX_BUNDLED_FILES",
    "DEFAULT_MAX_SKILLS_PER_ROOT",
    "PACKAGE_PREFIX",
    "PackageRoot",
    "Settings",
    "SkillRoot",
    "split_package_root",
)

#: Room for a 10,000-skill collection twice over, even in a single root.
DEFAULT_MAX_SKILLS_PER_ROOT = 20_000
#: Files listed for the model when a packaged skill is loaded: a skill's scripts and references
#: fit, a vendored dependency tree does not (the rest is counted, not listed).
DEFAULT_MAX_BUNDLED_FILES = 100
#: A root spelled ``pkg:PACKAGE/FOLDER`` lives inside an installed Python package.
PACKAGE_PREFIX = "pkg:"

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_PACKAGE_ROOT = re.compile(rf"^pkg:({_IDENTIFIER}(?:\.{_IDENTIFIER})*)((?:/[^/\\]+)*)/?$")


def split_package_root(value: str) -> tuple[str, tuple[str, ...]]:
    """``"pkg:my_library/skills"`` → ``("my_library", ("skills",))``; ``ValueError`` if not."""
    match = _PACKAGE_ROOT.match(value)
    parts = tuple(part for part in (match[2] if match else "").split("/") if part)
    if match is None or any(part in (".", "..") for part in parts):
        raise ValueError(
            f"{value!r} is not a package root: write pkg:PACKAGE/FOLDER, e.g. pkg:my_library/skills"
        )
    return match[1], parts


def _check_package_root(value: str) -> str:
    split_package_root(value)
    return value


#: ``pkg:PACKAGE/FOLDER``: a folder inside an installed, importable Python package.
PackageRoot = Annotated[str, AfterValidator(_check_package_root)]


def _root_kind(value: Any) -> str:
    is_package = isinstance(value, str) and value.startswith(PACKAGE_PREFIX)
    return "package" if is_package else "directory"


#: A custom root: ``pkg:PACKAGE/FOLDER`` (kept as ``str``) or a folder (a ``Path``; relative
#: paths resolve against the folder of the file that wrote the key, and must stay inside it
#: unless the profile the user runs allows it: :data:`tether.loading.ContainedPath`).
SkillRoot = Annotated[
    Annotated[PackageRoot, Tag("package")] | Annotated[ContainedPath, Tag("directory")],
    Discriminator(_root_kind),
]


class Settings(tether.PluginSettings):
    """``[plugin.skills-fs]`` (or ``[agent.NAME.plugin.skills-fs]``)."""

    roots: tuple[SkillRoot, ...] = ()
    """Extra skill folders, in priority order (one string is one root). Folders rank 300;
    relative ones resolve against the profile's folder (settings made in code without a profile:
    against the working directory). ``pkg:PACKAGE/FOLDER`` roots inside installed packages rank
    550."""
    project: bool = True
    """Scan ``.agents/skills`` in the project root (the nearest ancestor of the working directory
    holding ``.git``, else the working directory itself), rank 200."""
    user: bool = True
    """Scan ``~/.agents/skills`` (``$HOME`` is respected), rank 500."""
    max_skills_per_root: int = Field(default=DEFAULT_MAX_SKILLS_PER_ROOT, ge=1)
    """At most this many entries (skill folders and ``.md`` files, by name) are read per root;
    a root with more is cut, with a warning."""
    max_skill_file_bytes: int = Field(default=SKILL_FILE_MAX_BYTES, ge=1)
    """A ``SKILL.md`` (or flat ``NAME.md``) larger than this many bytes is skipped, with a
    warning naming its size and this cap. Only regular files are read, whatever the cap."""
    max_bundled_files: int = Field(default=DEFAULT_MAX_BUNDLED_FILES, ge=0)
    """When a packaged skill is loaded, at most this many of the files beside its ``SKILL.md``
    are listed for the model (the rest are counted); 0 lists none."""

    @field_validator("roots", mode="before")
    @classmethod
    def _one_root(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value
