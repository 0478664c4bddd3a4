"""``[plugin.skills-fs]``: which skill roots to scan, and how far."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Discriminator, Field, Tag, field_validator

import tether
from tether.loading import ContainedPath
from tether.skills import SKILL_FILE_MAX_BYTES

__all__ = (
    "DEFAULT_FOLDERS",
    "DEFAULT_MAX_BUNDLED_FILES",
    "DEFAULT_MAX_SKILLS_PER_ROOT",
    "FOLDERS",
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

#: The skill folders agents document, by family: (in the project, in the home folder). Each is
#: documented by the agent named (docs/skills.md says where; checked in 2026):
FOLDERS: dict[str, tuple[str, str]] = {
    # the cross-client folder: Codex, GitHub Copilot, Gemini CLI, OpenCode and Cursor read it
    "agents": (".agents/skills", ".agents/skills"),
    # Claude Code's; GitHub Copilot, OpenCode and Cursor read it too
    "claude": (".claude/skills", ".claude/skills"),
    # GitHub Copilot (cloud agent, CLI, VS Code)
    "copilot": (".github/skills", ".copilot/skills"),
    # Gemini CLI
    "gemini": (".gemini/skills", ".gemini/skills"),
    # OpenCode
    "opencode": (".opencode/skills", ".config/opencode/skills"),
    # Cursor
    "cursor": (".cursor/skills", ".cursor/skills"),
    # Codex's earlier folders (Codex now reads .agents/skills)
    "codex": (".codex/skills", ".codex/skills"),
}
#: Read unless ``folders`` says otherwise: the two folders several agents share.
DEFAULT_FOLDERS = ("agents", "claude")

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


def _check_family(value: str) -> str:
    if value not in FOLDERS:
        known = ", ".join(FOLDERS)
        raise ValueError(f"{value!r} is not a skill folder family tether knows; use one of {known}")
    return value


#: A family of well-known skill folders (a key of :data:`FOLDERS`).
FolderFamily = Annotated[str, AfterValidator(_check_family)]


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
    """Read the ``folders`` of the project root (the nearest ancestor of the working directory
    holding ``.git``, else the working directory itself): ``.agents/skills`` (rank 200),
    ``.claude/skills`` (201)... A project's skills must stay inside the project: an entry that
    links outside it is skipped."""
    user: bool = True
    """Read the ``folders`` of the home folder (``$HOME`` is respected): ``~/.agents/skills``
    (rank 500), ``~/.claude/skills`` (501)..."""
    folders: tuple[FolderFamily, ...] = DEFAULT_FOLDERS
    """The well-known skill folders to read, by family, best first: ``agents``
    (``.agents/skills``), ``claude`` (``.claude/skills``), ``copilot`` (``.github/skills``,
    ``~/.copilot/skills``), ``gemini`` (``.gemini/skills``), ``opencode`` (``.opencode/skills``,
    ``~/.config/opencode/skills``), ``cursor`` (``.cursor/skills``), ``codex``
    (``.codex/skills``). Each is read in the project (when ``project``) and in the home folder
    (when ``user``). The first ranks 200 in the project and 500 in the home folder, the next
    one more (201, 501), and so on."""
    max_skills_per_root: int = Field(default=DEFAULT_MAX_SKILLS_PER_ROOT, ge=1)
    """At most this many entries (skill folders and ``.md`` files, by name) are read per root;
    a root with more is cut, with a warning."""
    max_skill_file_bytes: int = Field(default=SKILL_FILE_MAX_BYTES, ge=1)
    """A ``SKILL.md`` (or flat ``NAME.md``) larger than this many bytes is skipped, with a
    warning naming its size and this cap. Only regular files are read, whatever the cap."""
    max_bundled_files: int = Field(default=DEFAULT_MAX_BUNDLED_FILES, ge=0)
    """When a packaged skill is loaded, at most this many of the files beside its ``SKILL.md``
    are listed for the model (the rest are counted); 0 lists none."""

    @field_validator("roots", "folders", mode="before")
    @classmethod
    def _one_root(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("folders")
    @classmethod
    def _once_each(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value))
