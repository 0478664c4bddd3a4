"""The profile: which plugins load, in which scope, with which settings.

A profile is a TOML file (``tether.toml`` in the current directory unless ``--profile`` names
one)::

    extends = "base.toml"                 # optional; this file wins key by key

    [tether]
    plugins = ["skills-fs", "subagent"]   # the global layer, in this order

    [plugin.subagent]                     # settings of "subagent" in the global layer
    max_depth = 3

    [agent.main]
    plugins = ["skills-fs"]               # mounted in the agent's own layer
    model = "scripted:script.toml"
    instructions = "agents/main.md"

    [agent.main.plugin.skills-fs]         # settings of "skills-fs" in the agent's layer
    roots = ["agents/main/skills"]

Relative paths resolve against the folder of the file that wrote the key, so a key inherited
through ``extends`` keeps pointing where its author meant. Tables merge key by key, nearest file
first; any other value (lists included) is replaced whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
)

from ..errors import ErrorCode, ProfileError
from .text import TextFileError, file_problem, format_loc, parse_toml_text, read_text_file

__all__ = (
    "DEFAULT_PROFILE_NAME",
    "NAME_PATTERN",
    "AgentTable",
    "Profile",
    "ProfilePath",
    "TetherTable",
    "find_profile",
    "input_loc",
    "load_profile",
    "profile_from_dict",
)

DEFAULT_PROFILE_NAME = "tether.toml"

#: Plugin and agent names: letters, digits, ``.``, ``_``, ``-``; no path separators, at most 64.
NAME_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$"
_NAME_RE = re.compile(NAME_PATTERN)

#: The key in a pydantic validation context that holds the folder relative paths resolve against.
PROFILE_DIR_CONTEXT = "tether_profile_dir"
#: Per-key folders for keys inherited from another file through ``extends``.
KEY_DIRS_CONTEXT = "tether_key_dirs"


def _resolve_against_profile(value: Path, info: ValidationInfo) -> Path:
    """Resolve a relative path against the folder of the file that wrote its key."""
    if value.is_absolute():
        return value
    raw: object = info.context
    context = cast("Mapping[str, object]", raw if isinstance(raw, Mapping) else {})
    key_dirs = context.get(KEY_DIRS_CONTEXT)
    base: object = None
    if isinstance(key_dirs, Mapping) and info.field_name is not None:
        base = cast("Mapping[str, object]", key_dirs).get(info.field_name)
    base = base or context.get(PROFILE_DIR_CONTEXT)
    if not isinstance(base, str | Path):
        return value
    return (Path(base) / value.expanduser()).resolve()


#: A path in a profile or a plugin's settings: relative values resolve against the profile's folder.
ProfilePath = Annotated[Path, AfterValidator(_resolve_against_profile)]


def _check_name(value: str) -> str:
    if not _NAME_RE.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits, '.', '_' and '-' "
            "(at most 64, starting and ending with a letter or digit)"
        )
    return value


Name = Annotated[str, AfterValidator(_check_name)]


class TetherTable(BaseModel):
    """The ``[tether]`` table: the global layer and kernel-wide settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plugins: tuple[Name, ...] = ()
    """Plugins loaded into the global layer, in this order."""
    store: str | None = None
    """The session store: ``PREFIX:REST`` (or a bare ``PREFIX``), opened by the store provider
    of that prefix; built in are ``sqlite:PATH`` and ``memory`` (default
    ``sqlite:.tether/sessions.db``)."""
    plugin_dirs: tuple[ProfilePath, ...] = ()
    """Folders whose ``NAME.py`` files are plugins named ``NAME`` (imported only when named)."""


class AgentTable(BaseModel):
    """An ``[agent.NAME]`` table: one agent preset and the plugins mounted in its scope."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plugins: tuple[Name, ...] = ()
    """Plugins loaded into this agent's own layer, in this order."""
    plugin: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    """Settings tables of the plugins in this agent's layer, by plugin name."""
    description: str | None = None
    """One line saying what the agent is for."""
    model: str | None = None
    """Model spec (``provider:name``) the agent uses unless a command overrides it."""
    instructions: ProfilePath | None = None
    """The agent's instructions: a markdown file, or a Python module that returns markdown."""


class _ProfileDocument(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    extends: str | None = None
    tether: TetherTable = Field(default_factory=TetherTable)
    plugin: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    agent: dict[Name, AgentTable] = Field(default_factory=dict)


class Profile(BaseModel):
    """A loaded profile: the merged document plus where each key came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: Path | None
    """The profile file (``None`` for a profile built in code)."""
    files: tuple[Path, ...] = ()
    """The file and every file it extends, nearest first."""
    tether: TetherTable = Field(default_factory=TetherTable)
    plugin: dict[str, dict[str, Any]] = Field(default_factory=dict)
    agent: dict[str, AgentTable] = Field(default_factory=dict)
    origins: dict[tuple[str, ...], Path] = Field(default_factory=dict[tuple[str, ...], Path])
    """Key path (``("agent", "main", "model")``) -> the file that set it."""

    @property
    def folder(self) -> Path:
        """The folder relative paths resolve against by default."""
        return self.path.parent if self.path is not None else Path.cwd()

    def file_of(self, *key: str) -> Path | None:
        """The file that set ``key`` (or the nearest enclosing table), else the profile itself."""
        for end in range(len(key), 0, -1):
            found = self.origins.get(tuple(key[:end]))
            if found is not None:
                return found
        return self.path

    def settings_table(self, agent: str | None, plugin: str) -> dict[str, Any] | None:
        """The raw settings table of ``plugin`` in the global layer or in ``agent``'s layer."""
        if agent is None:
            return self.plugin.get(plugin)
        table = self.agent.get(agent)
        return None if table is None else table.plugin.get(plugin)

    def settings_key(self, agent: str | None, plugin: str) -> tuple[str, ...]:
        """The key path of a plugin's settings table."""
        if agent is None:
            return ("plugin", plugin)
        return ("agent", agent, "plugin", plugin)

    def settings_context(self, agent: str | None, plugin: str) -> dict[str, Any]:
        """The pydantic validation context that resolves a settings table's relative paths."""
        key = self.settings_key(agent, plugin)
        table = self.settings_table(agent, plugin) or {}
        key_dirs = {}
        for field in table:
            file = self.file_of(*key, field)
            if file is not None:
                key_dirs[field] = file.parent
        return {PROFILE_DIR_CONTEXT: self.folder, KEY_DIRS_CONTEXT: key_dirs}


def input_loc(data: Any, loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The part of a pydantic error location that exists in the input.

    pydantic adds union branch names (``max_depth.int``) and other markers to a location; a
    user only wrote keys and indexes. A missing key is kept (it is what the user must add).
    """
    kept: list[int | str] = []
    current: object = data
    for part in loc:
        if isinstance(current, Mapping) and isinstance(part, str):
            table = cast("Mapping[object, object]", current)
            kept.append(part)
            if part not in table:
                break
            current = table[part]
        elif isinstance(current, list | tuple) and isinstance(part, int):
            items = cast("Sequence[object]", current)
            kept.append(part)
            if part >= len(items):
                break
            current = items[part]
        else:
            break
    return tuple(kept)


def _profile_key(loc: tuple[int | str, ...]) -> str:
    """``[agent.main] plugins[0]``: split a profile location into its table and key."""
    parts = list(loc)
    table: list[str] = []
    if parts and parts[0] in ("tether", "extends"):
        table = [str(parts.pop(0))] if parts[0] == "tether" and len(parts) > 1 else []
    elif parts and parts[0] in ("plugin", "agent"):
        depth = 2
        if parts[0] == "agent" and len(parts) > 3 and parts[2] == "plugin":
            depth = 4
        table = [str(p) for p in parts[:depth]]
        parts = parts[depth:]
    return format_loc(tuple(table), tuple(parts))


def find_profile(explicit: Path | str | None = None, cwd: Path | None = None) -> Path:
    """The profile to use: ``explicit`` if given, else ``tether.toml`` in ``cwd``."""
    if explicit is not None:
        path = Path(explicit).expanduser()
        problem = file_problem(path)
        if problem is not None:
            raise ProfileError(
                ErrorCode.PROFILE_NOT_FOUND,
                f"profile {problem.reason}",
                file=path.absolute(),
                remedy=_profile_path_remedy(problem, "check the --profile path"),
            )
        return path.resolve()
    folder = cwd or Path.cwd()
    path = folder / DEFAULT_PROFILE_NAME
    problem = file_problem(path)
    if problem is not None and problem.missing:
        raise ProfileError(
            ErrorCode.PROFILE_NOT_FOUND,
            f"no {DEFAULT_PROFILE_NAME} in {folder}",
            remedy=f"create {DEFAULT_PROFILE_NAME} there or pass --profile PATH",
        )
    if problem is not None:
        raise ProfileError(
            ErrorCode.PROFILE_NOT_FOUND,
            f"{DEFAULT_PROFILE_NAME} in {folder} {problem.reason}",
            file=path,
            remedy=f"make {DEFAULT_PROFILE_NAME} a profile file, or pass --profile PATH",
        )
    return path.resolve()


def _profile_path_remedy(problem: TextFileError, default: str) -> str:
    if problem.folder:
        return f"pass the profile file itself, e.g. {problem.path / DEFAULT_PROFILE_NAME}"
    return problem.remedy or default


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return parse_toml_text(path, read_text_file(path))
    except TextFileError as problem:
        if problem.missing:
            raise ProfileError(
                ErrorCode.PROFILE_NOT_FOUND,
                f"profile {str(path)!r} {problem.reason}",
                file=path,
                remedy="check the path",
            ) from None
        code = ErrorCode.PROFILE_INVALID_TOML
        if problem.folder:
            code = ErrorCode.PROFILE_NOT_FOUND
        raise ProfileError(
            code,
            f"profile {problem.reason}",
            file=path,
            key=problem.where,
            remedy=_profile_path_remedy(problem, "make it a readable UTF-8 TOML file"),
        ) from None


def _merge(
    base: dict[str, Any],
    nearer: dict[str, Any],
    origins: dict[tuple[str, ...], Path],
    nearer_file: Path,
    prefix: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Merge ``nearer`` over ``base`` key by key, recording which file set each key."""
    merged = dict(base)
    for key, value in nearer.items():
        path = (*prefix, key)
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            origins.setdefault(path, nearer_file)
            merged[key] = _merge(
                cast("dict[str, Any]", below),
                cast("dict[str, Any]", value),
                origins,
                nearer_file,
                path,
            )
        else:
            merged[key] = value
            _forget_below(origins, path)
            origins[path] = nearer_file
    return merged


def _forget_below(origins: dict[tuple[str, ...], Path], path: tuple[str, ...]) -> None:
    for key in [k for k in origins if len(k) > len(path) and k[: len(path)] == path]:
        del origins[key]


def _record(
    document: dict[str, Any],
    origins: dict[tuple[str, ...], Path],
    file: Path,
    prefix: tuple[str, ...] = (),
) -> None:
    for key, value in document.items():
        path = (*prefix, key)
        origins[path] = file
        if isinstance(value, dict):
            _record(cast("dict[str, Any]", value), origins, file, path)


def _load_chain(
    path: Path, stack: tuple[Path, ...]
) -> tuple[dict[str, Any], dict[tuple[str, ...], Path], tuple[Path, ...]]:
    """Read ``path`` and everything it extends; return (merged, origins, files nearest first)."""
    if path in stack:
        cycle = " -> ".join(str(p) for p in (*stack, path))
        raise ProfileError(
            ErrorCode.PROFILE_EXTENDS_CYCLE,
            f"profiles extend each other in a cycle: {cycle}",
            file=stack[-1],
            key="extends",
            remedy="remove one of the extends keys",
        )
    document = _read_toml(path)
    extends = document.get("extends")
    if extends is None:
        origins: dict[tuple[str, ...], Path] = {}
        _record(document, origins, path)
        return document, origins, (path,)
    if not isinstance(extends, str):
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f"extends must be a file name, not {type(extends).__name__}",
            file=path,
            key="extends",
            remedy='write extends = "base.toml"',
        )
    try:
        base_path = (path.parent / Path(extends).expanduser()).resolve()
    except (OSError, ValueError) as exc:  # a NUL character, a symlink loop
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f"extends {extends!r} is not a usable path: {exc}",
            file=path,
            key="extends",
            remedy='write extends = "base.toml", relative to this profile\'s folder',
        ) from None
    problem = file_problem(base_path)
    if problem is not None:
        raise ProfileError(
            ErrorCode.PROFILE_NOT_FOUND,
            f"extended profile {extends!r} {problem.reason} (looked for {base_path})",
            file=path,
            key="extends",
            remedy=_profile_path_remedy(
                problem, "fix the extends path; it is relative to this profile's folder"
            ),
        )
    base, origins, files = _load_chain(base_path, (*stack, path))
    merged = _merge(base, document, origins, path)
    return merged, origins, (path, *files)


def load_profile(path: Path | str) -> Profile:
    """Read, merge (``extends``) and validate a profile; raise :class:`ProfileError` if bad."""
    path = Path(path).resolve()
    merged, origins, files = _load_chain(path, ())
    merged.pop("extends", None)
    origins.pop(("extends",), None)
    return profile_from_dict(merged, path=path, files=files, origins=origins)


def profile_from_dict(
    document: Mapping[str, Any],
    *,
    path: Path | None = None,
    files: tuple[Path, ...] = (),
    origins: dict[tuple[str, ...], Path] | None = None,
) -> Profile:
    """Validate an already-parsed profile document (used by tests and embedding hosts)."""
    origins = dict(origins or {})
    folder = path.parent if path is not None else Path.cwd()
    agent_dirs: dict[str, Path] = {}
    tables: object = document.get("agent")
    for name in cast("dict[str, object]", tables) if isinstance(tables, dict) else {}:
        file = origins.get(("agent", name, "instructions"))
        if file is not None:
            agent_dirs[name] = file.parent
    try:
        dirs_file = origins.get(("tether", "plugin_dirs"))
        key_dirs = {"plugin_dirs": dirs_file.parent} if dirs_file is not None else {}
        parsed = _ProfileDocument.model_validate(
            document,
            context={PROFILE_DIR_CONTEXT: folder, KEY_DIRS_CONTEXT: key_dirs},
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = input_loc(document, tuple(error["loc"]))
        key_path = tuple(str(p) for p in loc)
        file = _origin(origins, key_path) or path
        more = len(exc.errors()) - 1
        message = f"profile key is invalid: {error['msg']}"
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            message,
            file=file,
            key=_profile_key(loc),
            remedy=_profile_remedy(error, loc),
        ) from exc
    agents: dict[str, AgentTable] = {}
    for name, table in parsed.agent.items():
        if table.instructions is not None and name in agent_dirs:
            raw = document["agent"][name]["instructions"]
            resolved = (agent_dirs[name] / Path(raw).expanduser()).resolve()
            table = table.model_copy(update={"instructions": resolved})
        agents[name] = table
    return Profile(
        path=path,
        files=files,
        tether=parsed.tether,
        plugin=parsed.plugin,
        agent=agents,
        origins=origins,
    )


def _origin(origins: Mapping[tuple[str, ...], Path], key: tuple[str, ...]) -> Path | None:
    for end in range(len(key), 0, -1):
        found = origins.get(key[:end])
        if found is not None:
            return found
    return None


def _profile_remedy(error: Any, loc: tuple[int | str, ...]) -> str:
    if error.get("type") != "extra_forbidden":
        return "fix the value (see docs/profiles.md)"
    if len(loc) == 1:
        known = "extends, [tether], [plugin.NAME], [agent.NAME]"
    elif loc[0] == "tether":
        known = ", ".join(TetherTable.model_fields)
    else:
        known = ", ".join(AgentTable.model_fields)
    return f"remove or rename the key; known keys here: {known} (see docs/profiles.md)"
