"""A real HTTP server on 127.0.0.1 that plays recorded Messages API answers (JSON and
server-sent events), or answers a whole session through a simulated prompt cache."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .simulated import PromptCache, message_events, sse

RECORDED = Path(__file__).parents[1] / "fixtures" / "anthropic"
#: Environment variables of the SDK that must not leak into a test from the machine.
SDK_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CONFIG_DIR",
)


@dataclass
class Answer:
    """One queued answer; ``drop`` closes the connection without a response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    drop: bool = False


#: Writes the answer to a request body: a ``message`` object (its usage filled in by the
#: simulated cache).
Responder = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class RecordedServer:
    """Serves queued answers (or, with ``responder`` set, answers every request through the
    simulated cache); records every request it got."""

    url: str = ""
    answers: list[Answer] = field(default_factory=list[Answer])
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    responder: Responder | None = None
    cache: PromptCache = field(default_factory=PromptCache)
    usages: list[dict[str, int]] = field(default_factory=list[dict[str, int]])
    """With a responder: the usage of each answer, in order."""

    def queue(self, name: str, status: int = 200, *, headers: dict[str, str] | None = None) -> None:
        self.answers.append(Answer(status, (RECORDED / name).read_bytes(), headers or {}))

    def drop(self) -> None:
        self.answers.append(Answer(drop=True))

    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["body"] is not None]

    def answer(self, body: dict[str, Any]) -> Answer:
        assert self.responder is not None
        message = {
            "id": f"msg_{len(self.usages):04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "stop_sequence": None,
            **self.responder(body),
        }
        usage = self.cache.usage(body)
        self.usages.append(usage)
        message["usage"] = {**usage, "output_tokens": 7}
        if body.get("stream"):
            return Answer(body=sse(message_events(message)))
        return Answer(body=json.dumps(message).encode())


@pytest.fixture(autouse=True)
def _no_sdk_environment(monkeypatch):
    for name in SDK_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[RecordedServer]:
    state = RecordedServer()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.record(None)
            if self.path == "/v1/models":
                self.reply(Answer(body=(RECORDED / "models.json").read_bytes()))
            else:
                self.reply(Answer(404, b'{"type": "error", "error": {"type": "not_found_error"}}'))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            with lock:  # one request at a time through the cache, in arrival order
                self.record(body)
                answer = state.answer(body) if state.responder else state.answers.pop(0)
            if answer.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.reply(answer)

        def record(self, body: Any) -> None:
            state.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "x-api-key": self.headers.get("x-api-key"),
                    "anthropic-version": self.headers.get("anthropic-version"),
                    "body": body,
                }
            )

        def reply(self, answer: Answer) -> None:
            self.send_response(answer.status)
            streamed = answer.body.lstrip().startswith(b"event:")
            kind = "text/event-stream" if streamed else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(answer.body)))
            for key, value in answer.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that gave up closed the socket

    httpd = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
