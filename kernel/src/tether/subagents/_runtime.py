"""``SubagentRuntime``: providers by name, checked starts, lifecycle events, lineage queries."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from ..agents._guards import REMOTE_ROUTES, GuardTrip, check, off_route
from ..contracts import (
    ContinuableProvider,
    GuardKind,
    SubagentEvent,
    SubagentProvider,
    SubagentResult,
    SubagentRun,
    SubagentStartRequest,
)
from ..errors import CapabilityError, ErrorCode, PluginError, SubagentError, TetherError
from ._continuation import ContinuableStart, ContinuationManager
from ._depth import child_depth
from ._tasks import Tasks, is_settling

if TYPE_CHECKING:
    from ..agents import Agent
    from ..store import SessionHeader, SessionStore

__all__ = ("SubagentRuntime", "check_output_schema")

log = logging.getLogger("tether.subagents")


class _ObservedRun:
    """Wraps a provider's run so its end is reported exactly once, after its start."""

    def __init__(
        self,
        runtime: SubagentRuntime,
        run: SubagentRun,
        run_id: str,
        provider: str,
        parent: str,
        label: str | None = None,
        depth: int | None = None,
        guard: Agent | None = None,
        route: str = "local",
    ) -> None:
        self.label = label
        self._guard = guard  # the parent, whose guardrails check the result on its way up
        self._route = route
        self.depth = depth
        self._runtime = runtime
        self._run = run
        self.run_id = run_id
        self._provider = provider
        self._parent = parent
        self._ended = False
        self._on_settled: Callable[[SubagentResult], Awaitable[None]] | None = None

    @property
    def id(self) -> str:
        return self._run.id

    @property
    def local_agent(self) -> Agent | None:
        return self._run.local_agent

    async def result(self) -> SubagentResult:
        result = await self._run.result()
        self._end(result.stop_reason)
        return await self._checked(result)

    async def _checked(self, result: SubagentResult) -> SubagentResult:
        """``result`` as the parent's ``child_result`` (or ``remote_result``) guardrails let
        it up: a replacement is what the parent reads (its records stored in the parent's
        log first); a trip ends the parent's turn (``GuardTrip``)."""
        parent = self._guard
        kind: GuardKind = "remote_result" if self._route in REMOTE_ROUTES else "child_result"
        if parent is None or not result.output or not parent.spec.guards.of(kind):
            return result
        seen = await check(parent, kind, result.output, target=self._run.id, route=self._route)
        if not seen.events:
            return result
        await parent.lease.append(*seen.events, hold=True)
        return result.model_copy(update={"output": seen.content})

    async def dispose(self) -> None:
        try:
            await self._run.dispose()
        finally:
            self._end("aborted")

    def on_settled(self, callback: Callable[[SubagentResult], Awaitable[None]]) -> bool:
        """The provider's run's ``on_settled`` (:class:`SettlingRun`), reporting the end first;
        ``False`` when the provider's run has none, or has ended already."""
        run = self._run
        if not is_settling(run):
            return False
        self._on_settled = callback
        return run.on_settled(self._settled)

    async def _settled(self, result: SubagentResult) -> None:
        self._end(result.stop_reason)
        callback, self._on_settled = self._on_settled, None
        if callback is not None:
            try:
                result = await self._checked(result)
            except GuardTrip as trip:  # the parent is not in this turn: it reads the refusal
                assert self._guard is not None
                await self._guard.lease.append(*trip.events, hold=True)
                result = SubagentResult(
                    output="",
                    stop_reason="error",
                    diagnostic=f"the result was withheld: {trip}",
                )
            await callback(result)

    def _end(self, stop_reason: str) -> None:
        if self._ended:
            return
        self._ended = True
        self._runtime.emit(
            SubagentEvent(
                "end",
                self._provider,
                self.run_id,
                self._run.id,
                self._run.local_agent is not None,
                stop_reason,
                self._parent,
                self.label,
                self.depth,
            )
        )


class SubagentRuntime:
    """Where subagent providers register and delegations start.

    ``start`` checks, in order: the provider exists (``NO_PROVIDER``), it has every capability
    the request needs (``UNSUPPORTED_CAPABILITY``, the first missing one), the depth
    (``SUBAGENT_DEPTH_EXCEEDED``), the output schema (``INVALID_OUTPUT_SCHEMA``); a rejected
    start emits no events and starts nothing.
    """

    def __init__(self, store: SessionStore | None = None) -> None:
        self.store = store
        self._providers: dict[str, SubagentProvider] = {}
        self._listeners: list[Callable[[SubagentEvent], object]] = []
        self._continuation: ContinuationManager | None = None
        self._tasks: Tasks | None = None

    # ------------------------------------------------------------ providers and events

    def on_event(self, listener: Callable[[SubagentEvent], object]) -> Callable[[], None]:
        """Call ``listener(event)`` on every lifecycle edge; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def continuation(self) -> ContinuationManager:
        """Continuable children: start, follow up, interrupt, report, list, recover."""
        if self._continuation is None:
            self._continuation = ContinuationManager(self)
        return self._continuation

    @property
    def tasks(self) -> Tasks:
        """Background tasks: receipts, results, wait, cancel, output."""
        if self._tasks is None:
            self._tasks = Tasks(self)
        return self._tasks

    async def start_continuable(self, name: str, request: SubagentStartRequest) -> ContinuableStart:
        """Start a continuable child; returns ``(child_id, message_id)`` once its first prompt
        is durably accepted. See :class:`tether.subagents.ContinuationManager`."""
        return await self.continuation.start(name, request)

    def emit(self, event: SubagentEvent) -> None:
        """Tell every listener of ``event`` (a listener that fails is logged and skipped)."""
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # an observer never breaks a delegation
                log.exception("subagent event listener failed on %s", event.kind)

    def register_provider(self, provider: SubagentProvider) -> Callable[[], None]:
        """Register ``provider``; returns its disposer. A listener that fails on
        ``provider-added`` rolls the registration back (and the error propagates)."""
        name = provider.name
        if provider.capabilities.continuable and not isinstance(provider, ContinuableProvider):
            raise PluginError(
                ErrorCode.PLUGIN_CONTRACT_VIOLATION,
                f'subagent provider "{name}" declares capabilities.continuable = True but has no '
                "prepare_continuable method",
                remedy="add async def prepare_continuable(self, request) -> ContinuablePlan, or "
                "leave continuable out of its capabilities",
            )
        if name in self._providers:
            raise SubagentError(
                ErrorCode.DUPLICATE_PROVIDER,
                f'a subagent provider named "{name}" is already registered',
                remedy="give each provider its own name",
            )
        self._providers[name] = provider
        event = SubagentEvent("provider-added", name)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                del self._providers[name]
                raise

        def dispose() -> None:
            if self._providers.get(name) is provider:
                self.remove_provider(name)

        return dispose

    def remove_provider(self, name: str) -> bool:
        """Unregister the provider ``name`` (``provider-removed``); whether it was there. Runs
        already started keep going; the tools bound to it leave the tool lists."""
        if self._providers.pop(name, None) is None:
            return False
        self.emit(SubagentEvent("provider-removed", name))
        return True

    def get(self, name: str) -> SubagentProvider | None:
        return self._providers.get(name)

    def providers(self) -> list[SubagentProvider]:
        """In registration order."""
        return list(self._providers.values())

    # ------------------------------------------------------------ starting

    def check(self, name: str, request: SubagentStartRequest) -> SubagentProvider:
        """Every check ``start`` makes, without starting anything."""
        return self._checked(name, request)[0]

    def _checked(self, name: str, request: SubagentStartRequest) -> tuple[SubagentProvider, int]:
        """The provider ``name`` and the depth of the child ``request`` asks for, checked."""
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(self._providers) or "none"
            raise SubagentError(
                ErrorCode.NO_PROVIDER,
                f'no subagent provider named "{name}"',
                remedy=f"registered providers: {known}",
            )
        missing = provider.capabilities.missing(request.needs())
        if missing is not None:
            raise CapabilityError(
                ErrorCode.UNSUPPORTED_CAPABILITY,
                f'subagent provider "{name}" does not support the "{missing}" capability',
                remedy="drop that option from the request or use another provider",
            )
        depth = child_depth(request.parent, request.max_depth)
        parent = request.parent
        # What the parent is checked by (passed down to it at run time too: a parent
        # tether's forwarded guardrails) must reach inside a remote child, or be let off.
        problem = off_route(provider, parent.spec.guardrails, agent=parent.name)
        if problem is not None:
            raise problem
        if request.output_schema is not None:
            check_output_schema(request.output_schema)
        return provider, depth

    async def start(self, name: str, request: SubagentStartRequest) -> SubagentRun:
        """Check, start, and observe a one-shot child run."""
        provider, depth = self._checked(name, request)
        if request.cancel.cancelled:
            raise SubagentError(
                ErrorCode.SUBAGENT_CANCELLED,
                f"the delegation was cancelled before it started ({request.cancel.reason})",
            )
        run = await provider.start(request)
        route = getattr(provider, "route", None) or ("local" if run.local_agent else "cluster")
        observed = _ObservedRun(
            self,
            run,
            uuid.uuid4().hex,
            name,
            request.parent.session_id,
            request.label,
            depth,
            request.parent,
            route,
        )
        self.emit(
            SubagentEvent(
                "start",
                name,
                observed.run_id,
                run.id,
                run.local_agent is not None,
                None,
                request.parent.session_id,
                request.label,
                depth,
            )
        )
        if request.cancel.cancelled:  # cancelled while it started: do not leave it running
            await observed.dispose()
            raise SubagentError(
                ErrorCode.SUBAGENT_CANCELLED,
                f"the delegation was cancelled while it started ({request.cancel.reason})",
            )
        return observed

    # ------------------------------------------------------------ lineage

    async def list_children(
        self, parent: str, *, store: SessionStore | None = None
    ) -> list[SessionHeader]:
        """The sessions whose durable ``parent_session`` is ``parent``, newest first."""
        store = store or self.store
        if store is None:
            raise SubagentError(
                ErrorCode.SUBAGENT_INVALID,
                "no session store to read lineage from",
                remedy="pass store=...",
            )
        return await store.sessions(parent=parent)

    async def open_work(self, agent: Agent) -> list[str]:
        """What is still open for ``agent``, one line each: its tasks working here, then its
        continuable children (what a compaction restates, docs/compaction.md)."""
        from ._listing import list_continuable

        lines: list[str] = []
        working = self.tasks.working(agent)
        for task in working:
            label = f": {task.label}" if task.label else ""
            lines.append(f"- task {task.id} ({task.tool}) is working{label}")
        busy = {task.id for task in working}
        try:
            children, _ = await list_continuable(self.continuation.activations, agent)
        except TetherError:
            children = []
        for child in children:
            if child.id not in busy:
                label = f": {child.label}" if child.label else ""
                lines.append(f"- child {child.id} can be continued{label}")
        return lines

    async def list_descendants(
        self, root: str, *, store: SessionStore | None = None
    ) -> list[SessionHeader]:
        """Every session below ``root``, breadth first."""
        found: list[SessionHeader] = []
        frontier = [root]
        while frontier:
            children = [
                child
                for parent in frontier
                for child in await self.list_children(parent, store=store)
            ]
            found.extend(children)
            frontier = [child.id for child in children]
        return found


def check_output_schema(schema: object) -> None:
    """An output schema must be a valid JSON Schema whose root is an object."""
    root = cast("Mapping[str, Any]", schema) if isinstance(schema, dict) else None
    if root is None or root.get("type") != "object":
        raise SubagentError(
            ErrorCode.INVALID_OUTPUT_SCHEMA,
            'an output schema must be a JSON Schema object with "type": "object" at its root',
            remedy='wrap the result in {"type": "object", "properties": {...}}',
        )
    from ..agents._tools import schema_problem

    problem = schema_problem(root)
    if problem is not None:
        raise SubagentError(
            ErrorCode.INVALID_OUTPUT_SCHEMA,
            f"the output schema is not a valid JSON Schema: {problem}",
            remedy="fix the schema",
        )
