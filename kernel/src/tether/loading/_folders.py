"""Agent folders: ``agents/<name>/`` read into the table an ``[agent.NAME]`` section holds.

``[tether] agents = ["agents"]`` lists folders that hold agent folders::

    agents/
    └── main/                 the agent "main"
        ├── agent.toml        description, model, plugins, [plugin.NAME], limits, approval, tool,
        │                     context_window, compaction
        ├── instructions.md   (or instructions.py) its instructions
        ├── tools/            local plugins of its layer, every one loaded
        ├── skills/           an Agent Skills root of its own (skills-fs and skill-tool)
        └── subagents/
            └── researcher/   the agent "main.researcher", its tool "researcher": same shape

Each folder becomes a plain table (:func:`read_agent_folders`); the profile merges its own
``[agent.NAME]`` table over it and validates the result like any other table
(:func:`tether.loading._profile.profile_from_dict`), so every rule of a profile applies to a
folder unchanged. This module also holds which files of a folder are local plugins
(:func:`plugin_files`), the rule ``[tether] plugin_dirs`` and ``tools/`` share.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..errors import ErrorCode, ProfileError
from ..ground import (
    MAX_NESTING,
    Boundary,
    TextFileError,
    format_loc,
    is_name,
    is_name_part,
    parse_toml_text,
    read_text_file,
)

__all__ = (
    "AGENT_FILE",
    "AGENT_FILE_KEYS",
    "INSTRUCTIONS_FILES",
    "SKILLS_PLUGINS",
    "AgentFolder",
    "plugin_files",
    "read_agent_folders",
)

#: The optional file of an agent folder that holds its settings.
AGENT_FILE = "agent.toml"
#: The keys ``agent.toml`` may set; the rest of an agent is its folders.
AGENT_FILE_KEYS = (
    "description",
    "model",
    "plugins",
    "plugin",
    "limits",
    "approval",
    "context_window",
    "compaction",
    "tool",
    "instructions",
)
#: The instructions of an agent folder: one of these files, or ``instructions`` in agent.toml.
INSTRUCTIONS_FILES = ("instructions.md", "instructions.py")
#: The plugins a ``skills/`` folder adds to its agent's layer, in this order.
SKILLS_PLUGINS = ("skills-fs", "skill-tool")

_TOOLS = "tools"
_SKILLS = "skills"
_SUBAGENTS = "subagents"

#: Why a key of ``[agent.NAME]`` is not an agent.toml key: the folder already says it.
_FOLDER_SAYS = {
    "subagents": "subagents are the folders under {folder}/subagents/; remove the key",
    "tool_name": "a subagent's tool name is its folder's name; rename the folder instead",
    "plugin_dirs": "this agent's local plugins are the files of {folder}/tools/; remove the key",
    "extends": "an agent folder extends nothing; remove the key",
}


@dataclass(frozen=True)
class AgentFolder:
    """One agent read from a folder: its name, its folder and the table it compiles to."""

    name: str
    """``main``, or ``main.researcher`` for a folder under ``main/subagents/``."""
    folder: Path
    """The agent's folder (absolute)."""
    table: dict[str, Any]
    """What an ``[agent.NAME]`` table holding the same agent would hold; paths the folder
    implies are absolute, paths agent.toml wrote are as written (relative to the folder)."""

    @property
    def file(self) -> Path:
        """The folder's agent.toml, which relative paths of the table resolve against (whether
        it exists or not)."""
        return self.folder / AGENT_FILE


def read_agent_folders(
    roots: Sequence[Path], *, file: Path | None, boundary: Boundary | None = None
) -> list[AgentFolder]:
    """Every agent of the folders ``roots`` (``[tether] agents``, resolved), subagents
    included, parents before their subagents.

    ``file`` is the profile file that listed the folders, for errors. Each direct subfolder of a
    root is an agent named after it, except folders starting with ``.`` or ``_``; any other
    folder whose name breaks the name grammar, a listed path that is not a folder, and one
    agent name made by two folders are :class:`ProfileError`. An agent folder, and each file
    or folder it holds (agent.toml, instructions, tools/, skills/, subagents/), must stay
    inside the folder that holds it once links are followed (``boundary``, see
    :mod:`tether.ground`), else ``PATH_OUTSIDE_FOLDER``.
    """
    boundary = boundary or Boundary()
    found: dict[str, AgentFolder] = {}
    for root in roots:
        if not root.is_dir():
            raise ProfileError(
                ErrorCode.PROFILE_INVALID,
                f"agents entry {str(root)!r} is not a folder",
                file=file,
                key="[tether] agents",
                remedy="create the folder or fix the path (relative to the folder of the file "
                "that wrote the key)",
            )
        for folder in _subfolders(root):
            if not is_name(folder.name):
                raise ProfileError(
                    ErrorCode.PROFILE_INVALID,
                    f"agent folder {folder.name!r} is not a valid agent name",
                    file=folder,
                    remedy="rename the folder: letters, digits, '.', '_' and '-' (at most 64, "
                    "starting and ending with a letter or digit); a folder whose name starts "
                    "with '_' or '.' is not an agent",
                )
            boundary.check(folder, folder=root, file=folder, key=f"agent folder {folder.name}")
            _read_agent(folder, folder.name, None, found, (), file, boundary)
    return list(found.values())


def plugin_files(folder: Path) -> list[Path]:
    """The local plugins of ``folder``: every ``NAME.py`` directly in it, sorted, except files
    whose ``NAME`` breaks the name grammar or starts with ``_`` (helpers), and anything but a
    regular file or a link to one (importing a FIFO or a device would block forever)."""
    return [
        path
        for path in sorted(folder.glob("*.py"))
        if is_name(path.stem) and not path.stem.startswith("_") and _regular(path)
    ]


def _read_agent(
    folder: Path,
    name: str,
    tool_name: str | None,
    found: dict[str, AgentFolder],
    above: tuple[Path, ...],
    profile_file: Path | None,
    boundary: Boundary,
) -> None:
    """Read the agent folder ``folder`` as agent ``name``, then its subagents, into ``found``."""
    folder = folder.resolve()
    _check_inside(folder, boundary)
    if folder in above or len(above) >= MAX_NESTING:
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f'the subagents of agent "{name}" loop back to a folder above them'
            if folder in above
            else f"agent folders nest more than {MAX_NESTING} levels deep",
            file=folder,
            remedy="remove the link or flatten the subagents/ folders",
        )
    if name in found:
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f'two agent folders make the agent "{name}": {found[name].folder} and {folder}',
            file=profile_file,
            key="[tether] agents",
            remedy="rename one of the folders, or list only one of the folders that hold them",
        )
    agent = AgentFolder(name, folder, _agent_file(folder / AGENT_FILE))
    found[name] = agent
    table = agent.table
    _add_instructions(table, folder)
    _add_tools(table, folder / _TOOLS)
    _add_skills(table, folder / _SKILLS)
    if tool_name is not None:
        table["tool_name"] = tool_name
    children: list[str] = []
    subagents = folder / _SUBAGENTS
    for child in _subfolders(subagents) if subagents.is_dir() else []:
        if not is_name_part(child.name):
            raise ProfileError(
                ErrorCode.PROFILE_INVALID,
                f"subagent folder {child.name!r} is not a valid tool name",
                file=child,
                remedy="rename the folder: letters, digits, '_' and '-' (at most 64, starting "
                "and ending with a letter or digit); its name is the tool its parent calls",
            )
        child_name = f"{name}.{child.name}"
        boundary.check(child, folder=folder, file=child, key=f"subagent folder {child.name}")
        _read_agent(child, child_name, child.name, found, (*above, folder), profile_file, boundary)
        children.append(child_name)
    if children:
        table["subagents"] = children


#: What an agent folder may hold, each checked to stay inside it.
_HELD = (AGENT_FILE, *INSTRUCTIONS_FILES, _TOOLS, _SKILLS, _SUBAGENTS)


def _check_inside(folder: Path, boundary: Boundary) -> None:
    """Each file or folder of :data:`_HELD` that ``folder`` holds resolves inside it."""
    for name in _HELD:
        held = folder / name
        if os.path.lexists(held):
            boundary.check(held, folder=folder, file=held, key=name)


def _agent_file(path: Path) -> dict[str, Any]:
    """The table agent.toml holds (empty without the file), read as safely as a profile."""
    if not os.path.lexists(path):
        return {}
    try:
        table = parse_toml_text(path, read_text_file(path))
    except TextFileError as problem:
        code = ErrorCode.PROFILE_INVALID_TOML
        if problem.folder or problem.missing:  # a folder, or a link to nothing: not TOML at all
            code = ErrorCode.PROFILE_INVALID
        raise ProfileError(
            code,
            f"agent file {problem.reason}",
            file=path,
            key=problem.where,
            remedy=problem.remedy or "make it a readable UTF-8 TOML file, or remove it",
        ) from None
    for key in table:
        if key not in AGENT_FILE_KEYS:
            hint = _FOLDER_SAYS.get(key, "remove or rename the key").format(folder=path.parent)
            raise ProfileError(
                ErrorCode.PROFILE_INVALID,
                f'agent.toml cannot set "{key}"',
                file=path,
                key=format_loc((), (key,)),
                remedy=f"{hint}; keys allowed in agent.toml: {', '.join(AGENT_FILE_KEYS)} "
                "(see docs/agents.md#agent-folders)",
            )
    return table


def _add_instructions(table: dict[str, Any], folder: Path) -> None:
    present = [name for name in INSTRUCTIONS_FILES if os.path.lexists(folder / name)]
    if len(present) > 1:
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f"agent folder has both {' and '.join(present)}",
            file=folder,
            remedy="keep one",
        )
    if not present:
        return
    if "instructions" in table:
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f"agent.toml sets instructions, and the folder holds {present[0]}",
            file=folder / AGENT_FILE,
            key="instructions",
            remedy=f"remove the instructions key or the file {present[0]}",
        )
    table["instructions"] = str(folder / present[0])


def _add_tools(table: dict[str, Any], tools: Path) -> None:
    """``tools/``: the agent's own plugin folder, each plugin in it loaded in its layer."""
    if not tools.is_dir():
        return
    table["plugin_dirs"] = [str(tools)]
    _add_plugins(table, [path.stem for path in plugin_files(tools)])


def _add_skills(table: dict[str, Any], skills: Path) -> None:
    """``skills/``: a skills-fs instance reading that folder only, and the skill tool."""
    if not skills.is_dir():
        return
    _add_plugins(table, SKILLS_PLUGINS)
    settings: object = table.setdefault("plugin", {})
    if not isinstance(settings, dict):
        return  # not a table: validation names it
    tables = cast("dict[str, Any]", settings)
    own: object = tables.get(SKILLS_PLUGINS[0], {})
    if not isinstance(own, dict):
        return
    written = cast("dict[str, Any]", own)
    roots: object = written.get("roots")
    if roots is None:
        roots = [str(skills)]
    elif isinstance(roots, str):
        roots = [roots, str(skills)]
    elif isinstance(roots, list):
        roots = [*cast("list[object]", roots), str(skills)]
    # agent.toml's keys win over the folder's defaults; its roots come first.
    tables[SKILLS_PLUGINS[0]] = {"project": False, "user": False, **written, "roots": roots}


def _add_plugins(table: dict[str, Any], names: Sequence[str]) -> None:
    plugins: object = table.setdefault("plugins", [])
    if not isinstance(plugins, list):
        return  # not a list: validation names it
    listed = cast("list[object]", plugins)
    listed.extend(name for name in names if name not in listed)


def _subfolders(folder: Path) -> list[Path]:
    """The folders directly in ``folder``, sorted, except those starting with ``.`` or ``_``."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f"folder cannot be read: {exc.strerror or exc}",
            file=folder,
            remedy="make it readable by this user",
        ) from None
    return [entry for entry in entries if not entry.name.startswith((".", "_")) and entry.is_dir()]


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False
