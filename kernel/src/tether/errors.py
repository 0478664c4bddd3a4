"""One error tree for the whole kernel; every error carries a stable ``code``.

::

    TetherError
    ├── ProfileError      the profile file: missing, not TOML, wrong shape, extends cycle;
    │                     an agent it does not declare; an eval dataset (``tether eval``)
    ├── PluginError       a plugin: unknown, not installed, import failed, hooks, settings,
    │                     name conflict, broken contract, a bug in its code
    ├── CapabilityError   a requirement one plugin (or a delegation) has of another that is
    │                     not met
    ├── StoreError        the session store: bad spec, unknown schema, missing, existing,
    │                     corrupt or conflicting session, a session another process drives, a
    │                     file locked too long, a file that is damaged, another program's,
    │                     read-only or cannot be opened, a lowered depth, a turn a branch
    │                     or a rewind names that the history does not hold
    ├── ModelError        a model spec that resolves to nothing, a missing setting, a request
    │                     that failed, a bad or unmatched script
    ├── AgentError        an agent that cannot be composed: instructions, tools, filters,
    │                     a tool source (an MCP server) that cannot list its tools
    ├── SkillError        a skill or skill provider that breaks the contract
    ├── SubagentError     a delegation that cannot start or a child that cannot be addressed:
    │                     provider, depth, schema, authority, persistence
    ├── BudgetError       a tree budget that cannot be set (a limit it cannot count) or that
    │                     a request or a child start would pass
    ├── CallerError       a caller that cannot be read, or that a gate refuses
    └── WorkspaceError    a workspace that cannot be set up or opened, or a path that leaves
                          it

Every code belongs to exactly one class (the table in ``docs/errors.md`` says which), so
``except StoreError`` catches the store's codes and nothing else. Every class is exported from
``tether``.

Each error renders as one line, ``<what is wrong> (<where>); <how to fix it> [<CODE>]``; the
command line prints it after ``ERROR:`` and exits with status 2. Any other exception that reaches
the command line (a bug) gets the same shape there, as ``UNEXPECTED_ERROR`` or, when it was
raised in a plugin's code, ``PLUGIN_UNEXPECTED_ERROR``. ``docs/errors.md`` lists every code with
an example and its remedy.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path
from typing import TypedDict, Unpack

__all__ = (
    "AgentError",
    "BudgetError",
    "CallerError",
    "CapabilityError",
    "ErrorCode",
    "GuardrailError",
    "ModelError",
    "PluginError",
    "ProfileError",
    "SkillError",
    "StoreError",
    "SubagentError",
    "TetherError",
    "WorkspaceError",
)


class ErrorCode(StrEnum):
    """The stable codes; a code never changes meaning once released."""

    PROFILE_NOT_FOUND = "PROFILE_NOT_FOUND"
    PROFILE_INVALID_TOML = "PROFILE_INVALID_TOML"
    PROFILE_INVALID = "PROFILE_INVALID"
    PROFILE_EXTENDS_CYCLE = "PROFILE_EXTENDS_CYCLE"
    PATH_OUTSIDE_FOLDER = "PATH_OUTSIDE_FOLDER"
    UNKNOWN_AGENT = "UNKNOWN_AGENT"
    DATASET_INVALID = "DATASET_INVALID"
    UNKNOWN_PLUGIN = "UNKNOWN_PLUGIN"
    PLUGIN_NOT_INSTALLED = "PLUGIN_NOT_INSTALLED"
    PLUGIN_IMPORT_FAILED = "PLUGIN_IMPORT_FAILED"
    PLUGIN_HOOK_MISMATCH = "PLUGIN_HOOK_MISMATCH"
    PLUGIN_SETTINGS_INVALID = "PLUGIN_SETTINGS_INVALID"
    PLUGIN_NAME_CONFLICT = "PLUGIN_NAME_CONFLICT"
    DUPLICATE_PLUGIN = "DUPLICATE_PLUGIN"
    PLUGIN_CONTRACT_VIOLATION = "PLUGIN_CONTRACT_VIOLATION"
    PLUGIN_HOOK_FAILED = "PLUGIN_HOOK_FAILED"
    PLUGIN_CLASS_INVALID = "PLUGIN_CLASS_INVALID"
    PLUGIN_INIT_FAILED = "PLUGIN_INIT_FAILED"
    MISSING_REQUIRED_PLUGIN = "MISSING_REQUIRED_PLUGIN"
    UNSUPPORTED_CAPABILITY = "UNSUPPORTED_CAPABILITY"
    STORE_SPEC_INVALID = "STORE_SPEC_INVALID"
    STORE_SCHEMA_UNSUPPORTED = "STORE_SCHEMA_UNSUPPORTED"
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    SESSION_EXISTS = "SESSION_EXISTS"
    SESSION_CORRUPT = "SESSION_CORRUPT"
    SESSION_CONFLICT = "SESSION_CONFLICT"
    SESSION_BUSY = "SESSION_BUSY"
    STORE_BUSY = "STORE_BUSY"
    STORE_CORRUPT = "STORE_CORRUPT"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    DEPTH_LOWERED = "DEPTH_LOWERED"
    MODEL_SPEC_UNKNOWN = "MODEL_SPEC_UNKNOWN"
    MODEL_REQUEST_FAILED = "MODEL_REQUEST_FAILED"
    MODEL_CONFIG_MISSING = "MODEL_CONFIG_MISSING"
    CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
    COMPACTION_FAILED = "COMPACTION_FAILED"
    SCRIPT_INVALID = "SCRIPT_INVALID"
    SCRIPT_MISMATCH = "SCRIPT_MISMATCH"
    TOOL_CALLS_REPEATED = "TOOL_CALLS_REPEATED"
    INSTRUCTIONS_INVALID = "INSTRUCTIONS_INVALID"
    TOOL_INVALID = "TOOL_INVALID"
    TOOL_FILTER_INVALID = "TOOL_FILTER_INVALID"
    TOOL_SOURCE_FAILED = "TOOL_SOURCE_FAILED"
    SKILL_INVALID = "SKILL_INVALID"
    SKILL_PATH_NOT_FOUND = "SKILL_PATH_NOT_FOUND"
    UNKNOWN_SKILL = "UNKNOWN_SKILL"
    NO_PROVIDER = "NO_PROVIDER"
    DUPLICATE_PROVIDER = "DUPLICATE_PROVIDER"
    SUBAGENT_DEPTH_EXCEEDED = "SUBAGENT_DEPTH_EXCEEDED"
    INVALID_OUTPUT_SCHEMA = "INVALID_OUTPUT_SCHEMA"
    SUBAGENT_CANCELLED = "SUBAGENT_CANCELLED"
    SUBAGENT_INVALID = "SUBAGENT_INVALID"
    PERSISTENCE_UNAVAILABLE = "PERSISTENCE_UNAVAILABLE"
    UNAUTHORIZED = "UNAUTHORIZED"
    SUBAGENT_UNAVAILABLE = "SUBAGENT_UNAVAILABLE"
    NOT_RESUMABLE = "NOT_RESUMABLE"
    ACTIVATION_CLOSING = "ACTIVATION_CLOSING"
    PARENT_UNAVAILABLE = "PARENT_UNAVAILABLE"
    UNKNOWN_TASK = "UNKNOWN_TASK"
    TASK_MISMATCH = "TASK_MISMATCH"
    TASK_UNREACHABLE = "TASK_UNREACHABLE"
    TOO_MANY_BACKGROUND_TASKS = "TOO_MANY_BACKGROUND_TASKS"
    SKILL_PROVIDER_INVALID = "SKILL_PROVIDER_INVALID"
    UNEXPECTED_ERROR = "UNEXPECTED_ERROR"
    PLUGIN_UNEXPECTED_ERROR = "PLUGIN_UNEXPECTED_ERROR"
    HOST_UNAVAILABLE = "HOST_UNAVAILABLE"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    BUDGET_INVALID = "BUDGET_INVALID"
    CALLER_INVALID = "CALLER_INVALID"
    CALLER_REFUSED = "CALLER_REFUSED"
    SESSION_CLOSED = "SESSION_CLOSED"
    WORKSPACE_INVALID = "WORKSPACE_INVALID"
    WORKSPACE_UNAVAILABLE = "WORKSPACE_UNAVAILABLE"
    PATH_OUTSIDE_WORKSPACE = "PATH_OUTSIDE_WORKSPACE"
    TURN_NOT_FOUND = "TURN_NOT_FOUND"
    GUARDRAIL_INVALID = "GUARDRAIL_INVALID"
    GUARDRAIL_TRIPPED = "GUARDRAIL_TRIPPED"


class TetherError(Exception):
    """Base of every error the kernel raises on purpose.

    ``message`` says what is wrong, ``where`` names the file and key (or the plugin), ``remedy``
    says how to fix it. ``file``, ``key`` and ``plugin`` are kept as attributes so callers and
    tests need not parse the text. ``where`` replaces the rendered ``file, key`` when the
    location reads better in words (``plugin "subagent", setting max_depth = 3 in tether.toml``).
    """

    code: ErrorCode

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        file: Path | str | None = None,
        key: str | None = None,
        plugin: str | None = None,
        remedy: str | None = None,
        where: str | None = None,
    ) -> None:
        self.code = code
        self._where = where
        self.message = message
        self.file = Path(file) if file is not None else None
        self.key = key
        self.plugin = plugin
        self.remedy = remedy
        super().__init__(self.render())

    @property
    def where(self) -> str | None:
        """``file, key`` as far as they are known, unless the raiser phrased it itself."""
        if self._where is not None:
            return self._where
        parts: list[str] = []
        if self.file is not None:
            parts.append(str(self.file))
        if self.key:
            parts.append(self.key)
        return ", ".join(parts) or None

    def render(self) -> str:
        """The one-line form: ``message (where); remedy [CODE]``.

        Line breaks in quoted exception texts are folded so the error stays one line.
        """
        text = _one_line(self.message)
        if self.where:
            text += f" ({_one_line(self.where)})"
        if self.remedy:
            text += f"; {_one_line(self.remedy)}"
        return f"{text} [{self.code}]"


#: Characters that would end the line or drive the terminal: C0 and C1 controls but tab, and
#: Unicode's line and paragraph separators.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _one_line(text: str) -> str:
    """Fold line breaks (with the spaces around them) into one space, and show any other
    character that would break the line or reach the terminal as an escape (``\\r``,
    ``\\x1b``): a name or a path taken from a file cannot split or repaint the error."""
    folded = re.sub(r"\s*\n\s*", " ", text.strip())
    return _UNPRINTABLE.sub(lambda found: repr(found.group())[1:-1], folded)


class ProfileError(TetherError):
    """The profile (or an eval dataset run against it) cannot be read or does not have the
    expected shape."""


class PluginError(TetherError):
    """A plugin cannot be found, imported, registered, configured or trusted."""


class CapabilityError(TetherError):
    """A plugin requires something of another plugin that the profile does not provide."""


class StoreError(TetherError):
    """The session store cannot do what was asked without losing or inventing facts."""


class _ErrorPlace(TypedDict, total=False):
    """Where an error happened and how to fix it: the keyword arguments of
    :class:`TetherError` that a subclass passes through unchanged."""

    file: Path | str | None
    key: str | None
    plugin: str | None
    remedy: str | None
    where: str | None


class ModelError(TetherError):
    """A model could not be resolved or a request failed.

    ``recoverable`` errors (a timeout, a rate limit, a 5xx) are retried by the turn loop; the
    others end the turn with stop reason ``error``. The model plugin decides which are.

    ``retry_after`` is the number of seconds the server asked the client to wait before
    retrying (an HTTP ``Retry-After`` header, say), or ``None`` when it did not say. The turn
    loop waits at least that long before the next attempt, or gives up at once when the wait
    would exceed its remaining retry budget (``AgentLimits.retry_budget``).

    ``body`` is what the model's server answered, whole, when a plugin keeps it (an HTTP error
    page, say), for debugging; ``None`` otherwise.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        recoverable: bool = False,
        retry_after: float | None = None,
        body: str | None = None,
        **place: Unpack[_ErrorPlace],
    ) -> None:
        self.recoverable = recoverable
        self.retry_after = retry_after
        self.body = body
        super().__init__(code, message, **place)


class AgentError(TetherError):
    """An agent cannot be composed from its profile, tools or instructions."""


class SkillError(TetherError):
    """A skill or a skill provider breaks the contract (fails the catalog loudly)."""


class HostError(TetherError):
    """The session host a plugin offers (a cluster that runs the profile's sessions) cannot
    take a message: unreachable, or no worker picked it up."""


class SubagentError(TetherError):
    """A delegation cannot start (a child's own failure resolves with a stop reason instead)."""


class BudgetError(TetherError):
    """A tree budget cannot be set, or a model request or a child start would pass it
    (docs/budgets.md)."""


class CallerError(TetherError):
    """A caller cannot be read (``--caller``, ``TETHER_CALLER``, a client's ``_meta``), or a
    caller gate refuses it a session or a message (docs/callers.md)."""


class GuardrailError(TetherError):
    """A guardrail cannot be turned on (unknown, or one a route cannot serve), or one stopped
    a turn (docs/guardrails.md)."""


class WorkspaceError(TetherError):
    """A workspace cannot be set up or opened, or a path leaves it (docs/workspaces.md)."""
