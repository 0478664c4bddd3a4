"""Every hook a tether plugin can implement.

How tether calls hooks (read this before writing one):

* Hooks are synchronous and called with keyword arguments. An implementation may accept fewer
  arguments than its spec; that is how a spec grows without breaking plugins.
* tether calls each hook **once per loaded plugin instance**, in profile order, passing that
  instance's own validated ``settings``. A plugin named in two scopes (the global layer and an
  agent's layer) is two instances with two settings objects. Results are therefore always
  attributed to one plugin, and the kernel merges them by the rule the hook documents.
* Hooks hand typed objects back (pydantic models, classes); the kernel validates what comes back
  and stops startup with ``PLUGIN_CONTRACT_VIOLATION`` when it is not what the spec promises.
* A misspelled hook name, or an argument the spec does not have, stops startup with
  ``PLUGIN_HOOK_MISMATCH``.

Sections follow the lifecycle: *load* hooks run while the profile is being composed, before any
agent exists. The *command line* hook is apart: it runs without a profile, when a user types a
command a plugin adds. The kernel's own model providers, session stores and declared subagents
are built-in plugins (``tether.models``, ``tether.store``, ``tether.workspaces``,
``tether.specialists``) that implement these hooks like any other plugin.

What the hooks hand over is named from :mod:`tether.contracts` (imported when this module runs;
its names are imported on first use), so ``typing.get_type_hints`` resolves every spec.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

from . import contracts

if TYPE_CHECKING:
    import click
    from pydantic import BaseModel

__all__ = ("PROJECT_NAME", "hookimpl", "hookspec")

#: The pluggy project name: markers are ``tether_spec`` / ``tether_impl``.
PROJECT_NAME = "tether"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --------------------------------------------------------------------------------------------
# Load: the profile is being composed; nothing is running yet.
# --------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def tether_settings_model() -> type[BaseModel] | None:  # type: ignore[empty-body]
    """Declare the pydantic model this plugin's settings table is validated against.

    :return: a ``pydantic.BaseModel`` subclass, or ``None`` if the plugin takes no settings.

    Called once per plugin instance, right after it is registered. The profile's table for the
    instance (``[plugin.NAME]`` or ``[agent.A.plugin.NAME]``; an empty table when absent) is
    validated against the model; a failure stops startup with ``PLUGIN_SETTINGS_INVALID`` naming
    the key path and pydantic's reason. A plugin without this hook that is given a settings
    table is rejected the same way. Use :data:`tether.ProfilePath` for path fields so relative
    paths resolve against the profile's folder. Prefer ``extra="forbid"`` (as
    :class:`tether.PluginSettings` does) so a misspelled key is reported, not ignored.
    """


@hookspec
def tether_offers(settings: Any) -> Iterable[contracts.Offer]:  # type: ignore[empty-body]
    """Declare what this plugin provides to other plugins.

    :param settings: this instance's validated settings (``None`` without a settings model).
    :return: an iterable of :class:`tether.Offer` (``kind`` + ``capabilities``).

    Called once per plugin instance after its settings are validated. Requirements of other
    plugins (``tether_requires``) are matched against these offers; a provider should declare
    honestly only what it can enforce, so an impossible configuration fails at load.

    An offer of a kind the kernel consumes is checked right away against the objects the
    plugin hands over for it: an offer of kind ``"subagent provider"`` (named
    :attr:`tether.Offer.name`, else the plugin's name) must match a provider of that name
    from ``tether_subagent_providers`` that has an async ``start``, every offered capability
    flag set in its ``capabilities``, and an async ``prepare_continuable`` when it offers
    ``continuable``. A broken promise stops startup with ``PLUGIN_CONTRACT_VIOLATION`` naming
    the plugin, the offer, and what is missing.
    """


@hookspec
def tether_requires(settings: Any) -> Iterable[contracts.Requirement]:  # type: ignore[empty-body]
    """Declare what this plugin needs of other plugins, usually derived from its settings.

    :param settings: this instance's validated settings (``None`` without a settings model).
    :return: an iterable of :class:`tether.Requirement`.

    Called once per plugin instance after every plugin of the profile is registered and has
    declared its offers. Each requirement is looked up through the instance's scope chain
    (its own layer first, then the enclosing ones): a missing plugin stops startup with
    ``MISSING_REQUIRED_PLUGIN``, an offer without the required kind or capability with
    ``UNSUPPORTED_CAPABILITY``.
    """


@hookspec
def tether_store_providers(settings: Any) -> Iterable[contracts.StoreProvider]:  # type: ignore[empty-body]
    """Offer session stores: ``StoreProvider(prefix, open, description, argument)`` opens the
    store of the spec ``PREFIX:REST`` (or the bare ``PREFIX`` when ``argument`` is ``None``).

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.store.StoreProvider`.

    Called once per plugin instance of the global layer (the store is the whole profile's;
    instances in an agent's layer are not asked), at load, after the requirements are checked:
    the profile's ``[tether] store`` (default ``sqlite:.tether/sessions.db``) must name a prefix
    some provider offers, with an argument exactly when the provider takes one, or startup
    stops with ``STORE_SPEC_INVALID`` listing the known stores. The first provider of a prefix
    wins, in profile order; the built-in plugin ``tether.store`` (``sqlite``, ``memory``) comes
    last. ``open(rest, base)`` is called only when a command opens the store and must return a
    :class:`tether.store.SessionStore` (else ``PLUGIN_CONTRACT_VIOLATION``).
    """


@hookspec
def tether_workspace_backends(settings: Any) -> Iterable[contracts.WorkspaceBackend]:  # type: ignore[empty-body]
    """Offer workspace backends: what opens an agent's workspace and runs commands in it
    (docs/workspaces.md).

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.contracts.WorkspaceBackend`, each with its ``name``.

    Called once per plugin instance of the global layer (workspaces are the whole profile's),
    at load: the profile's ``[tether] workspace`` backend (default ``local``) must be a name
    some backend offers, or startup stops with ``WORKSPACE_INVALID`` listing the known ones.
    The first backend of a name wins, in profile order; the built-in plugin
    ``tether.workspaces`` (``local``, ``userns``) comes last. Nothing is opened at load: a
    backend's ``open`` runs when an agent enters its session, and one that cannot work on this
    machine raises ``WORKSPACE_UNAVAILABLE`` then. Anything but an iterable of
    ``WorkspaceBackend`` is ``PLUGIN_CONTRACT_VIOLATION``.
    """


@hookspec
def tether_session_hosts(settings: Any) -> Iterable[contracts.SessionHost]:  # type: ignore[empty-body]
    """Offer a place other than this process where the profile's sessions run (a cluster).

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.runtime.SessionHost` (usually one, or none).

    Called for the plugin instances of the global layer only, when ``tether run`` or ``tether
    sessions send`` starts (never at load; a host must not connect before its first ``send``).
    The first host offered, in profile order, is used: each message is handed to its
    ``send``, which returns once the message is stored durably, and the command follows the
    session's log in the profile's store to print the turn. A profile whose plugins offer none
    runs its sessions in the process, as always. Anything but an iterable of ``SessionHost``
    is ``PLUGIN_CONTRACT_VIOLATION``.
    """


@hookspec
def tether_tracers(settings: Any) -> Iterable[contracts.Tracer]:  # type: ignore[empty-body]
    """Offer tracers: what sees every agent's turns, model requests and tool calls as they
    happen (``tether-otel`` records them as OpenTelemetry spans).

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.agents.Tracer` (usually one, or none).

    Called for the plugin instances of the global layer only, when an agent's preset is built
    (once per agent of a runtime, and by ``tether check``). Every agent composed from the
    profile gets all of them, in profile order: the turn loop enters ``turn``,
    ``model_request`` and ``tool_call`` around each piece of work, in the task that does it,
    and asks ``carry`` for the sender's trace context when a message is accepted. A profile
    whose plugins offer none costs the loop one ``None`` check per piece of work. Anything but
    an iterable of ``Tracer`` is ``PLUGIN_CONTRACT_VIOLATION``.
    """


# --------------------------------------------------------------------------------------------
# Agents: called when an agent is composed for a session (``tether run``, ``tether context``,
# a delegated child), once per plugin instance visible from the agent's scope.
# --------------------------------------------------------------------------------------------


@hookspec
def tether_tools(settings: Any) -> Iterable[contracts.Tool]:  # type: ignore[empty-body]
    """Offer model-facing tools to agents whose scope chain includes this plugin instance.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.agents.Tool`.

    Tools resolve through the scope chain nearest layer first: an agent-layer tool hides a
    global one of the same name; two plugins of one layer offering one name is an error
    (``TOOL_INVALID``). The tool list is fixed when the agent is composed and stays
    byte-identical for the session, except for tools given ``available=``: those are listed
    only while ``available(agent)`` is true.
    """


@hookspec
def tether_preset_tools(settings: Any, preset: contracts.PresetView) -> Iterable[contracts.Tool]:  # type: ignore[empty-body]
    """Offer tools to one agent by what its preset declares (the built-in plugin
    ``tether.specialists`` offers a tool per declared subagent this way).

    :param settings: this instance's validated settings.
    :param preset: the :class:`tether.agents.AgentPreset` the runtime has just built, read as
        a :class:`tether.contracts.PresetView`: its ``name``, ``model_spec``, declared
        subagents (``specialists``) and the tools the plugins offer it (``tool_layers``); the
        preset has more (``scope``, ``tools``), which a plugin reads at its own risk.
    :return: an iterable of :class:`tether.agents.Tool` (none for a preset it has nothing for).

    Called once per agent preset a runtime builds (``Runtime.preset``: once per agent of a
    runtime), for every plugin visible from the preset's scope (its nearest instance), nearest
    layer first.
    The tools form a layer of their own, nearest of all: a name another tool of the agent
    has, or two instances offer, is ``TOOL_INVALID`` (no winner is picked); a tool object the
    agent has already (the task tools a delegation plugin offers too) is left out. Anything
    but an iterable of ``Tool`` is ``PLUGIN_CONTRACT_VIOLATION``.
    """


@hookspec
def tether_tool_sources(settings: Any) -> Iterable[contracts.ToolSource]:  # type: ignore[empty-body]
    """Offer tool sources: tools that exist while something runs (an MCP server's), listed
    when an agent is composed rather than at load.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.agents.ToolSource`.

    Called once per plugin instance when its scope's agent preset is built. Each time the
    runtime composes an agent that sees the instance, it awaits ``list_tools(runtime)`` of
    every source (concurrently) and merges the tools into the instance's layer with its
    ``tether_tools``: the same rules apply (nearest layer wins a name, two offers of one name
    in one layer are ``TOOL_INVALID``), checked at compose. The agent's tool list is then
    fixed for its session, like every other tool. A source that cannot list fails the
    compose (``TOOL_SOURCE_FAILED`` unless it raises a :class:`tether.TetherError` of its
    own). ``eager`` sources are listed when ``Runtime.open`` opens and by ``tether check``.
    A delegated child takes its parent's tools as they were composed; a continuable child
    restored cold lists the sources again.
    """


@hookspec
def tether_model_providers(settings: Any) -> Iterable[contracts.ModelProvider]:  # type: ignore[empty-body]
    """Offer model providers: ``ModelProvider(prefix, factory)`` makes models for ``PREFIX:NAME``.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.models.ModelProvider`.

    The built-in plugin ``tether.models`` offers ``function`` and ``scripted``; the nearest
    plugin offering a prefix wins, and the built-in plugin comes after every plugin of the
    global layer. A spec whose prefix nobody provides fails with ``MODEL_SPEC_UNKNOWN`` listing
    the known prefixes (or the plugin to add, for a first-party prefix).
    """


@hookspec
def tether_instructions(settings: Any) -> Iterable[contracts.DynamicInstruction]:  # type: ignore[empty-body]
    """Offer dynamic instructions: resolvers keyed by slug, evaluated at session or turn start.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.agents.DynamicInstruction`.

    A value that differs from the slot's previous one is appended to the conversation as a
    ``<instruction slug="...">`` message of the instruction's role, never rewritten in place,
    so the prompt only grows. ``None`` leaves the slot unchanged.
    """


@hookspec
def tether_pre_step(settings: Any) -> Iterable[contracts.PreStep]:  # type: ignore[empty-body]
    """Offer pre-step hooks: async functions run before every model request of a turn.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.agents.PreStep`.

    Each hook receives a :class:`tether.agents.StepContext` and returns messages to append
    (logged as ``context/message`` with the hook's origin) or nothing. Hooks run in scope
    order (nearest layer first), after queued steering and injected messages.
    """


@hookspec
def tether_compaction_strategies(settings: Any) -> Iterable[contracts.CompactionStrategy]:  # type: ignore[empty-body]
    """Offer compaction strategies: other ways of writing a compacted session's summary.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.agents.CompactionStrategy` (``name`` and an async
        ``summarize(CompactionInput) -> str``).

    An agent uses one with ``compaction = { strategy = "NAME" }``; the strategy must be
    offered by a plugin visible in the agent's scope (nearest layer first), else composing
    the agent fails with ``COMPACTION_FAILED``. ``summary`` is the built-in strategy (the
    agent's own model) and cannot be offered. What the strategy gets and what the model sees
    after: docs/compaction.md.
    """


@hookspec
def tether_caller_gates(settings: Any) -> Iterable[contracts.CallerGate]:  # type: ignore[empty-body]
    """Offer caller gates: objects that may refuse a caller a session or a message.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.contracts.CallerGate` (a ``name`` and
        ``admit(Admission) -> str | None``).

    Called once per plugin instance visible from an agent's scope when the agent's preset is
    built. Each gate is asked, in scope order (nearest layer first) after the profile's own
    (``[agent.NAME] callers``), before a new session is created (``Runtime.compose``, kind
    ``session``; also a stored session composed for a named caller) and before every message
    a caller sends is accepted (``followup``, ``steer``, ``inject``; ``Runtime.send`` before
    it posts). The first that returns a reason refuses: ``CALLER_REFUSED`` is raised with
    it and nothing is written. Messages another session sends (a parent's task message, a
    child's notice or result) are not asked about. ``admit`` runs in the event loop on every
    message: a lookup, no I/O. Anything but an iterable of gates is
    ``PLUGIN_CONTRACT_VIOLATION`` (docs/callers.md).
    """


@hookspec
def tether_guardrails(settings: Any) -> Iterable[contracts.Guardrail]:  # type: ignore[empty-body]
    """Offer guardrails: checks on content (docs/guardrails.md).

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.contracts.Guardrail` (``name``, ``kinds`` and
        ``check(GuardSubject) -> GuardVerdict | Awaitable[GuardVerdict]``).

    Called once per plugin instance visible from an agent's scope when the agent's preset is
    built. An offered guardrail checks nothing until the profile turns it on by name:
    ``[tether] guardrails = [...]`` (every agent) or ``[agent.NAME] guardrails = [...]`` (that
    agent); either way it also applies to every child below the session, on every route,
    unless the child's agent is exempted (``[agent.NAME] guardrails_exempt``). A name no
    plugin in the scope offers, or offered twice, is ``GUARDRAIL_INVALID`` when the agent is
    composed (``tether check`` composes every agent). Anything but an iterable of guardrails
    is ``PLUGIN_CONTRACT_VIOLATION``.
    """


# --------------------------------------------------------------------------------------------
# Skills: called once per plugin instance when the kernel's skill registry is first used.
# --------------------------------------------------------------------------------------------


@hookspec
def tether_skill_providers(settings: Any) -> Iterable[contracts.SkillProviderFactory]:  # type: ignore[empty-body]
    """Offer skill providers for this plugin instance's scope layer.

    :param settings: this instance's validated settings.
    :return: an iterable of :class:`tether.skills.SkillProviderFactory` (name + ``create``).

    Each factory's ``create(control)`` is called once and the provider registered in the layer
    of the scope the instance belongs to (global, or the agent's). Provider names are unique per
    layer and ``runtime`` is reserved (``SKILL_PROVIDER_INVALID``). The nearest layer wins a
    skill name regardless of rank; see docs/skills.md.
    """


# --------------------------------------------------------------------------------------------
# Subagents: called once per plugin instance when the kernel's subagent runtime is first used.
# --------------------------------------------------------------------------------------------


@hookspec
def tether_subagent_providers(settings: Any) -> Iterable[contracts.SubagentProvider]:  # type: ignore[empty-body]
    """Offer subagent providers (objects implementing :class:`tether.subagents.SubagentProvider`;
    :class:`tether.subagents.local.LocalChildProvider` is the skeleton of one whose children
    are agents of the profile).

    :param settings: this instance's validated settings.
    :return: an iterable of providers, registered by name in ``runtime.subagents``.

    Called once per plugin instance: at load when the instance offers a ``"subagent provider"``
    (its providers are checked against the offer, see ``tether_offers``), else when the
    runtime is first used; the runtime registers the same objects. Provider names are unique
    across the profile (``DUPLICATE_PROVIDER``). A provider should also declare
    ``tether_offers`` of kind ``"subagent provider"`` listing the capabilities it enforces, so
    delegation tools that need one fail at load instead of at first use.
    """


# --------------------------------------------------------------------------------------------
# Command line: called without a profile, when the user types a command the plugin declares.
# --------------------------------------------------------------------------------------------


@hookspec
def tether_cli_commands() -> Iterable[click.Command]:  # type: ignore[empty-body]
    """Add commands (click commands or groups) to the ``tether`` command line.

    :return: an iterable of ``click.Command``; the command named ``NAME`` is the one the
        distribution declares for ``tether NAME`` (or ``tether GROUP NAME``).

    Each command must also be declared in the distribution's entry points, group
    ``tether.commands``: the entry-point name is the command's path (``acp`` for
    ``tether acp``; ``skills.validate`` for ``tether skills validate``, under a built-in group
    that takes plugin commands), the value the plugin object implementing this hook. The
    command line lists plugin commands from that metadata alone and imports the plugin, then
    calls this hook once, only when one of its commands is typed (``--help`` included). There
    are no settings: a command that needs a profile loads it itself (``tether.cli.load``).

    A built-in command keeps its name (a plugin command of the same path is never run, and
    ``tether --help`` warns about it); two distributions declaring one path is
    ``PLUGIN_NAME_CONFLICT`` when that command is typed. A hook that raises is
    ``PLUGIN_HOOK_FAILED``; anything but an iterable of click commands, or one without a
    command of the declared name, is ``PLUGIN_CONTRACT_VIOLATION``. Either way only that
    command fails; every other command works. ``TETHER_DISABLE_PLUGIN_AUTOLOAD`` does not hide
    plugin commands (see docs/hooks.md).
    """
