"""tether-otel: tether's agents as OpenTelemetry GenAI traces and metrics.

Add ``"otel"`` (:class:`OtelPlugin`, a class-based plugin) to a profile's ``[tether] plugins``
and point ``[plugin.otel]`` (or the standard ``OTEL_*`` variables) at a collector: every turn is
an ``invoke_agent`` span, every model request a ``chat`` span, every tool call an
``execute_tool`` span, and a delegated child's turns are child spans of the call that started
them. See docs/observability.md.

The OpenTelemetry SDK is imported when the first agent is composed, not when the profile loads.
``OTEL_SDK_DISABLED=true`` turns the plugin off.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import tether
from tether.agents import Tracer

from ._settings import Settings

if TYPE_CHECKING:
    from ._setup import flush
    from ._tracer import OtelTracer

__all__ = ("COST_ATTRIBUTE", "OtelPlugin", "OtelTracer", "Settings", "flush")

#: The span attribute of a model request's cost in US dollars (the GenAI conventions define
#: none): on a ``chat`` span (and a remote agent's ``invoke_agent`` span) when its model's price
#: is known (docs/budgets.md), left out when not, never 0 for an unknown price.
COST_ATTRIBUTE = "tether.cost.usd"


def __getattr__(name: str) -> object:
    # The SDK costs a tenth of a second to import: only when used.
    if name == "OtelTracer":
        from ._tracer import OtelTracer

        return OtelTracer
    if name == "flush":
        from ._setup import flush

        return flush
    raise AttributeError(f"module 'tether_otel' has no attribute {name!r}")


class OtelPlugin(tether.Plugin[Settings]):
    """The plugin ``otel`` (a class-based plugin): one object per instance, which makes its
    tracer when the first agent is composed and keeps it."""

    settings_model = Settings

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._tracer: OtelTracer | None = None

    @tether.hookimpl
    def tether_tracers(self) -> list[Tracer]:
        """Every agent of the profile is traced (``OTEL_SDK_DISABLED=true``: none is)."""
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return []
        if self._tracer is None:
            from ._setup import make_tracer

            self._tracer = make_tracer(self.settings)
        return [self._tracer]
