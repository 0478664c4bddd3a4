"""What a skill is, at each stage of progressive disclosure, and who provides it: the value
types and protocols a skill provider plugin implements (re-exported by :mod:`tether.skills`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from ..skills import SkillProviderControl

__all__ = (
    "SKILL_NAME_MAX",
    "SKILL_NAME_PATTERN",
    "BundledFiles",
    "DirectoryResources",
    "InvocationPolicy",
    "OpaqueResources",
    "ResourceBase",
    "SkillCandidate",
    "SkillDefinition",
    "SkillFile",
    "SkillLocation",
    "SkillObservation",
    "SkillProvider",
    "SkillProviderBlocking",
    "SkillProviderDiagnostics",
    "SkillProviderFactory",
    "SkillProviderFiles",
    "SkillSummary",
    "SkippedSkill",
    "UrlResources",
    "is_skill_name",
)

#: Kebab-case: lowercase letters and digits in groups joined by single hyphens (dsh, Agent Skills).
SKILL_NAME_PATTERN = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
_SKILL_NAME = re.compile(SKILL_NAME_PATTERN)
#: The longest skill name the Agent Skills standard allows.
SKILL_NAME_MAX = 64


def is_skill_name(value: object) -> bool:
    """Whether ``value`` is a valid skill name (a string, kebab-case, at most 64 characters)."""
    # fullmatch, not match: ``$`` also matches before a trailing newline ("demo\n").
    return (
        isinstance(value, str)
        and len(value) <= SKILL_NAME_MAX
        and _SKILL_NAME.fullmatch(value) is not None
    )


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class InvocationPolicy(_Frozen):
    """Who may invoke a skill; the two switches are independent."""

    model_invocable: bool = True
    """The model may load it with ``load_skill`` (and it is listed in the catalog)."""
    user_invocable: bool = True
    """The user may invoke it with a ``/name`` gesture."""


class DirectoryResources(_Frozen):
    """The skill's files live in a directory; relative paths resolve against it."""

    kind: Literal["directory"] = "directory"
    path: str
    """The directory, as the provider reports it (usually absolute)."""


class UrlResources(_Frozen):
    """The skill's resources live under a URL; relative URLs resolve against it."""

    kind: Literal["url"] = "url"
    url: str
    """The base URL."""


class OpaqueResources(_Frozen):
    """The provider manages the resources; the description says how to reach them."""

    kind: Literal["opaque"] = "opaque"
    description: str
    """For the model: where the resources are and how to get them."""


ResourceBase = Annotated[
    DirectoryResources | UrlResources | OpaqueResources, Field(discriminator="kind")
]


def _name(value: object) -> object:
    if not is_skill_name(value):
        raise ValueError(f"{value!r} is not a skill name (kebab-case a-z0-9, at most 64)")
    return value


def _description(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        raise ValueError("the description is empty")
    return value


class SkillSummary(_Frozen):
    """What the catalog shows: enough to decide whether to load the skill."""

    name: str
    """The skill's id: kebab-case, at most 64 characters."""
    description: str
    """What it does and when to use it: what the model decides on. Not empty."""
    when_to_use: str | None = None
    """Optional extra routing guidance."""
    invocation: InvocationPolicy = Field(default_factory=InvocationPolicy)
    """Who may invoke it; the registry itself never filters on it."""
    source: str
    """Where it comes from, for people (``project-agents``, ``user-agents``, ``custom``,
    ``runtime``, ``package``...): prompt-visible metadata, not precedence."""
    provider: str
    """The name of the provider that lists and loads it."""
    resource_base: ResourceBase | None = None
    """Where the body's relative references resolve; ``None``: the provider manages them."""

    _check_name = field_validator("name", mode="before")(_name)
    _check_description = field_validator("description", mode="before")(_description)

    def summary(self) -> SkillSummary:
        """Just the summary fields (drops a candidate's rank and locator, a body)."""
        return SkillSummary(**{k: getattr(self, k) for k in SkillSummary.model_fields})


class SkillCandidate(SkillSummary):
    """A provider's offer of a skill: a summary plus how it ranks and how to load it."""

    rank: float = Field(allow_inf_nan=False)
    """Lower wins inside one scope layer."""
    locator: Any = Field(default=None, exclude=True, repr=False)
    """Opaque to everyone but the provider, which gets it back in ``get()``."""
    path: str | None = None
    """The file it was read from, when there is one."""
    metadata: dict[str, Any] | None = None
    """Provider-specific metadata (``metadata`` in the frontmatter)."""


def _tuple(value: object) -> object:
    # Strict mode takes only a tuple; a provider naturally builds a list.
    return tuple(cast("list[object]", value)) if isinstance(value, list) else value


class BundledFiles(_Frozen):
    """The files that ship with a skill (``scripts/``, ``references/``...), so the model can
    discover them; a bounded listing, not an inventory."""

    paths: tuple[str, ...] = ()
    """Relative to the skill's resource base, ``/``-separated, shallowest first."""
    omitted: int = Field(default=0, ge=0)
    """How many more files were found but not listed."""
    more: bool = False
    """The search stopped early: there may be files beyond :attr:`omitted`."""

    _check_paths = field_validator("paths", mode="before")(_tuple)


class SkillDefinition(SkillSummary):
    """A loaded skill: the summary and its body (frontmatter stripped)."""

    content: str
    """The instructions, verbatim."""
    path: str | None = None
    """The file it was read from, when there is one."""
    metadata: dict[str, Any] | None = None
    """Provider-specific metadata (``metadata`` in the frontmatter)."""
    content_line: int | None = Field(default=None, ge=1)
    """The line of :attr:`path` that :attr:`content` starts on, when the provider knows it:
    a body cut for the model then says from which line to read the rest."""
    bundled_files: BundledFiles | None = None
    """The files beside the skill, when the provider lists them (``None``: not listed)."""


class SkillFile(_Frozen):
    """A file bundled with a skill, read for the model (``read_skill_file``)."""

    path: str
    """Relative to the skill's resource base, ``/``-separated, as it was asked for (cleaned by
    :func:`tether.skills.bundled_path`)."""
    data: bytes
    """The file's bytes, at most the cap the reader asked for."""
    location: str | None = None
    """Where it was read (a real path, a URL), for people and logs."""


class SkippedSkill(_Frozen):
    """Something a provider found but does not offer, and why: for people, never the model.

    A skill file that does not parse, a root that cannot be read, a package root whose
    package is not installed... ``tether skills list`` ends with these.
    """

    path: str
    """Where: the file, folder or root (as the provider spells it)."""
    reason: str
    """What is wrong and how to fix it, one line."""
    name: str | None = None
    """The name the entry would have had (a folder's name, a file's stem), when there is one."""
    provider: str | None = None
    """The provider that skipped it; the registry fills it in when the provider leaves it out."""


class SkillLocation(_Frozen):
    """A place a provider looked for skills (a folder, a URL...): for people, never the model.

    ``tether skills list`` shows them, so a person whose catalog is empty learns where skills
    would have been found, and every listing shows which folder each source is.
    """

    path: str
    """Where (a folder, a ``pkg:`` root, a URL), as the provider spells it."""
    source: str
    """The ``source`` its skills carry (``project-claude``, ``user-agents``...)."""
    state: Literal["read", "missing", "skipped"]
    """``read``; ``missing`` (it does not exist: no problem); ``skipped`` (it exists but was
    not read: the observation's ``skipped`` says why)."""
    skills: int = Field(default=0, ge=0)
    """How many candidates the provider listed from it."""
    provider: str | None = None
    """The provider that looked; the registry fills it in when the provider leaves it out."""


class SkillObservation(_Frozen):
    """A ``list()`` result that may be partial: ``complete = False`` keeps it out of caches.

    The candidates of an incomplete observation are still listed and loadable.
    """

    candidates: Sequence[SkillCandidate]
    """What the provider found (any sequence; kept as a tuple)."""
    complete: bool
    """False when discovery was partial (an unreadable root, a failed watcher)."""
    skipped: Sequence[SkippedSkill] = ()
    """What the provider found but left out, and why (any sequence; kept as a tuple)."""
    searched: Sequence[SkillLocation] = ()
    """Where the provider looked, in its order (any sequence; kept as a tuple). Optional: a
    provider without places to name leaves it empty."""

    _sequence = field_validator("candidates", "skipped", "searched", mode="before")(_tuple)


@runtime_checkable
class SkillProvider(Protocol):
    """Lists skill candidates and loads their definitions.

    ``list`` returns candidates (a complete observation) or a :class:`SkillObservation`; a
    transient failure should return what it has with ``complete = False`` rather than raise.
    ``get`` returns the definition for one of its own candidates, or ``None`` when it vanished;
    it should re-read the source every time (bodies are never cached by the registry).

    Who is asking (docs/callers.md): a provider whose ``list`` (or ``get``) also takes a
    ``caller`` keyword (``async def list(self, *, cwd, caller=None)``) is given the agent's
    current :class:`~tether.contracts.Caller` (``None``: nobody known), so one profile can
    give different callers different skills; the registry then caches catalogs per caller.
    Whether it takes one is read once per class: a provider without it is called as before.

    Optional: :class:`SkillProviderChanges` (whether the source changed),
    :class:`SkillProviderDiagnostics` (advice for ``tether check``), :class:`SkillProviderFiles`
    (a skill's bundled files).
    """

    @property
    def name(self) -> str: ...

    async def list(self, *, cwd: Path) -> Sequence[SkillCandidate] | SkillObservation: ...

    async def get(self, candidate: SkillCandidate, *, cwd: Path) -> SkillDefinition | None: ...


@runtime_checkable
class SkillProviderChanges(Protocol):
    """Optional for a :class:`SkillProvider`: whether its source changed since the last
    ``list`` for ``cwd`` (:meth:`~tether.skills.SkillRegistry.refresh`). The skill tool calls
    it at the start of every turn, so it must cost the same with ten skills or ten thousand.
    Whether a provider implements it is read once per class."""

    async def changed(self, *, cwd: Path) -> bool: ...


@runtime_checkable
class SkillProviderDiagnostics(Protocol):
    """Optional for a :class:`SkillProvider`: advice about its configuration for
    ``tether check`` (a root that does not exist, skills laid out where they are not read).

    Each string is one line for a person, naming the place and the fix. It is never called on
    a model turn, so it may look further than ``list()`` does, within reason.
    """

    async def diagnose(self, *, cwd: Path) -> Sequence[str]: ...


@runtime_checkable
class SkillProviderBlocking(Protocol):
    """Optional for a :class:`SkillProvider`: its ``list`` and its advice read in the caller's
    thread, blocking it, for a command that reads a catalog once and would otherwise start an
    event loop for that alone (``tether check``; :meth:`SkillRegistry.list_blocking`).

    ``list_blocking`` answers what ``list`` answers; ``diagnose_blocking`` what
    :meth:`SkillProviderDiagnostics.diagnose` answers (``[]`` for a provider without advice).
    Neither is ever called while an event loop runs in the thread.
    """

    def list_blocking(self, *, cwd: Path) -> Sequence[SkillCandidate] | SkillObservation: ...

    def diagnose_blocking(self, *, cwd: Path) -> Sequence[str]: ...


@runtime_checkable
class SkillProviderFiles(Protocol):
    """Optional for a :class:`SkillProvider`: serve the files bundled with its skills, so the
    model can read a loaded skill's ``references/`` and ``scripts/`` (the skill tool's
    ``read_skill_file``, offered only while a visible provider implements this).

    ``path`` is already clean (relative, no ``..``, ``/``-separated: see
    :func:`tether.skills.bundled_path`); the provider confines it to the skill's own files
    (:func:`tether.skills.read_bundled_file` does, for a folder) and reads at most
    ``max_bytes``. Returns ``None`` when the skill itself vanished.

    Raises :class:`tether.skills.SkillFileRefused` for a file it will not serve (outside the
    skill, not a regular file, a loop; :class:`tether.skills.SkillFileTooLarge` over the cap),
    ``FileNotFoundError`` when there is no such file, and any other ``OSError`` for a failure
    that may pass.
    """

    async def read_file(
        self, candidate: SkillCandidate, path: str, *, cwd: Path, max_bytes: int
    ) -> SkillFile | None: ...


@dataclass(frozen=True)
class SkillProviderFactory:
    """What the ``tether_skill_providers`` hook returns: a name and how to make the provider.

    ``create(control)`` is called once when the provider is registered in a scope layer; keep
    ``control`` to call ``control.invalidate()`` when the provider's source changes (a call
    from a provider that has since been disposed or replaced does nothing).
    """

    name: str
    """The provider's name: unique in its scope layer; ``runtime`` is reserved."""
    create: Callable[[SkillProviderControl], SkillProvider]
    """Makes the provider; the provider's ``name`` must equal :attr:`name`."""
