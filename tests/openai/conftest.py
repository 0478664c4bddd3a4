"""A real HTTP server on 127.0.0.1 that plays recorded chat-completions answers."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether.testing import scaled

RECORDED = Path(__file__).parents[1] / "fixtures" / "openai"
#: The longest a hanging answer holds its connection when the client never lets go.
HANG_LIMIT = scaled(30.0)


@dataclass
class Answer:
    """One queued answer: ``hang`` holds the request without answering until the client
    drops the connection; ``drop`` closes the connection without a response."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    hang: bool = False
    drop: bool = False
    trickle: bool = False
    """Start a stream and send only SSE comments (keep-alives), every 0.1 s, until the client
    drops the connection."""


@dataclass
class RecordedServer:
    """Serves queued answers; records every request it got."""

    url: str = ""
    answers: list[Answer] = field(default_factory=list[Answer])
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    models: bytes = b'{"object": "list", "data": [{"id": "deepseek-chat", "object": "model"}]}'
    disconnected: threading.Event = field(default_factory=threading.Event)
    """Set when a client dropped a hanging request's connection."""

    def queue(
        self, name: str = "", status: int = 200, *, headers: dict[str, str] | None = None
    ) -> None:
        body = (RECORDED / name).read_bytes() if name else b""
        self.answers.append(Answer(status, body, headers or {}))

    def queue_body(self, data: Any, status: int = 200) -> None:
        self.answers.append(Answer(status, json.dumps(data).encode()))

    def hang(self) -> None:
        self.answers.append(Answer(hang=True))

    def drop(self) -> None:
        self.answers.append(Answer(drop=True))

    def trickle(self) -> None:
        self.answers.append(Answer(trickle=True))

    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]


def _wait_for_disconnect(sock: socket.socket, limit: float = HANG_LIMIT) -> bool:
    """Block until the peer closes ``sock`` (True) or ``limit`` seconds pass (False)."""
    readable, _, _ = select.select([sock], [], [], limit)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


@pytest.fixture
def server() -> Iterator[RecordedServer]:
    state = RecordedServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.requests_append(None)
            if self.path == "/v1/models":
                self.reply(Answer(200, state.models))
            else:
                self.reply(Answer(404, b'{"error": {"message": "not found"}}'))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self.requests_append(json.loads(self.rfile.read(length)))
            answer = state.answers.pop(0)
            if answer.hang:
                if _wait_for_disconnect(self.connection):
                    state.disconnected.set()
                self.close_connection = True
                return
            if answer.trickle:
                self.keep_alive()
                return
            if answer.drop:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.reply(answer)

        def keep_alive(self) -> None:
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            limit = time.monotonic() + HANG_LIMIT
            try:
                while time.monotonic() < limit:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    if _wait_for_disconnect(self.connection, 0.1):
                        state.disconnected.set()
                        return
            except OSError:
                state.disconnected.set()

        def requests_append(self, body: Any) -> None:
            state.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": body,
                }
            )

        def reply(self, answer: Answer) -> None:
            self.send_response(answer.status)
            # A recorded stream is served as one, as real servers do.
            streamed = answer.body.lstrip().startswith((b"data:", b":"))
            kind = "text/event-stream" if streamed else "application/json"
            headers = {"Content-Type": kind, **answer.headers}
            headers["Content-Length"] = str(len(answer.body))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that gave up closed the socket: expected in the timeout tests

    httpd = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
