"""The spans of a case, captured in-process: an OpenTelemetry SDK provider with an in-memory
exporter, set as the process's before the profile loads, so the ``otel`` plugin (tether-otel)
records into it instead of exporting (docs/observability.md: an application's own provider is
kept). A span belongs to a case when it, or a span above it, carries the
``gen_ai.conversation.id`` of a session of the case's tree (docs/evals.md, "Spans")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether import ErrorCode, ProfileError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ("CONVERSATION", "RecordedSpan", "SpanCapture")

#: The attribute every span of tether-otel's carries: the session it was recorded in.
CONVERSATION = "gen_ai.conversation.id"


@dataclass(frozen=True)
class RecordedSpan:
    """A finished span, as an expectation reads it."""

    name: str
    attributes: Mapping[str, Any]


class SpanCapture:
    """Every span the process records from :meth:`start` on, kept in memory."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    @classmethod
    def start(cls, dataset_path: object) -> SpanCapture:
        """Set an SDK tracer provider recording into memory (and a meter provider that exports
        nothing) as the process's, unless an SDK provider is set already: then record from it
        too. ``DATASET_INVALID`` when the OpenTelemetry SDK is not installed."""
        try:
            from opentelemetry import metrics, trace
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )
        except ImportError:
            raise ProfileError(
                ErrorCode.DATASET_INVALID,
                "eval dataset expects spans, and the OpenTelemetry SDK is not installed",
                where=str(dataset_path),
                remedy="install tether-otel (uv add tether-otel) and load the otel plugin, "
                "or remove expect.spans",
            ) from None
        exporter = InMemorySpanExporter()
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        if not isinstance(metrics.get_meter_provider(), MeterProvider):
            metrics.set_meter_provider(MeterProvider())  # the otel plugin's metrics stay here
        return cls(exporter)

    def spans_of(self, sessions: Iterable[str]) -> list[RecordedSpan]:
        """The finished spans recorded in ``sessions`` (a case's tree), and below them."""
        wanted = set(sessions)
        finished = list(self._exporter.get_finished_spans())
        by_id = {span.context.span_id: span for span in finished if span.context is not None}
        found: list[RecordedSpan] = []
        for span in finished:
            current = span
            belongs = False
            for _ in range(len(finished) + 1):  # a chain of parents, never a cycle
                attributes = current.attributes or {}
                if attributes.get(CONVERSATION) in wanted:
                    belongs = True
                    break
                parent = current.parent
                if parent is None or parent.span_id not in by_id:
                    break
                current = by_id[parent.span_id]
            if belongs:
                found.append(RecordedSpan(span.name, dict(span.attributes or {})))
        return found
