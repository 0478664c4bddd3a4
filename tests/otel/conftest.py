"""The OpenTelemetry providers of this test process: set once (OpenTelemetry allows one global
provider per process), read in memory; each test starts with none recorded.

The plugin finds an SDK provider already set, as in an application that configured
OpenTelemetry itself, and records into it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider, UpDownCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_exporter = InMemorySpanExporter()
# Delta: each read holds what was recorded since the one before (a test reads its own).
_reader = InMemoryMetricReader(
    preferred_temporality={
        Counter: AggregationTemporality.DELTA,
        UpDownCounter: AggregationTemporality.DELTA,
        Histogram: AggregationTemporality.DELTA,
    }
)


def _install() -> None:
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))


class Recorded:
    """What the process recorded since the test began."""

    def spans(self) -> list[ReadableSpan]:
        return list(_exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Each metric's points as ``(attributes, value)``: a sum's value, a histogram's
        ``(count, sum)``."""
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = _reader.get_metrics_data()
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:  # type: ignore[attr-defined]
                        value = getattr(point, "value", None)
                        if value is None:
                            value = (point.count, point.sum)  # type: ignore[attr-defined]
                        attributes: dict[str, Any] = dict(point.attributes or {})
                        found.setdefault(metric.name, []).append((attributes, value))
        return found


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    _install()
    _exporter.clear()
    _reader.get_metrics_data()  # what earlier tests recorded is read and gone
    yield Recorded()
    _exporter.clear()
