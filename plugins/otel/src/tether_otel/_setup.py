"""Where the spans and metrics go: the process's OpenTelemetry providers.

An application that configured OpenTelemetry itself (an SDK ``TracerProvider`` set as the global
one before tether's agents are composed) keeps its providers: tether's spans and metrics go where
its own do, and the plugin's exporter settings are not used. Otherwise the plugin makes the
providers from ``[plugin.otel]`` and the ``OTEL_*`` variables and sets them as the global ones
(so that other instrumented libraries of the process join the same traces). They are flushed
when the process exits (:func:`flush` for a process that leaves with ``os._exit``).
"""

from __future__ import annotations

import os
import sys
import threading

from opentelemetry import metrics, trace
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from tether import __version__

from ._exporters import GRPC, protocol_for
from ._settings import Settings
from ._tracer import OtelTracer

__all__ = ("INSTRUMENTATION", "flush", "make_tracer")

#: The instrumentation scope of every span and metric.
INSTRUMENTATION = "tether"
#: The providers are the process's: two instances setting them up at once would race.
_lock = threading.Lock()


def make_tracer(settings: Settings) -> OtelTracer:
    """A tracer for ``settings`` (a plugin instance keeps the one it made), on the process's
    providers, which the first tracer made sets up when nobody else did."""
    with _lock:
        return _make(settings)


def flush(timeout: float = 5.0) -> None:
    """Export what the global providers hold now (before a process leaves with ``os._exit``,
    which skips the exporters' own flush at exit)."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.force_flush(int(timeout * 1000))
    meters = metrics.get_meter_provider()
    if isinstance(meters, MeterProvider):
        meters.force_flush(int(timeout * 1000))


def _capture(settings: Settings) -> bool:
    variable = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return settings.capture_content or variable.strip().lower() in ("true", "1", "span_only")


def _make(settings: Settings) -> OtelTracer:
    provider = trace.get_tracer_provider()
    if settings.exporter == "otlp":
        # A missing exporter fails before any provider is set (PLUGIN_NOT_INSTALLED).
        if not isinstance(provider, TracerProvider):
            _protocol(settings, "TRACES")
        if (
            settings.metrics
            and not isinstance(metrics.get_meter_provider(), MeterProvider)
            and os.environ.get("OTEL_METRICS_EXPORTER", "") != "none"
        ):
            _protocol(settings, "METRICS")
    if not isinstance(provider, TracerProvider):  # nobody configured the SDK: we do
        provider = TracerProvider(resource=_resource(settings))
        exporter = _span_exporter(settings)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    meter: Meter | None = None
    if settings.metrics:
        meters = metrics.get_meter_provider()
        if not isinstance(meters, MeterProvider):
            readers: list[PeriodicExportingMetricReader] = []
            exporter = _metric_exporter(settings)
            if exporter is not None:
                interval = (
                    None
                    if "OTEL_METRIC_EXPORT_INTERVAL" in os.environ
                    else settings.metric_interval * 1000
                )
                readers.append(PeriodicExportingMetricReader(exporter, interval))
            meters = MeterProvider(resource=_resource(settings), metric_readers=readers)
            metrics.set_meter_provider(meters)
        meter = meters.get_meter(INSTRUMENTATION, __version__)
    tracer = provider.get_tracer(INSTRUMENTATION, __version__)
    return OtelTracer(tracer, meter, capture_content=_capture(settings))


def _resource(settings: Settings) -> Resource:
    name = settings.service_name or os.environ.get("OTEL_SERVICE_NAME") or "tether"
    return Resource.create({SERVICE_NAME: name})


def _protocol(settings: Settings, signal: str) -> str:
    return protocol_for(settings.protocol, signal)


def _span_exporter(settings: Settings) -> SpanExporter | None:
    if settings.exporter == "none":
        return None
    if settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout may be a protocol's (tether acp)
    headers = settings.headers or None
    if _protocol(settings, "TRACES") == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(
            endpoint=settings.endpoint, headers=headers, timeout=settings.timeout
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    endpoint = None if settings.endpoint is None else settings.endpoint.rstrip("/") + "/v1/traces"
    return HttpSpanExporter(endpoint=endpoint, headers=headers, timeout=settings.timeout)


def _metric_exporter(settings: Settings) -> MetricExporter | None:
    if settings.exporter == "none" or os.environ.get("OTEL_METRICS_EXPORTER", "") == "none":
        return None  # a receiver that takes traces only (Phoenix, Jaeger)
    if settings.exporter == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stderr)
    headers = settings.headers or None
    if _protocol(settings, "METRICS") == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(
            endpoint=settings.endpoint, headers=headers, timeout=settings.timeout
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    endpoint = None if settings.endpoint is None else settings.endpoint.rstrip("/") + "/v1/metrics"
    return HttpMetricExporter(endpoint=endpoint, headers=headers, timeout=settings.timeout)
