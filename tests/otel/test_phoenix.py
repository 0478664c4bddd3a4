"""The delegation example's trace, exported over OTLP by ``tether run`` (a real process, the
plugin's own providers) to a receiver nobody here wrote, Arize Phoenix (PyPI, run with ``uv tool
run`` in an environment of its own), and read back through Phoenix's REST API: one trace per
root turn, every child, tool and model call in it, parents as they were."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.testing import scaled

ROOT = Path(__file__).parents[2]
#: What running an example in the checkout leaves behind (its store), not copied.
IGNORED = shutil.ignore_patterns(".tether")
PHOENIX = "arize-phoenix==20.26.1"
PROJECT = "tether-e2e"
#: Phoenix takes 20 s of CPU to start: on a busy 2-core machine, a minute or more.
START_TIMEOUT = scaled(300.0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=scaled(10)) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def phoenix() -> Iterator[str]:
    """A Phoenix server on free ports, its database in memory; its base URL."""
    uv = shutil.which("uv")
    if uv is None:
        reason = "uv is not on PATH: it runs Arize Phoenix in an environment of its own"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    http_port, grpc_port = _free_port(), _free_port()
    folder = Path(tempfile.mkdtemp(prefix="phoenix-"))
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(http_port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_SQL_DATABASE_URL": "sqlite:///:memory:",
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    base = f"http://127.0.0.1:{http_port}"
    with (folder / "phoenix.log").open("wb") as log:
        process = subprocess.Popen(
            [uv, "tool", "run", "--from", PHOENIX, "phoenix", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers too are stopped with it
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"Phoenix ended: {(folder / 'phoenix.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(base + "/healthz", timeout=scaled(2)).read()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"Phoenix did not start in {START_TIMEOUT:.0f} s")
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _spans(base: str, expected: int) -> list[dict[str, Any]]:
    """The project's spans, once ``expected`` have arrived (Phoenix stores them a moment
    after it answered the export)."""
    url = f"{base}/v1/projects/{PROJECT}/spans?limit=1000"
    deadline = time.monotonic() + 60
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            spans = _get(url)["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: the project's first span is not stored yet
                raise
        if len(spans) >= expected:
            return spans
        time.sleep(0.2)
    pytest.fail(f"Phoenix holds {len(spans)} spans, not {expected}")


@pytest.mark.timeout(600)
def test_the_delegation_examples_trace_reaches_phoenix_whole(phoenix: str, tmp_path: Path):
    example = tmp_path / "delegation"
    shutil.copytree(ROOT / "examples" / "delegation", example, ignore=IGNORED)
    profile = example / "tether.toml"
    text = profile.read_text().replace('"subagent"]', '"subagent", "otel"]')
    profile.write_text(text + f'\n[plugin.otel]\nendpoint = "{phoenix}"\nmetrics = false\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TETHER_DISABLE_PLUGIN_AUTOLOAD", None)
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"openinference.project.name={PROJECT}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tether",
            "run",
            "--profile",
            str(profile),
            "We launch on Thursday 10 December; Priya owns it.",
            "Plan the launch announcement.",
        ],
        cwd=example,
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(300),
    )
    assert done.returncode == 0, done.stderr
    # Turn 1: the turn and its chat. Turn 2: the turn, two chats, three calls, and under each
    # call a child's turn and its chat.
    spans = _spans(phoenix, 2 + 1 + 2 + 3 + 3 + 3)
    by_id = {span["context"]["span_id"]: span for span in spans}
    roots = sorted((s for s in spans if s["parent_id"] is None), key=lambda s: s["start_time"])
    assert [s["name"] for s in roots] == ["invoke_agent main", "invoke_agent main"]
    second = roots[1]
    trace_id = second["context"]["trace_id"]
    in_trace = [s for s in spans if s["context"]["trace_id"] == trace_id]
    assert len(in_trace) == 1 + 2 + 3 + 3 + 3

    def children(span: dict[str, Any]) -> list[dict[str, Any]]:
        return [s for s in in_trace if s["parent_id"] == span["context"]["span_id"]]

    calls = [s for s in children(second) if s["name"].startswith("execute_tool")]
    assert sorted(c["name"] for c in calls) == [
        "execute_tool extract",
        "execute_tool fork",
        "execute_tool subagent",
    ]
    for call in calls:
        (child,) = children(call)
        assert child["name"].startswith("invoke_agent")
        attributes = child["attributes"]
        assert attributes["gen_ai.operation.name"] == "invoke_agent"
        assert attributes["tether.session.parent"] == second["attributes"]["gen_ai.conversation.id"]
        (chat,) = children(child)
        assert chat["name"] == "chat script.toml"
        assert chat["attributes"]["gen_ai.provider.name"] == "tether.scripted"
        assert by_id[chat["parent_id"]] is child
    assert second["attributes"]["tether.turn.stop_reason"] == "completed"
