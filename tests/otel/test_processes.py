"""tether-otel in processes of its own: the providers it makes from the profile, flushed when
the process exits; and a profile without it never imports OpenTelemetry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tether.testing import scaled

PROFILE = """\
[tether]
plugins = [{plugins}]
store = "sqlite:sessions.db"
{otel}
[agent.main]
model = "scripted:script.toml"
"""
SCRIPT = '[[steps]]\ntext = "Thursday."\n'


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TETHER_DISABLE_PLUGIN_AUTOLOAD", None)
    return env


def test_tether_run_with_the_console_exporter_prints_the_turns_spans_to_stderr(tmp_path: Path):
    """The plugin's own provider (no application configured one), its batch processor
    flushed at exit; stdout keeps only what tether run prints."""
    (tmp_path / "script.toml").write_text(SCRIPT)
    otel = '\n[plugin.otel]\nexporter = "console"\nmetrics = false\nservice_name = "launch-bot"\n'
    (tmp_path / "tether.toml").write_text(PROFILE.format(plugins='"otel"', otel=otel))
    done = subprocess.run(
        [sys.executable, "-m", "tether", "run", "When?", "--profile", "tether.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["> When?", "Thursday."]
    assert "invoke_agent" not in done.stdout
    spans = _console_spans(done.stderr)
    assert sorted(span["name"] for span in spans) == ["chat script.toml", "invoke_agent main"]
    turn = next(span for span in spans if span["name"] == "invoke_agent main")
    chat = next(span for span in spans if span["name"] == "chat script.toml")
    assert chat["parent_id"] == turn["context"]["span_id"]
    assert turn["attributes"]["tether.turn.stop_reason"] == "completed"
    assert turn["resource"]["attributes"]["service.name"] == "launch-bot"


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed (one per span, indented)."""
    decoder = json.JSONDecoder()
    spans: list[dict[str, Any]] = []
    index = 0
    while (start := text.find("{", index)) != -1:
        try:
            value, index = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            index = start + 1
            continue
        if isinstance(value, dict) and "name" in value and "context" in value:
            spans.append(value)  # pyright: ignore[reportUnknownArgumentType]
    return spans


def test_a_profile_without_the_plugin_never_imports_opentelemetry(tmp_path: Path):
    (tmp_path / "script.toml").write_text(SCRIPT)
    (tmp_path / "tether.toml").write_text(PROFILE.format(plugins="", otel=""))
    code = """
import sys, anyio
from tether import load_kernel
from tether.runtime import Runtime
from tether.store import SQLiteStore

async def main():
    kernel = load_kernel("tether.toml")
    async with Runtime.open(kernel, SQLiteStore("sessions.db")) as runtime:
        agent = await runtime.compose()
        assert agent.spec.tracer is None
        async with agent:
            assert await agent.run("When?") == "completed"

anyio.run(main)
loaded = sorted(name for name in sys.modules if name.startswith(("opentelemetry", "tether_otel")))
print(loaded)
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_tether_check_composes_every_agent_with_the_plugin(tmp_path: Path):
    """``tether check`` builds every agent's preset outside any event loop: the plugin's
    tracer is made there too."""
    (tmp_path / "script.toml").write_text(SCRIPT)
    otel = '\n[plugin.otel]\nexporter = "console"\nprotocol = "grpc"\n'
    (tmp_path / "tether.toml").write_text(PROFILE.format(plugins='"otel"', otel=otel))
    done = subprocess.run(
        [sys.executable, "-m", "tether", "check", "--profile", "tether.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "otel" in done.stdout


def test_a_collector_that_is_down_costs_the_run_its_timeout_at_exit_only(tmp_path: Path):
    """Spans go out in the background; at exit the process gives the exports ``timeout``
    seconds, says on stderr that they failed, and still succeeds."""
    import socket
    import time

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "script.toml").write_text(SCRIPT)
    otel = f'\n[plugin.otel]\nendpoint = "http://127.0.0.1:{port}"\ntimeout = 1.0\n'
    (tmp_path / "tether.toml").write_text(PROFILE.format(plugins='"otel"', otel=otel))
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tether", "run", "When?", "--profile", "tether.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=scaled(120),
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["> When?", "Thursday."]
    assert "Failed to export" in done.stderr
    assert took < 12  # with the SDK default (10 s an export) it took 14 s here, idle


def test_tether_run_exports_the_metrics_at_exit(tmp_path: Path):
    """The metric reader's last export runs when the process exits: the GenAI and tether
    metrics of the run reach the exporter (the console here), with their attributes."""
    (tmp_path / "script.toml").write_text(SCRIPT)
    otel = '\n[plugin.otel]\nexporter = "console"\nmetric_interval = 3600\n'
    (tmp_path / "tether.toml").write_text(PROFILE.format(plugins='"otel"', otel=otel))
    done = subprocess.run(
        [sys.executable, "-m", "tether", "run", "When?", "--profile", "tether.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    names: set[str] = set()
    decoder = json.JSONDecoder()
    text, index = done.stderr, 0
    while (start := text.find("{", index)) != -1:
        try:
            value, index = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            index = start + 1
            continue
        for resource in value.get("resource_metrics", []) if isinstance(value, dict) else []:
            for scope in resource["scope_metrics"]:
                names.update(metric["name"] for metric in scope["metrics"])
    assert {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "tether.turns",
    } <= names, names
