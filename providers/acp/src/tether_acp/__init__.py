"""tether-acp: children that are external agents, spoken to over the Agent Client Protocol.

``[[plugin.acp.agents]]`` names one or more ACP agents (command, args, env, cwd, file roots,
permission policy); each is a subagent provider of that name. A child is a local *mirror*
session (header, lineage, durable inbox, like any child) whose model is the external agent's
ACP session: one ``session/prompt`` per turn. One-shot and continuable children both work; a
continuable child keeps its ACP session for follow-ups and is restored with ``session/load``
after a restart when the agent offers it.

It also adds ``tether acp`` to the command line (:mod:`tether_acp._command`), which serves a
tether agent over ACP on stdio.

Capabilities are declared honestly: ACP cannot make an external agent honour an output schema,
a tool filter, a depth limit or a persona, so none is offered, and a delegation tool that needs
one fails at load (bind it with ``max_depth = "provider-managed"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import tether
from tether.agents import PermissionQuestion
from tether.models import ModelProvider
from tether.subagents import ContinuablePlan, SubagentCapabilities, SubagentStartRequest
from tether.subagents.local import LocalChildRun, start_local_child

from ._client import set_permission_host
from ._model import PARTIAL_DESCRIPTOR, SESSION_DESCRIPTOR, AcpModel
from ._settings import AcpAgentSettings, Settings, command_problem

if TYPE_CHECKING:
    import click

__all__ = (
    "PARTIAL_DESCRIPTOR",
    "SESSION_DESCRIPTOR",
    "AcpAgentSettings",
    "AcpModel",
    "AcpProvider",
    "PermissionQuestion",
    "Settings",
    "set_permission_host",
)


class AcpProvider:
    """Children run by one external ACP agent."""

    # Nothing ACP can enforce on an external agent; its children are continuable.
    capabilities = SubagentCapabilities(continuable=True)
    inherits_parent_context = False
    route = "acp"  # its children's results are remote results (docs/guardrails.md)

    def __init__(self, spec: AcpAgentSettings) -> None:
        self.spec = spec
        self.name = spec.name
        self.guardrails_policy = spec.guardrails
        """``forward``, ``exempt`` or ``None``: what the check at load reads
        (docs/guardrails.md)."""

    def check(self) -> None:
        """Raise ``PLUGIN_SETTINGS_INVALID`` when the agent cannot be started here: its program
        is not an executable on PATH, or its ``cwd`` is not a folder. For ``tether check``; a
        child's first turn makes the same checks and ends ``error`` with the same reason."""
        problem = command_problem(self.spec)
        if problem is not None:
            raise tether.PluginError(
                tether.ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'invalid settings for plugin "acp": {problem}',
                key=f'[[plugin.acp.agents]] name = "{self.name}", command',
                plugin="acp",
                remedy="install the agent, or give the full path of its program",
            )
        if self.spec.cwd is not None and not Path(self.spec.cwd).is_dir():
            raise tether.PluginError(
                tether.ErrorCode.PLUGIN_SETTINGS_INVALID,
                f'invalid settings for plugin "acp": cwd {str(self.spec.cwd)!r} of ACP agent '
                f"{self.name!r} is not a folder",
                key=f'[[plugin.acp.agents]] name = "{self.name}", cwd',
                plugin="acp",
                remedy="create the folder, or fix cwd",
            )

    async def start(self, request: SubagentStartRequest) -> LocalChildRun:
        return await start_local_child(request, provider=self.name, model=AcpModel(self.spec))

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        # The model route lets a cold restore rebuild the model from this profile.
        return ContinuablePlan(
            model=AcpModel(self.spec, continuable=True), model_route=f"acp:{self.name}"
        )


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_subagent_providers(settings: Settings) -> list[AcpProvider]:
    # No check of the agents' programs here: this runs whenever a profile is loaded, and
    # reading stored sessions needs no agent. See AcpProvider.check.
    return [AcpProvider(spec) for spec in settings.agents]


@tether.hookimpl
def tether_model_providers(settings: Settings) -> list[ModelProvider]:
    """``acp:NAME``: the model of a child of the ACP agent NAME (used to restore one)."""
    specs = {spec.name: spec for spec in settings.agents}

    def factory(name: str, base: Path) -> Any:
        spec = specs.get(name)
        if spec is None:
            raise tether.ModelError(
                tether.ErrorCode.MODEL_SPEC_UNKNOWN,
                f'no ACP agent named "{name}" in [plugin.acp]',
                remedy=f"configured: {', '.join(specs) or 'none'}",
            )
        return AcpModel(spec, continuable=True)  # a route is only recorded for those

    return [ModelProvider("acp", factory)]


@tether.hookimpl
def tether_cli_commands() -> list[click.Command]:
    """``tether acp`` (declared in the entry points, group ``tether.commands``)."""
    from ._command import acp_command

    return [acp_command]
