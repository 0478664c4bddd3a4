"""tether-otel figures of issue 19, as medians of CPU time.

    uv run python benchmarks/otel.py [--quick] [--runs 5] [--turns 2000]
    uv run python benchmarks/otel.py --one off:sqlite     (one figure, one JSON line)

A one-step text turn (``await agent.run(prompt)`` on an entered agent, a ``FunctionModel`` that
answers at once) on the in-memory and the SQLite store, three ways:

* ``off``: a profile without the plugin (the turn loop has no tracer);
* ``on``: the same profile with ``otel`` loaded, recording into an OpenTelemetry SDK
  ``TracerProvider`` whose ``BatchSpanProcessor`` hands every span to an exporter that drops it,
  and a ``MeterProvider`` whose periodic reader exports to one that drops them too (the
  issue's "no-op exporter": everything up to the wire is paid);
* ``lean``: as ``on``, with ``metrics = false`` (spans only);
* ``content``: as ``on``, with ``capture_content = true``;

each with two models: a ``FunctionModel`` that answers at once in the process (the cheapest turn
there is, about 40-70 µs), and tether-openai against an OpenAI-compatible server in another
process on 127.0.0.1 that answers at once (what a real model's turn costs the process: the
request's JSON, the HTTP exchange, parsing the answer), on sessions of ``SESSION_TURNS`` turns
(a request carries the whole history: on one long session its JSON would dominate and vary).

Target: ``on`` at most 5 % over ``off``. Each run of each way is a fresh interpreter (the
OpenTelemetry providers are the process's), a few hundred turns of warm-up first, then
``--turns`` turns on one session, each timed alone; the runs alternate between the ways, and
the table has the median over the runs of each run's median. CPU time is
``time.process_time()`` (the export thread's work counts too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from deadlines import scenario

WAYS = ("off", "on", "lean", "content")
#: ``function``: a FunctionModel in the process; ``http``: tether-openai against an
#: OpenAI-compatible server in another process on 127.0.0.1 (what a real model's turn costs
#: the process: the request's JSON, the HTTP exchange, the answer parsed).
MODELS = ("function", "http")
STORES = ("memory", "sqlite")
ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 1, "total_tokens": 121},
    }
).encode()
TARGET = 1.05
#: Turns per session against the HTTP server (a new session after each SESSION_TURNS).
SESSION_TURNS = 10

PROFILE = """\
[tether]
plugins = [{plugins}]
{otel}
[agent.main]
model = "{model}"
"""
OTEL = """
[plugin.otel]
exporter = "none"
capture_content = {content}
metrics = {metrics}
"""


def _install_providers() -> None:
    """The SDK's providers with exporters that drop everything (before the plugin looks)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        MetricsData,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class DropSpans(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class DropMetrics(MetricExporter):
        def export(
            self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            return None

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropSpans()))
    trace.set_tracer_provider(provider)
    reader = PeriodicExportingMetricReader(DropMetrics(), export_interval_millis=1000)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))


def serve() -> None:
    """An OpenAI-compatible chat endpoint that answers "ok" at once; prints its port."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ANSWER)))
            self.end_headers()
            self.wfile.write(ANSWER)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


async def turns(
    way: str, store: str, count: int, warmup: int, model: str = "function"
) -> dict[str, float]:
    from tether import load_kernel
    from tether.runtime import Runtime
    from tether.store import MemoryStore, SessionStore, SQLiteStore

    if way != "off":
        _install_providers()
    with tempfile.TemporaryDirectory(prefix="tether-otel-bench-") as name:
        folder = Path(name)
        (folder / "bench_model.py").write_text("def answer(request):\n    return 'ok'\n")
        sys.path.insert(0, str(folder))
        names = ['"openai"'] if model == "http" else []
        if way != "off":
            names.append('"otel"')
        plugins = ", ".join(names)
        spec = "openai:bench" if model == "http" else "function:bench_model:answer"
        (folder / "tether.toml").write_text(
            PROFILE.format(
                plugins=plugins,
                model=spec,
                otel=OTEL.format(
                    content="true" if way == "content" else "false",
                    metrics="false" if way == "lean" else "true",
                )
                if way != "off"
                else "",
            )
        )
        kernel = load_kernel(folder / "tether.toml")
        opened: SessionStore = (
            MemoryStore() if store == "memory" else SQLiteStore(folder / "sessions.db")
        )
        samples: list[float] = []
        # A turn against the server sends the whole history: on one long session its JSON
        # would soon dominate (and vary), so those turns run on sessions of SESSION_TURNS.
        per_session = SESSION_TURNS if model == "http" else warmup + count
        async with Runtime.open(kernel, opened) as runtime:
            n = 0
            while n < warmup + count:
                agent = await runtime.compose()
                assert (agent.spec.tracer is None) == (way == "off"), way
                async with runtime.hold(agent):
                    for _ in range(min(per_session, warmup + count - n)):
                        began = time.process_time()
                        await agent.run(f"turn {n}")
                        spent = time.process_time() - began
                        if n >= warmup:
                            samples.append(spent)
                        n += 1
        return {"cpu_us": statistics.median(samples) * 1e6}


def _one(
    way: str, store: str, count: int, warmup: int, model: str, env: dict[str, str]
) -> dict[str, float]:
    with scenario(f"turns, telemetry {way}, {store}, {model} (in a fresh interpreter)", 720):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                f"{way}:{store}:{model}",
                "--turns",
                str(count),
                "--warmup",
                str(warmup),
            ],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(arguments: argparse.Namespace) -> None:
    runs = arguments.runs or (3 if arguments.quick else 7)
    count = arguments.turns or (500 if arguments.quick else 2000)
    warmup = arguments.warmup
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OPENAI_API_KEY": "bench",
        }
        print(
            f"one-step turn, CPU per turn (median of {runs} runs x {count} turns; "
            f"{max(count // 4, 50)} against the HTTP server, {SESSION_TURNS} per session)"
        )
        for model in arguments.models.split(","):
            # A turn against the server waits on its socket: fewer of them.
            turns = count if model == "function" else max(count // 4, 50)
            for store in arguments.stores.split(","):
                found: dict[str, list[float]] = {way: [] for way in WAYS}
                for _ in range(runs):
                    for way in WAYS:
                        found[way].append(
                            _one(
                                way,
                                store,
                                turns,
                                warmup // 5 if model == "http" else warmup,
                                model,
                                env,
                            )["cpu_us"]
                        )
                off = statistics.median(found["off"])
                for way in WAYS:
                    value = statistics.median(found[way])
                    ratio = value / off
                    verdict = ""
                    if way == "on":
                        verdict = "  ok" if ratio <= TARGET else f"  over {TARGET:.2f}x"
                    print(
                        f"  {model:8} {store:7} {way:8} {value:8.1f} µs  +{value - off:6.1f} µs"
                        f"  {ratio:5.3f}x{verdict}",
                        flush=True,
                    )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="tether-otel figures of issue 19.")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--models", default=",".join(MODELS), help="function,http")
    parser.add_argument("--stores", default=",".join(STORES), help="memory,sqlite")
    parser.add_argument("--one", default=None, metavar="WAY:STORE:MODEL")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve:
        serve()
    elif parsed.one is not None:
        way, store, model = parsed.one.split(":")
        with scenario(f"{parsed.turns or 2000} turns, telemetry {way}, {store}, {model}"):
            figure = anyio.run(turns, way, store, parsed.turns or 2000, parsed.warmup, model)
        print(json.dumps(figure))
    else:
        main(parsed)
