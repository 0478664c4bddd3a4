"""The delegation contract: providers, start requests, runs and results."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio
from pydantic import BaseModel, ConfigDict, Field

from ._budgets import Budget
from ._turns import StopReason

if TYPE_CHECKING:
    from ..agents import Agent
    from ._capabilities import Offer
    from ._events import Event
    from ._models import Model
    from ._tools import ToolFilter

__all__ = (
    "CAPABILITIES",
    "AgentOptions",
    "CancelSignal",
    "Capability",
    "ContinuablePlan",
    "ContinuableProvider",
    "SettlingRun",
    "SubagentCapabilities",
    "SubagentEvent",
    "SubagentProvider",
    "SubagentResult",
    "SubagentRun",
    "SubagentStartRequest",
    "check_provider_offer",
    "declared_capabilities",
)

Capability = Literal["output_schema", "depth_limit", "tool_filter", "persona"]
#: The order capabilities are checked in; the first missing one is reported.
CAPABILITIES: tuple[Capability, ...] = ("output_schema", "depth_limit", "tool_filter", "persona")


@dataclass(frozen=True)
class SubagentEvent:
    """A lifecycle edge: ``provider-added``/``provider-removed``, ``start``/``end`` of a run."""

    kind: Literal["provider-added", "provider-removed", "start", "end"]
    provider: str
    run_id: str | None = None
    child_id: str | None = None
    local: bool | None = None
    stop_reason: str | None = None
    parent_id: str | None = None
    label: str | None = None
    """The delegation's short description."""
    depth: int | None = None
    """The child's delegation depth."""


class SubagentCapabilities(BaseModel):
    """What a provider can enforce for a start request. Declare honestly: the load-time
    negotiation rejects configurations that need a capability a provider lacks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    output_schema: bool = False
    """It can make the child end with JSON valid against a schema."""
    depth_limit: bool = False
    """It enforces ``max_depth`` on the child's own delegations."""
    tool_filter: bool = False
    """It restricts the child's tools."""
    persona: bool = False
    """It gives the child a persona (extra instructions)."""
    continuable: bool | None = None
    """It starts continuable children (it has ``async prepare_continuable``). ``None``, the
    default, means: whether the provider has that method."""

    def missing(self, needed: tuple[Capability, ...]) -> Capability | None:
        """The first capability of ``needed`` (in :data:`CAPABILITIES` order) this lacks."""
        for capability in CAPABILITIES:
            if capability in needed and not getattr(self, capability):
                return capability
        return None


class AgentOptions(BaseModel):
    """Options for the child agent; unset ones are inherited from the parent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    """A model spec (``provider:name``) for the child."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """The child's output-token budget per turn."""


class CancelSignal:
    """A cancellation channel a caller hands to a provider: honoured before and after start."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None  # made only when someone waits
        self._cancelled = False
        self.reason: str | None = None
        # The first callback, then a list of the rest (made only for a second): most
        # signals have one or none, and a live background child holds its signal.
        self._callback: Callable[[], object] | None = None
        self._callbacks: list[Callable[[], object]] | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str = "cancelled") -> None:
        if not self._cancelled:
            self._cancelled = True
            self.reason = reason
            if self._event is not None:
                self._event.set()
            if self._callback is not None:
                self._callback()
            for callback in self._callbacks or ():
                callback()

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` (synchronously) when the signal fires; at once if it has."""
        if self._cancelled:
            callback()
        elif self._callback is None:
            self._callback = callback
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    async def wait(self) -> None:
        if self._cancelled:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


@dataclass
class SubagentStartRequest:
    """Everything a provider needs to start a child."""

    prompt: str
    parent: Agent
    cancel: CancelSignal = field(default_factory=CancelSignal)
    agent_options: AgentOptions | None = None
    output_schema: Mapping[str, Any] | None = None
    """An object-rooted JSON Schema the child's final answer must satisfy."""
    max_depth: int | None = None
    """The deepest delegation allowed below the root; ``None`` leaves it to the provider."""
    tool_filter: ToolFilter | None = None
    persona: str | None = None
    label: str | None = None
    agent: str | None = None
    """The agent preset the child is: ``None`` for a copy of the parent's (spawn, fork), or
    the name of a declared subagent (a specialist), which brings its own instructions, tools,
    skills, model and limits and inherits nothing but its lineage."""
    tool: str | None = None
    """The tool that started the child, when it is a task (its receipt and ``<task_result>``
    name it, and a ``taskId`` continues it only through that tool)."""
    budget: Budget | None = None
    """The budget the child's subtree holds (docs/budgets.md), within what the parent's
    budgets have left; ``None``: its declared agent's own, if any. Either way every budget
    above the child still counts what it spends."""
    share_workspace: bool | None = None
    """Whether the child works in its parent's workspace (docs/workspaces.md); ``None``: as
    its provider and definition say (a fork and ``[agent.NAME] workspace = { share = true }``
    share, the others get a workspace of their own)."""

    def needs(self) -> tuple[Capability, ...]:
        """The capabilities this request relies on."""
        needed: list[Capability] = []
        if self.output_schema is not None:
            needed.append("output_schema")
        if self.max_depth is not None:
            needed.append("depth_limit")
        if self.tool_filter is not None:
            needed.append("tool_filter")
        if self.persona is not None:
            needed.append("persona")
        return tuple(needed)


class SubagentResult(BaseModel):
    """How a child's run ended. A child's failure resolves with its stop reason; only an
    infrastructure fault raises."""

    model_config = ConfigDict(frozen=True)

    output: str
    """The child's last non-empty assistant message (usage-only ones skipped), else ``""``."""
    structured: Any = None
    """With an output schema: the validated JSON value."""
    stop_reason: StopReason
    diagnostic: str | None = None
    """Why a run that did not complete ended, when there is more to say than the stop reason."""


@runtime_checkable
class SubagentRun(Protocol):
    """A started child. ``dispose()`` is idempotent: it cancels and waits until quiet."""

    @property
    def id(self) -> str:
        """The child's session id (for local runs)."""
        ...

    @property
    def local_agent(self) -> Agent | None:
        """The child agent when it runs in this process."""
        ...

    async def result(self) -> SubagentResult: ...

    async def dispose(self) -> None: ...


@runtime_checkable
class SettlingRun(SubagentRun, Protocol):
    """The optional part of a run that hands its result to a callback in its own task, so the
    caller needs no task of its own to wait for it (a background delegation's notice)."""

    def on_settled(self, callback: Callable[[SubagentResult], Awaitable[None]]) -> bool:
        """Await ``callback(result)`` once the result is known, then dispose of the child;
        ``False`` when the run has ended already (use :meth:`SubagentRun.result`)."""
        ...


@dataclass(frozen=True)
class ContinuablePlan:
    """What ``prepare_continuable`` decides for a continuable child before it is composed."""

    seed: Sequence[Event] = ()
    """Events the child's session starts with (a fork's copy of the parent's turns)."""
    keep_tool_list: bool = False
    """Keep the parent's tool list byte-identical and enforce a tool filter at call time."""
    model: Model | None = None
    """The child's model, when the provider supplies it (a remote agent behind a model)."""
    model_route: str | None = None
    """The model spec recorded for a cold restore, which resolves it again (``acp:NAME``)."""


@runtime_checkable
class ContinuableProvider(Protocol):
    """The optional part of a provider that starts continuable children."""

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan: ...


def declared_capabilities(provider: SubagentProvider) -> frozenset[str]:
    """What ``provider`` declares, as capability names (``continuable`` included when it is
    declared, or left unset and the provider has ``prepare_continuable``): the one declaration
    a provider's offer is derived from."""
    declared = provider.capabilities
    names = {name for name in CAPABILITIES if getattr(declared, name)}
    continuable = declared.continuable
    if continuable is None:
        continuable = isinstance(provider, ContinuableProvider)
    if continuable:
        names.add("continuable")
    return frozenset(names)


@runtime_checkable
class SubagentProvider(Protocol):
    """Starts children. An optional ``async prepare_continuable(request) -> ContinuablePlan``
    method is the continuable capability: its presence is what makes a provider able to start
    continuable children. An optional ``check() -> None`` says, without starting a child,
    whether the provider can run here (its program is installed, its folder exists): ``tether
    check`` calls it and reports the :class:`tether.TetherError` it raises; loading a profile
    does not (``tether sessions list`` needs no child)."""

    @property
    def name(self) -> str: ...

    @property
    def capabilities(self) -> SubagentCapabilities: ...

    @property
    def inherits_parent_context(self) -> bool:
        """Descriptive only: whether the child starts from the parent's history (fork)."""
        ...

    async def start(self, request: SubagentStartRequest) -> SubagentRun: ...


def check_provider_offer(
    offer: Offer, name: str, providers: Sequence[SubagentProvider]
) -> tuple[str, str] | None:
    """What a plugin's providers break of its offer of the subagent provider ``name``, as
    ``(problem, remedy)``, or ``None``. The load-time negotiation trusts the offer, so each
    offered capability must be one the provider object has: a ``continuable`` offer needs an
    ``async prepare_continuable``, a capability flag needs the same flag in the provider's
    ``capabilities``, and every provider needs an ``async start``. Offered capabilities the
    kernel does not know are between the plugin and the tools that require them."""
    named = [provider for provider in providers if provider.name == name]
    if not named:
        handed = ", ".join(f'"{provider.name}"' for provider in providers) or "none"
        return (
            f'its tether_subagent_providers hands over no provider named "{name}" (it hands '
            f"over: {handed})",
            "give the provider the offered name, or name the offer after the provider "
            "(tether.Offer(name=...))",
        )
    provider = named[0]
    what = f"its provider {type(provider).__name__}"
    declared: Any = provider.capabilities
    if not isinstance(declared, SubagentCapabilities):
        return (
            f"{what} declares capabilities of type {type(declared).__name__}",
            "declare capabilities = tether.subagents.SubagentCapabilities(...)",
        )
    if not _is_async(getattr(provider, "start", None)):
        return (
            f"{what} has no async start method",
            "define async def start(self, request) -> SubagentRun",
        )
    if declared.continuable and not _is_async(getattr(provider, "prepare_continuable", None)):
        return (
            f"{what} declares capabilities.continuable = True but has no async "
            "prepare_continuable method",
            "add async def prepare_continuable(self, request) -> ContinuablePlan, or leave "
            "continuable out of its capabilities",
        )
    for capability in (*CAPABILITIES, "continuable"):
        if capability not in offer.capabilities:
            continue
        if capability == "continuable":
            if not _is_async(getattr(provider, "prepare_continuable", None)):
                return (
                    f'it offers the "continuable" capability, but {what} has no async '
                    "prepare_continuable method",
                    "add async def prepare_continuable(self, request) -> ContinuablePlan to the "
                    'provider, or drop "continuable" from its tether_offers',
                )
        elif not getattr(declared, capability):
            return (
                f'it offers the "{capability}" capability, but {what} declares '
                f"capabilities.{capability} = False",
                f"declare {capability}=True in the provider's capabilities if it enforces it, "
                f'or drop "{capability}" from its tether_offers',
            )
    return None


def _is_async(function: object) -> bool:
    """Whether calling ``function`` gives an awaitable coroutine (an ``async def``, or an
    object whose ``__call__`` is one)."""
    if function is None or not callable(function):
        return False
    if inspect.iscoroutinefunction(function):
        return True
    return inspect.iscoroutinefunction(type(function).__call__)  # an object called like one
