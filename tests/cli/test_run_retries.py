"""A failing endpoint says so while tether waits (issue 38): each retry is a line on standard
error, ``[retrying in 1s (1/8): HTTP 503 ...]``, never part of the answer on standard output,
and the error that ends a turn after the retries never promises another one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tether.testing import scaled, write_profile

#: Generous: the suite runs on a busy 2-core machine.
TIMEOUT = scaled(90.0)

COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "The answer."},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}


class Unavailable:
    """A real HTTP server on 127.0.0.1: answers a chat request with 503 and the next of
    ``waits`` as its ``Retry-After``, while there is one; then with a whole chat completion."""

    def __init__(self, waits: list[int]) -> None:
        self.waits = waits
        self.posts = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                owner.posts += 1
                if owner.posts <= len(owner.waits):
                    body = b"Service Unavailable"
                    self.send_response(503)
                    self.send_header("retry-after", str(owner.waits[owner.posts - 1]))
                    self.send_header("content-type", "text/plain")
                else:
                    body = json.dumps(COMPLETION).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def server_factory() -> Iterator[type[Unavailable] | object]:
    made: list[Unavailable] = []

    def make(waits: list[int]) -> Unavailable:
        server = Unavailable(waits)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def tether_run(folder: Path, spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    drop = ("TETHER_DEBUG", "TETHER_DISABLE_PLUGIN_AUTOLOAD")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["OPENAI_API_KEY"] = "sk-test"
    return subprocess.run(
        [sys.executable, "-m", "tether", "run", "--model", spec, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_profile(tmp_path, '[tether]\nstore = "memory"\nplugins = ["openai"]\n[agent.main]\n')
    return tmp_path


def test_each_retry_is_a_line_on_stderr_and_stdout_holds_only_the_answer(project, server_factory):
    server = server_factory([1, 1])
    result = tether_run(project, f"openai-compatible:m@{server.url}", "hi")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:-1] == ["> hi", "The answer."], result.stdout
    assert lines[-1].startswith("session ")
    assert "retrying" not in result.stdout
    retries = [line for line in result.stderr.splitlines() if line.startswith("[retrying")]
    assert len(retries) == 2, result.stderr
    for number, line in enumerate(retries, start=1):
        # The server asked for 1 s: the pause is at least that, and the line says so.
        assert line.startswith(f"[retrying in 1s ({number}/8): HTTP 503 from {server.url}"), line
        assert "Service Unavailable" in line
        assert line.endswith("]")
    assert server.posts == 3


def test_a_server_asking_for_more_than_the_budget_ends_the_turn_at_once_saying_why(
    project, server_factory
):
    server = server_factory([1, 120, 1])
    result = tether_run(project, f"openai-compatible:m@{server.url}", "hi")
    assert result.returncode == 1, result.stderr
    retries = [line for line in result.stderr.splitlines() if line.startswith("[retrying")]
    assert len(retries) == 1, result.stderr
    assert retries[0].startswith("[retrying in 1s (1/8): HTTP 503"), retries
    stopped = [line for line in result.stdout.splitlines() if line.startswith("[turn 1 stopped")]
    assert len(stopped) == 1, result.stdout
    assert "the server asked to wait 120 s before retrying" in stopped[0]
    assert "gave up at once" in stopped[0]
    assert "sent again" not in stopped[0]
    assert "tether check --model" in stopped[0]  # what to do, now that no retry comes
    assert server.posts == 2
