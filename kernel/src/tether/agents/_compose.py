"""Compose an :class:`Agent` from a kernel: its scope's tools, model, instructions and hooks."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AgentError, ErrorCode, ModelError, ProfileError
from ..kernel import Kernel
from ..models import BUILTIN_MODEL_PROVIDERS, Model, ModelProvider, resolve_model
from ..plugins import LoadedPlugin
from ..scopes import Scope
from ..store import SessionHeader, SessionStore
from ._agent import Agent, AgentLimits, PreStep, new_header
from ._instructions import PARALLEL_TOOLS_SECTION, DynamicInstruction, load_instructions
from ._tools import Tool, ToolRegistry

__all__ = ("AgentPreset", "compose_agent", "known_tool_names", "resolve_agent_name")

_KNOWN_TOOLS: weakref.WeakKeyDictionary[Kernel, frozenset[str]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class AgentPreset:
    """Everything an agent is before it has a session: the parts of its model request."""

    name: str | None
    kernel: Kernel
    scope: Scope
    system: tuple[str, ...]
    tools: ToolRegistry
    instructions: tuple[DynamicInstruction, ...]
    pre_steps: tuple[PreStep, ...]
    model_providers: tuple[ModelProvider, ...]
    model_spec: str | None

    def agent(
        self,
        header: SessionHeader,
        store: SessionStore,
        model: Model,
        *,
        limits: AgentLimits | None = None,
        cwd: Path | None = None,
        model_spec: str | None = None,
    ) -> Agent:
        """An agent of this preset on the session ``header``; ``model_spec`` is the spec of
        ``model``, recorded as the session's model when the agent takes the session (a change
        is logged), or ``None`` to leave the session's record as it is."""
        return Agent(
            header=header,
            store=store,
            model=model,
            system=self.system,
            tools=self.tools,
            instructions=self.instructions,
            pre_steps=self.pre_steps,
            limits=limits,
            kernel=self.kernel,
            scope=self.scope,
            cwd=cwd,
            model_spec=model_spec,
        )


def resolve_agent_name(kernel: Kernel, requested: str | None) -> str | None:
    """``requested``, else ``main``, else the only agent; ``None`` when none is declared."""
    if requested is not None:
        kernel.agent_scope(requested)  # raises UNKNOWN_AGENT with the declared names
        return requested
    agents = kernel.agents
    if not agents:
        return None
    if "main" in agents:
        return "main"
    if len(agents) == 1:
        return agents[0]
    raise ProfileError(
        ErrorCode.UNKNOWN_AGENT,
        f"the profile declares several agents ({', '.join(agents)}) and none is called main",
        file=kernel.profile.path,
        remedy="pass --agent NAME",
    )


def _collect(plugins: Iterable[LoadedPlugin], hook: str, kind: type[Any]) -> list[tuple[str, Any]]:
    return [(plugin.name, item) for plugin in plugins for item in plugin.collect(hook, kind)]


def build_preset(kernel: Kernel, agent: str | None) -> AgentPreset:
    """Collect an agent's parts from the plugins visible in its scope (once per kernel: a
    preset is fixed at load, like the base prompt it produces)."""
    cached = kernel._presets.get(agent)
    if cached is None:
        cached = kernel._presets[agent] = _build_preset(kernel, agent)
    return cached


def _build_preset(kernel: Kernel, agent: str | None) -> AgentPreset:
    scope = kernel.global_scope if agent is None else kernel.agent_scope(agent)
    layers = [_collect(plugins, "tether_tools", Tool) for _, plugins in scope.layers()]
    tools = ToolRegistry.from_layers(layers)
    visible = scope.visible_plugins()
    providers = [p for _, p in _collect(visible, "tether_model_providers", ModelProvider)]
    instructions = [i for _, i in _collect(visible, "tether_instructions", DynamicInstruction)]
    slugs = [i.slug for i in instructions]
    duplicated = sorted({slug for slug in slugs if slugs.count(slug) > 1})
    if duplicated:
        raise AgentError(
            ErrorCode.INSTRUCTIONS_INVALID,
            f"dynamic instruction slug(s) offered twice: {', '.join(duplicated)}",
            remedy="each slug names one slot; rename one of them",
        )
    pre_steps = [p for _, p in _collect(visible, "tether_pre_step", PreStep)]
    table = kernel.profile.agent.get(agent) if agent is not None else None
    system: list[str] = []
    if table is not None and table.instructions is not None:
        text = load_instructions(table.instructions)
        if text:
            system.append(text)
    if len(tools):
        system.append(PARALLEL_TOOLS_SECTION)
    return AgentPreset(
        name=agent,
        kernel=kernel,
        scope=scope,
        system=tuple(system),
        tools=tools,
        instructions=tuple(instructions),
        pre_steps=tuple(pre_steps),
        model_providers=(*providers, *BUILTIN_MODEL_PROVIDERS),
        model_spec=table.model if table is not None else None,
    )


def known_tool_names(kernel: Kernel) -> frozenset[str]:
    """The name of every tool some plugin instance of ``kernel`` offers, in any scope: what a
    tool filter may name. (A kernel is fixed at load, so this is worked out once.)"""
    known = _KNOWN_TOOLS.get(kernel)
    if known is None:
        known = frozenset(
            tool.name for plugin in kernel.plugins for tool in plugin.collect("tether_tools", Tool)
        )
        _KNOWN_TOOLS[kernel] = known
    return known


def resolve_preset_model(
    preset: AgentPreset, spec: str | None, *, base: Path | None = None
) -> Model:
    """The model for ``spec`` (or the preset's own), through the scope's model providers."""
    spec = spec or preset.model_spec
    if spec is None:
        where = f"[agent.{preset.name}] model" if preset.name else "the profile"
        raise AgentError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"no model for agent {preset.name or '(global)'}",
            key=where,
            remedy='set model = "provider:name" in the agent table or pass --model SPEC',
        )
    return resolve_model(spec, preset.model_providers, base=base)


async def compose_agent(
    kernel: Kernel,
    store: SessionStore,
    *,
    agent: str | None = None,
    model: Model | str | None = None,
    session_id: str | None = None,
    label: str | None = None,
    limits: AgentLimits | None = None,
    record_model: bool = True,
) -> Agent:
    """An :class:`Agent` for ``agent`` on a new session, or on ``session_id`` if given.

    Use the result as ``async with agent:``. A string ``model`` is a spec resolved relative to
    the current directory; ``None`` uses the session's recorded model, else the agent's profile
    ``model``. The spec is recorded in a new session's header; on a stored session a string
    ``model`` that differs from its recorded one becomes its model when the agent takes the
    session, logged as a ``model`` descriptor with the old and new spec. A session written
    before tether recorded models (header ``model`` None) keeps using the profile's model
    until one is given explicitly. ``record_model=False`` uses ``model`` on a stored session
    without recording it (an agent that only hosts others, as ``tether sessions send``'s).
    """
    header = await store.header(session_id) if session_id is not None else None
    if header is not None:
        # A stored session keeps its own agent preset; --agent may only confirm it.
        if agent is not None and header.agent != agent:
            raise AgentError(
                ErrorCode.UNKNOWN_AGENT,
                f'session "{session_id}" runs agent {header.agent!r}, not {agent!r}',
                remedy=f"drop --agent or pass --agent {header.agent}",
            )
        name = resolve_agent_name(kernel, header.agent)
    else:
        name = resolve_agent_name(kernel, agent)
    preset = build_preset(kernel, name)
    spec: str | None = None  # the spec to record, when it is known
    if model is not None and not isinstance(model, str):
        resolved: Model = model
    elif model is not None:
        resolved = resolve_preset_model(preset, model, base=Path.cwd())
        spec = model
    elif header is not None and header.model not in (None, preset.model_spec):
        # The session's own model, given as --model once: a relative path in it (function:,
        # scripted:) is relative to the directory tether runs in, as --model's is.
        try:
            resolved = resolve_preset_model(preset, header.model, base=Path.cwd())
        except ModelError as exc:
            raise ModelError(
                exc.code,
                f'session "{header.id}" runs model "{header.model}", which cannot be used '
                f"here: {exc.message}",
                remedy=f"{exc.remedy + '; or ' if exc.remedy else ''}pass --model SPEC to "
                "continue the session on another model (recorded in the session)",
            ) from exc
    else:
        # The profile's model (also when the session recorded that one): relative to the
        # profile file that names it.
        model_file = kernel.profile.file_of("agent", name, "model") if name else None
        base = model_file.parent if model_file is not None else kernel.profile.folder
        resolved = resolve_preset_model(preset, None, base=base)
        if header is None:
            spec = preset.model_spec
    if header is None:
        header = await store.create(new_header(agent=name, label=label, model=spec))
    if not record_model and session_id is not None:
        spec = None
    return preset.agent(header, store, resolved, limits=limits, model_spec=spec)
