"""tether-a2a: children that are remote agents, spoken to over the Agent2Agent protocol (A2A).

``[[plugin.a2a.agents]]`` names one or more A2A agents by the URL of their agent card (with
HTTP headers, written out or read from the environment); each is a subagent provider of that
name. A child is a local *mirror* session (header, lineage, durable inbox, like any child)
whose model is the remote agent (:class:`A2aModel`): one A2A message per turn, in one A2A
context per child. One-shot and continuable children both work; a continuable child's
follow-ups continue its context, after a restart too.

Capabilities are declared honestly: an output schema is asked for in the task's message and
checked by the kernel (asked again in the same context when the answer does not match); A2A
cannot make a remote agent honour a tool filter, a depth limit or a persona, so none of those is
offered, and a delegation tool that needs one fails at load (bind it with
``max_depth = "provider-managed"``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

import tether
from tether.models import ModelProvider
from tether.subagents import ContinuablePlan, SubagentCapabilities, SubagentStartRequest
from tether.subagents.local import LocalChildRun, start_local_child

from ._identity import IdentityMismatch, check_identity, pinned_mismatch
from ._model import CONTEXT_DESCRIPTOR, A2aModel, client_for, fetch_card
from ._settings import (
    A2aAgentSettings,
    IdentitySettings,
    ServeSettings,
    Settings,
    headers_of,
    url_of,
)

if TYPE_CHECKING:
    import click

# The a2a-sdk wraps each step of a request in an OpenTelemetry span unless this says not to
# (read when it is first imported): a millisecond of a served request's 5-6 ms of CPU here.
# tether's own spans (tether-otel) cover the turn; set it to true for the SDK's as well.
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")

__all__ = (
    "CONTEXT_DESCRIPTOR",
    "A2aAgentSettings",
    "A2aModel",
    "A2aProvider",
    "IdentitySettings",
    "ServeSettings",
    "Settings",
)

#: The transport tether speaks to a remote agent (the SDK client's default).
JSONRPC = "JSONRPC"


class A2aProvider:
    """Children run by one remote A2A agent."""

    # An output schema is asked for in the task's message and checked (and asked again) by the
    # kernel; nothing else can be enforced on a remote agent. Its children are continuable.
    capabilities = SubagentCapabilities(output_schema=True, continuable=True)
    inherits_parent_context = False
    route = "a2a"  # its children's results are remote results (docs/guardrails.md)

    def __init__(self, spec: A2aAgentSettings) -> None:
        self.spec = spec
        self.name = spec.name
        self.guardrails_policy = spec.guardrails
        """``forward``, ``exempt`` or ``None``: what the check at load reads
        (docs/guardrails.md)."""

    def check(self) -> None:
        """Raise ``PLUGIN_SETTINGS_INVALID`` when the agent cannot be used from here: a header
        variable is not set, its card cannot be read, or it offers no JSON-RPC interface. For
        ``tether check`` (which reads the card over the network); a child's first turn reads
        it too and ends ``error`` with the same reason."""
        spec = self.spec
        headers_of(spec)  # a variable that is not set is said first
        url = url_of(spec)
        try:
            card = anyio.run(_read_card, spec)
        except IdentityMismatch as exc:
            raise self._invalid(
                f"A2A agent {spec.name!r} at {url} is not the pinned agent: {exc}",
                "point url at the agent you meant, or update identity if the agent changed",
            ) from exc
        except Exception as exc:
            pin = pinned_mismatch(exc)
            if pin is not None:
                raise self._invalid(
                    f"A2A agent {spec.name!r} at {url} is not the pinned agent: {pin}",
                    "point url at the agent you meant, or update identity.tls_sha256 if its "
                    "certificate changed",
                ) from exc
            raise self._invalid(
                f"the card of A2A agent {spec.name!r} could not be read from {url}: "
                f"{str(exc)[:500] or type(exc).__name__}",
                "start the agent, or fix url (its base URL, or the URL of its agent card)",
            ) from exc
        bindings = {interface.protocol_binding for interface in card.supported_interfaces}
        if JSONRPC not in bindings:
            offered = ", ".join(sorted(bindings)) or "none"
            raise self._invalid(
                f"A2A agent {spec.name!r} offers no JSON-RPC interface (its card lists: {offered})",
                "tether speaks A2A over JSON-RPC; use an agent that serves it",
            )

    def _invalid(self, problem: str, remedy: str) -> tether.PluginError:
        return tether.PluginError(
            tether.ErrorCode.PLUGIN_SETTINGS_INVALID,
            f'invalid settings for plugin "a2a": {problem}',
            key=f'[[plugin.a2a.agents]] name = "{self.name}", '
            f"{'url' if self.spec.url is not None else 'url_env'}",
            plugin="a2a",
            remedy=remedy,
        )

    async def start(self, request: SubagentStartRequest) -> LocalChildRun:
        model = A2aModel(self.spec, output_schema=request.output_schema)
        return await start_local_child(request, provider=self.name, model=model)

    async def prepare_continuable(self, request: SubagentStartRequest) -> ContinuablePlan:
        # The model route lets a cold restore rebuild the model from this profile.
        return ContinuablePlan(
            model=A2aModel(self.spec, continuable=True, output_schema=request.output_schema),
            model_route=f"a2a:{self.name}",
        )


async def _read_card(spec: A2aAgentSettings) -> Any:
    """``spec``'s card, read as a child's first turn reads it, its identity checked."""
    async with client_for(spec, spec.connect_timeout) as http:
        card = await fetch_card(spec, http)
        await check_identity(spec, card, http)
        return card


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_subagent_providers(settings: Settings) -> list[A2aProvider]:
    # Nothing goes online here: this runs whenever a profile is loaded. See A2aProvider.check.
    return [A2aProvider(spec) for spec in settings.agents]


@tether.hookimpl
def tether_model_providers(settings: Settings) -> list[ModelProvider]:
    """``a2a:NAME``: the model of a child of the A2A agent NAME (used to restore one)."""
    specs = {spec.name: spec for spec in settings.agents}

    def factory(name: str, base: Path) -> Any:
        spec = specs.get(name)
        if spec is None:
            raise tether.ModelError(
                tether.ErrorCode.MODEL_SPEC_UNKNOWN,
                f'no A2A agent named "{name}" in [plugin.a2a]',
                remedy=f"configured: {', '.join(specs) or 'none'}",
            )
        return A2aModel(spec, continuable=True)

    return [ModelProvider("a2a", factory)]


@tether.hookimpl
def tether_cli_commands() -> list[click.Command]:
    """``tether a2a serve`` (declared in the entry points, group ``tether.commands``)."""
    from ._command import a2a_group

    return [a2a_group]
