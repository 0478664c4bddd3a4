"""``[plugin.otel]``: where the traces and metrics go, and what they hold."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import tether

__all__ = ("Settings",)


class Settings(tether.PluginSettings):
    """The settings of the ``otel`` plugin (global layer). Every key may be left out: the
    standard ``OTEL_*`` environment variables then decide, as for any OpenTelemetry SDK."""

    exporter: Literal["otlp", "console", "none"] = "otlp"
    """``otlp``: send to a collector (``endpoint``); ``console``: print each span to stderr;
    ``none``: record nothing outside the process (an application's own provider, tests)."""
    protocol: Literal["http/protobuf", "grpc"] | None = None
    """The OTLP transport; default ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, then
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, then the installed exporter (``http/protobuf`` first):
    ``tether-otel[http]`` or ``tether-otel[grpc]`` installs one."""
    endpoint: str | None = None
    """The collector: ``http://HOST:4318`` for ``http/protobuf`` (``/v1/traces`` and
    ``/v1/metrics`` are added), ``http://HOST:4317`` for ``grpc``. Default: the
    ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variables, then the SDK's (localhost)."""
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    """Headers sent with every export (an API key: prefer ``OTEL_EXPORTER_OTLP_HEADERS``,
    which keeps it out of the profile)."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds one export may take, retries included; default ``OTEL_EXPORTER_OTLP_TIMEOUT``,
    then the SDK's 10. A process waits this long at exit when the collector is down."""
    service_name: str | None = None
    """``service.name`` of the resource; default ``OTEL_SERVICE_NAME``, then ``tether``."""
    capture_content: bool = False
    """Record messages, system instructions, tool definitions, tool arguments and results on
    the spans (the conventions' opt-in attributes). Off: they can hold anything a user or a
    tool said. ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` turns it on too."""
    metrics: bool = True
    """Record the GenAI and tether metrics (``gen_ai.client.token.usage``, ...)."""
    metric_interval: float = Field(default=60.0, gt=0)
    """Seconds between two metric exports (``OTEL_METRIC_EXPORT_INTERVAL`` is in ms and wins
    when set)."""
