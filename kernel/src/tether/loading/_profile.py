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
first; any other value (lists included) is replaced whole. The agent folders ``[tether] agents``
lists (:mod:`tether.loading._folders`) are the base of the agent tables of their names, merged
the same way; the paths an agent folder writes resolve against that folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
)

from ..contracts import CallerRule
from ..errors import ErrorCode, ProfileError
from ..ground import (
    ALLOW_KEY,
    BOUNDARY_CONTEXT,
    NAME_PATTERN,
    Boundary,
    TextFileError,
    allowed_paths,
    boundary_of,
    file_problem,
    format_loc,
    is_agent_name,
    is_name,
    is_tool_name,
    parse_toml_text,
    read_text_file,
)
from ._folders import AGENT_FILE, AgentFolder, read_agent_folders

__all__ = (
    "DEFAULT_PROFILE_NAME",
    "NAME_PATTERN",
    "AgentTable",
    "AgentWorkspaceTable",
    "ContainedPath",
    "LimitsTable",
    "Profile",
    "ProfilePath",
    "SessionsTable",
    "TetherTable",
    "WorkspaceTable",
    "find_profile",
    "input_loc",
    "load_profile",
    "profile_from_dict",
)

DEFAULT_PROFILE_NAME = "tether.toml"

#: The key in a pydantic validation context that holds the folder relative paths resolve against.
PROFILE_DIR_CONTEXT = "tether_profile_dir"
#: Per-key folders for keys inherited from another file through ``extends``.
KEY_DIRS_CONTEXT = "tether_key_dirs"


def resolve_against_profile(value: Path, info: ValidationInfo) -> Path:
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
ProfilePath = Annotated[Path, AfterValidator(resolve_against_profile)]


def _contained(value: Path, info: ValidationInfo) -> Path:
    resolved = resolve_against_profile(value, info)
    boundary = boundary_of(info.context)
    if boundary is None:
        return resolved
    return boundary.check_setting(info.field_name, resolved)


#: A path setting that names a file or folder whose content tether reads (a skill root): like
#: :data:`ProfilePath`, relative values resolve against the folder of the file that wrote the
#: key, and the result must stay inside that folder, links followed (or be allowed by the
#: profile the user runs), else ``PATH_OUTSIDE_FOLDER`` (docs/trust.md).
ContainedPath = Annotated[Path, AfterValidator(_contained)]


def _check_name(value: str) -> str:
    if not is_name(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits, '.', '_' and '-' "
            "(at most 64, starting and ending with a letter or digit)"
        )
    return value


def _check_agent_name(value: str) -> str:
    if not is_agent_name(value):
        return _check_name(value)
    return value


Name = Annotated[str, AfterValidator(_check_name)]
#: An agent name: a name, or a longer dot-joined one an agent folder's subagents derive.
AgentName = Annotated[str, AfterValidator(_check_agent_name)]


def _check_retention(value: str) -> str:
    from ..store import parse_age

    parse_age(value, where="retention")  # a ValueError says how to write an age
    return value


class SessionsTable(BaseModel):
    """``[tether.sessions]``: the stored sessions' retention."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    retention: Annotated[str, AfterValidator(_check_retention)] = "30d"
    """The age past which ``tether sessions prune`` removes a session unless ``--older-than``
    says otherwise: ``"30d"``, ``"12h"``, ``"2w"`` (docs/sessions.md)."""

    @property
    def retention_seconds(self) -> float:
        """``retention`` in seconds."""
        from ..store import parse_age

        return parse_age(self.retention, where="retention")


class WorkspaceTable(BaseModel):
    """``[tether] workspace = { kind = "session", backend = "local" }`` (docs/workspaces.md);
    the names are checked at load against the kinds and the backends plugins offer
    (``WORKSPACE_INVALID``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = "session"
    """``session``: a folder per session under the store's location; ``project``: the
    profile's folder."""
    backend: str = "local"
    """The backend that opens workspaces and runs commands (``local``, ``userns``, a
    plugin's)."""


class AgentWorkspaceTable(BaseModel):
    """``[agent.NAME] workspace = { share = true }``: as a declared subagent, this agent works
    in its parent's workspace instead of a folder of its own (docs/workspaces.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    share: bool = False
    """Share the parent's workspace (default: a workspace of its own)."""


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
    agents: tuple[ProfilePath, ...] = ()
    """Folders of agent folders: each ``<folder>/<name>/`` is the agent ``name`` (see
    docs/agents.md)."""
    max_depth: int = Field(default=8, ge=0)
    """The deepest a chain of declared subagents (specialists) may go below its root session."""
    allow_outside: tuple[ProfilePath, ...] = ()
    """Paths (and everything below them) that the files of this profile may name outside their
    own folders; honoured only in the profile the user runs, never in a file it extends or in
    an agent folder (see docs/trust.md)."""
    budget: BudgetTable | None = None
    """The budget of every root session (its whole delegation tree), docs/budgets.md."""
    sessions: SessionsTable = Field(default_factory=lambda: SessionsTable())
    """``[tether.sessions]``: how long stored sessions are kept (docs/sessions.md)."""
    workspace: WorkspaceTable | None = None
    """Where agents' files live and their commands run (docs/workspaces.md): ``{ kind =
    "session" | "project", backend = "local" }``, default a folder per session on ``local``."""
    guardrails: tuple[Name, ...] = ()
    """Guardrails (offered by plugins, ``tether_guardrails``) that check the content of every
    agent's sessions and every child below them (docs/guardrails.md)."""


def _check_budget(value: dict[str, Any]) -> dict[str, Any]:
    from ..contracts import Budget

    Budget.from_data(value, where="budget")  # a ValueError names the limit
    return value


BudgetTable = Annotated[dict[str, int | float | str], AfterValidator(_check_budget)]
"""``budget = { output = "200k", cost = 2.5, time = "10m", requests = 40, children = 5,
live = 3, warn_at = 0.8 }``: :class:`tether.budgets.Budget`'s limits (docs/budgets.md)."""


class PriceTable(BaseModel):
    """``[prices.NAME]``: what a model's tokens cost, in US dollars per million tokens; NAME
    is a model spec (``deepseek:deepseek-chat``) or the start of model names (``gpt-5``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    """Prompt-cache reads (default: ``input``)."""
    cache_write: float | None = Field(default=None, ge=0)
    """Prompt-cache writes (default: ``input``)."""


def _check_tool_name(value: str) -> str:
    if not is_tool_name(value):
        raise ValueError(
            f"{value!r} is not a valid tool name: use letters, digits, '_' and '-' (at most 64)"
        )
    return value


ToolName = Annotated[str, AfterValidator(_check_tool_name)]


class LimitsTable(BaseModel):
    """``limits = { max_steps = 20, max_repeated_calls = 5, max_output_tokens = 8000,
    max_working_tasks = 10, tool_result_max_chars = 80000 }``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int | None = Field(default=None, ge=1)
    """Model requests per turn."""
    max_repeated_calls: int | None = Field(default=None, ge=0)
    """Steps in a row that may make the same tool calls with the same arguments before the
    model reads a notice (one more ends the turn, ``TOOL_CALLS_REPEATED``); 0: no limit."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """Output tokens per turn, across its steps."""
    max_working_tasks: int | None = Field(default=None, ge=1)
    """Background tasks a session of this agent may have working at once."""
    tool_result_max_chars: int | None = Field(default=None, ge=0)
    """A longer tool result is saved to the workspace and the model reads a preview
    (docs/files.md); 0: never."""


class CompactionTable(BaseModel):
    """``compaction = { mode = "auto", threshold = 0.85, keep = 0.25, strategy = "summary" }``
    (docs/compaction.md); ``compaction = "manual"`` sets the mode alone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["auto", "manual", "off"] = "auto"
    """``auto``: at the threshold; ``manual``: only when asked; ``off``: never."""
    threshold: float = Field(default=0.85, gt=0.1, lt=1.0)
    """The share of the context window at which ``auto`` compacts."""
    keep: float = Field(default=0.25, ge=0.05, le=0.5)
    """The share of the window the kept tail and restated context may use."""
    strategy: Name = "summary"
    """``summary`` (the agent's model writes it) or a plugin's compaction strategy."""


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
    subagents: tuple[AgentName, ...] = ()
    """Agents of this profile this agent delegates to as declared subagents (specialists):
    each is a tool of this agent named after it (``tool_name``)."""
    tool: bool | Literal["deferred"] = True
    """How this agent appears to an agent that declares it as a subagent: a listed tool
    (``true``), deferred (found through ``find_subagents``), or hidden (``false``)."""
    tool_name: ToolName | None = None
    """Its tool name as a declared subagent (default: the agent's name)."""
    limits: LimitsTable | None = None
    """Per-turn limits of this agent's sessions."""
    approval: Literal["ask", "allow", "deny"] | None = None
    """Whether this agent's tools that need approval ask, run or are refused (default: ask in
    a root session; see docs/agents.md for children)."""
    context_window: int | None = Field(default=None, ge=1024)
    """The model's context window in tokens (default: the model's, or tether's table)."""
    compaction: Literal["auto", "manual", "off"] | CompactionTable | None = None
    """When the history is compacted (default ``auto`` at 85% of a known window)."""
    plugin_dirs: tuple[ProfilePath, ...] = ()
    """Folders of local plugins of this agent's layer: their ``NAME.py`` files are loaded
    before the installed plugins of that name (an agent folder's ``tools/``)."""
    budget: BudgetTable | None = None
    """The budget of this agent's sessions and their subtrees: as a root (within ``[tether]
    budget``), and as a declared subagent (within what its parent has left), docs/budgets.md."""
    workspace: AgentWorkspaceTable | None = None
    """As a declared subagent: whether it shares its parent's workspace (docs/workspaces.md)."""
    callers: CallerRule | None = None
    """Who may start this agent's sessions and send to them: ``callers = { allow = ["os:alice",
    "team:*"], claims = { team = "billing" } }`` (docs/callers.md); default: everyone."""
    when: CallerRule | None = None
    """As a declared subagent, offered only while its parent's current caller matches (the
    same syntax as ``callers``, docs/callers.md); default: to every caller."""
    guardrails: tuple[Name, ...] = ()
    """Guardrails that check this agent's sessions and every child below them, besides
    ``[tether] guardrails`` (docs/guardrails.md)."""
    guardrails_exempt: bool | tuple[Name, ...] = False
    """As a child (any child session of this agent: a declared subagent, a spawn, a fork),
    not checked by the guardrails its parent passes down (``[tether] guardrails`` among
    them): all of them (``true``) or those named; its own (``guardrails``) still apply.
    A root session of this agent is not exempt (docs/guardrails.md)."""


class _ProfileDocument(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    extends: str | None = None
    tether: TetherTable = Field(default_factory=TetherTable)
    plugin: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    agent: dict[AgentName, AgentTable] = Field(default_factory=dict)
    prices: dict[str, PriceTable] = Field(default_factory=dict)


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
    prices: dict[str, PriceTable] = Field(default_factory=dict)
    """Model prices the profile sets, by model spec or model-name prefix (over tether's own
    table, ``tether.models.BUILTIN_PRICES``)."""
    origins: dict[tuple[str, ...], Path] = Field(default_factory=dict[tuple[str, ...], Path])
    """Key path (``("agent", "main", "model")``) -> the file that set it (for a key an agent
    folder set, its ``agent.toml``, whether that file exists or not)."""
    agent_folders: dict[str, Path] = Field(default_factory=dict[str, Path])
    """Agent name -> its folder, for the agents that came from agent folders
    (``[tether] agents``)."""
    boundary: Boundary = Field(default_factory=Boundary)
    """What ``[tether] allow_outside`` of the profile the user runs allows outside the folders
    of the files that name paths (:mod:`tether.ground`)."""

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
        fields = {name: file for name in table if (file := self.origins.get((*key, name)))}
        boundary = Boundary(
            allowed=self.boundary.allowed,
            profile=self.boundary.profile,
            fields=fields,
            table=format_loc(key, ()),
        )
        return {
            PROFILE_DIR_CONTEXT: self.folder,
            KEY_DIRS_CONTEXT: key_dirs,
            BOUNDARY_CONTEXT: boundary,
        }


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
    if parts[:2] == ["tether", "sessions"] and len(parts) > 2:
        table, parts = ["tether", "sessions"], parts[2:]  # a table of its own: [tether.sessions]
    elif parts and parts[0] in ("tether", "extends"):
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
    nearer_file: Path | None,
    prefix: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Merge ``nearer`` over ``base`` key by key, recording which file set each key (with
    ``nearer_file=None``, the caller records the nearer keys: only the base's origins that
    the nearer values replace are dropped)."""
    merged = dict(base)
    for key, value in nearer.items():
        path = (*prefix, key)
        below = merged.get(key)
        if isinstance(value, dict) and isinstance(below, dict):
            if nearer_file is not None:
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
            if nearer_file is not None:
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
    path: Path, stack: tuple[Path, ...], boundary: Boundary | None = None
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
    if boundary is None:  # the profile the user runs: its allow_outside is the boundary's
        boundary = _boundary(document, path)
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
    boundary.check(
        path.parent / Path(extends).expanduser(), folder=path.parent, file=path, key="extends"
    )
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
    base, origins, files = _load_chain(base_path, (*stack, path), boundary)
    merged = _merge(base, document, origins, path)
    return merged, origins, (path, *files)


def _boundary(document: Mapping[str, Any], path: Path | None) -> Boundary:
    """The boundary ``[tether] allow_outside`` of ``document`` (the profile the user runs, at
    ``path``) sets; entries that are not strings are left to validation to name."""
    folder = path.parent if path is not None else Path.cwd()
    tether: object = document.get("tether")
    listed: object = (
        cast("Mapping[str, object]", tether).get(ALLOW_KEY) if isinstance(tether, Mapping) else None
    )
    entries: list[Path] = []
    if isinstance(listed, list | tuple):
        for entry in cast("Sequence[object]", listed):
            if isinstance(entry, str):
                try:
                    entries.append(_against(folder, entry))
                except (OSError, ValueError):  # a NUL character: validation names it
                    continue
    return Boundary(allowed=allowed_paths(entries), profile=path)


def _check_allow_origin(origins: Mapping[tuple[str, ...], Path], path: Path | None) -> None:
    """``[tether] allow_outside`` counts only in the profile the user runs: set in a file it
    extends, it is refused rather than ignored."""
    wrote = origins.get(("tether", ALLOW_KEY))
    if wrote is None or wrote == path:
        return
    raise ProfileError(
        ErrorCode.PATH_OUTSIDE_FOLDER,
        f"[tether] {ALLOW_KEY} is set in {wrote}, which the profile you run extends; only the "
        "profile you run may allow paths outside the folders of its files",
        file=wrote,
        key=f"[tether] {ALLOW_KEY}",
        remedy=f"move the key to {path or 'the profile you run'} (see docs/trust.md)",
    )


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
    """Validate an already-parsed profile document (used by tests and embedding hosts).

    The agent folders that ``[tether] agents`` lists are read first: each agent folder is the
    base of the ``[agent.NAME]`` table of its name, which the document's own table of that name
    (if any) is merged over, as a nearer file is merged over the file it extends.
    """
    origins = dict(origins or {})
    folder = path.parent if path is not None else Path.cwd()
    _check_allow_origin(origins, path)
    boundary = _boundary(document, path)
    document, agent_folders = _with_agent_folders(document, origins, path, folder, boundary)
    try:
        key_dirs: dict[str, Path] = {}
        for key in ("plugin_dirs", "agents"):
            wrote = origins.get(("tether", key))
            if wrote is not None:
                key_dirs[key] = wrote.parent
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
    agents = {
        name: _with_agent_paths(name, table, document["agent"][name], origins, folder)
        for name, table in parsed.agent.items()
    }
    profile = Profile(
        path=path,
        files=files,
        tether=parsed.tether,
        plugin=parsed.plugin,
        agent=agents,
        prices=parsed.prices,
        origins=origins,
        agent_folders=agent_folders,
        boundary=boundary,
    )
    _check_paths(profile)
    _check_subagents(profile)
    return profile


def _with_agent_folders(
    document: Mapping[str, Any],
    origins: dict[tuple[str, ...], Path],
    path: Path | None,
    folder: Path,
    boundary: Boundary,
) -> tuple[Mapping[str, Any], dict[str, Path]]:
    """``document`` with the agents of ``[tether] agents`` merged under its own tables, and
    each such agent's folder; ``origins`` gains the folders' keys (as their agent.toml's)."""
    tether: object = document.get("tether")
    listed: object = (
        cast("Mapping[str, object]", tether).get("agents") if isinstance(tether, Mapping) else None
    )
    if not isinstance(listed, list | tuple) or not listed:
        return document, {}
    entries = cast("Sequence[object]", listed)
    wrote = origins.get(("tether", "agents"))
    base = wrote.parent if wrote is not None else folder
    roots: list[Path] = []
    for entry in entries:
        if not isinstance(entry, str | Path):
            return document, {}  # validation names the entry
        try:
            root = _against(base, entry)
        except (OSError, ValueError):  # a NUL character, a link loop: validation names it
            return document, {}
        if wrote is not None:
            boundary.check(root, folder=base, file=wrote, key="[tether] agents")
        roots.append(root)
    found: list[AgentFolder] = read_agent_folders(roots, file=wrote or path, boundary=boundary)
    if not found:
        return document, {}
    folder_origins: dict[tuple[str, ...], Path] = {}
    for agent in found:
        folder_origins[("agent", agent.name)] = agent.file
        _record(agent.table, folder_origins, agent.file, ("agent", agent.name))
    base_document: dict[str, Any] = {"agent": {agent.name: agent.table for agent in found}}
    merged = _merge(base_document, dict(document), folder_origins, None)
    folder_origins.update(origins)  # the document's keys were set where they say
    origins.clear()
    origins.update(folder_origins)
    return merged, {agent.name: agent.folder for agent in found}


def _against(base: Path, value: str | Path) -> Path:
    """``value`` as :data:`ProfilePath` resolves it when ``base`` is the folder of its file."""
    given = Path(value)
    if given.is_absolute():
        return given
    return (base / given.expanduser()).resolve()


def _with_agent_paths(
    name: str,
    table: AgentTable,
    raw: Mapping[str, Any],
    origins: Mapping[tuple[str, ...], Path],
    folder: Path,
) -> AgentTable:
    """``table`` with its paths resolved against the file that wrote each key (validation
    resolved them against the profile's folder, or the folder of ``[tether] plugin_dirs``)."""
    update: dict[str, Any] = {}
    wrote = origins.get(("agent", name, "instructions"))
    if table.instructions is not None and wrote is not None:
        update["instructions"] = _against(wrote.parent, raw["instructions"])
    if table.plugin_dirs:
        wrote = origins.get(("agent", name, "plugin_dirs"))
        base = wrote.parent if wrote is not None else folder
        update["plugin_dirs"] = tuple(_against(base, entry) for entry in raw["plugin_dirs"])
    return table.model_copy(update=update) if update else table


def _check_paths(profile: Profile) -> None:
    """Every path a file of the profile names (plugin folders, instructions, a ``scripted:``
    model's script) stays inside the folder that declares it (:mod:`tether.ground`);
    keys set in code are the host's and are not checked."""
    boundary = profile.boundary
    wrote = profile.origins.get(("tether", "plugin_dirs"))
    if wrote is not None:
        for entry in profile.tether.plugin_dirs:
            _check_plugin_dir(boundary, entry, wrote, "[tether] plugin_dirs")
    for name, table in profile.agent.items():
        where = ("agent", name)
        wrote = profile.origins.get((*where, "instructions"))
        if table.instructions is not None and wrote is not None:
            key = (
                format_loc(where, ("instructions",)) if wrote.name != AGENT_FILE else "instructions"
            )
            boundary.check(table.instructions, folder=wrote.parent, file=wrote, key=key)
        wrote = profile.origins.get((*where, "plugin_dirs"))
        if wrote is not None:
            key = format_loc(where, ("plugin_dirs",))
            for entry in table.plugin_dirs:
                _check_plugin_dir(boundary, entry, wrote, key)
        wrote = profile.origins.get((*where, "model"))
        script = _script_of(table.model)
        if script is not None and wrote is not None:
            key = format_loc(where, ("model",)) if wrote.name != AGENT_FILE else "model"
            path = wrote.parent / Path(script).expanduser()
            boundary.check(path, folder=wrote.parent, file=wrote, key=key)


#: The model provider prefix whose name is a file: ``scripted:PATH``.
SCRIPTED_PREFIX = "scripted:"


def _script_of(spec: str | None) -> str | None:
    """The script path of a ``scripted:PATH`` model spec, else ``None``."""
    if spec is None or not spec.startswith(SCRIPTED_PREFIX):
        return None
    return spec[len(SCRIPTED_PREFIX) :] or None


def _check_plugin_dir(boundary: Boundary, folder: Path, wrote: Path, key: str) -> None:
    """A plugin folder and every local plugin file in it (a link is followed) are inside the
    folder of ``wrote``, the file that names the plugin folder."""
    from ._folders import plugin_files

    boundary.check(folder, folder=wrote.parent, file=wrote, key=key)
    if folder.is_dir():
        for file in plugin_files(folder):
            boundary.check(file, folder=wrote.parent, file=wrote, key=f"{key} ({file.name})")


def _check_subagents(profile: Profile) -> None:
    """Each agent's ``subagents`` are other agents of the profile, each listed once, each with
    a description (its parent's model reads it to decide when to delegate) and a tool name of
    its own among its parent's subagents."""
    for name, table in profile.agent.items():
        tools: dict[str, str] = {}
        for index, sub in enumerate(table.subagents):
            child = profile.agent.get(sub)
            if child is None or sub == name:
                known = ", ".join(sorted(set(profile.agent) - {name})) or "none"
                _subagent_error(
                    profile,
                    name,
                    index,
                    f'agent "{name}" lists itself as a subagent'
                    if sub == name
                    else f'subagent "{sub}" of agent "{name}" is not an agent of this profile',
                    f'remove "{sub}"'
                    if sub == name
                    else f"declare {format_loc(('agent', sub), ())} or name one of: {known}",
                )
            tool = child.tool_name or sub
            other = tools.get(tool)
            if other is not None:
                _subagent_error(
                    profile,
                    name,
                    index,
                    f'agent "{name}" lists subagent "{sub}" twice'
                    if other == sub
                    else f'subagents "{other}" and "{sub}" of agent "{name}" have one tool '
                    f'name, "{tool}"',
                    "list it once" if other == sub else "give one of them another tool_name",
                )
            _check_subagent(profile, sub, child)
            tools[tool] = sub


def _subagent_error(
    profile: Profile, agent: str, index: int, message: str, remedy: str
) -> NoReturn:
    raise ProfileError(
        ErrorCode.PROFILE_INVALID,
        message,
        file=profile.file_of("agent", agent, "subagents"),
        key=format_loc(("agent", agent), ("subagents", index)),
        remedy=remedy,
    )


def _check_subagent(profile: Profile, name: str, table: AgentTable) -> None:
    """A subagent has a description and a tool name (its own, or its name if that is one)."""
    folder = profile.agent_folders.get(name)
    table_name = format_loc(("agent", name), ())
    if not (table.description or "").strip():
        where = str(folder / AGENT_FILE) if folder is not None else table_name
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f'subagent "{name}" has no description; its parent\'s model reads it to decide when '
            "to delegate",
            file=folder / AGENT_FILE if folder is not None else profile.file_of("agent", name),
            key="description" if folder is not None else f"{table_name} description",
            remedy=f'add description = "..." to {where}',
        )
    if table.tool_name is None and not is_tool_name(name):
        raise ProfileError(
            ErrorCode.PROFILE_INVALID,
            f'subagent "{name}" needs a tool name: its name is not one (letters, digits, '
            "'_' and '-', at most 64)",
            file=profile.file_of("agent", name),
            key=f"{table_name} tool_name",
            remedy=f'add tool_name = "..." to {table_name}',
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
