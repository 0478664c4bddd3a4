"""``tether a2a serve`` under abuse, as a process of its own: connections that send nothing or
trickle, bodies that do not come, more connections than descriptors, more requests and large
bodies than it takes at once, and malformed requests, each answered with the error the spec
names, one log line at most and never a traceback."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest

from tether.store import SQLiteStore

from .test_serve import TIMEOUT, Server, client_of, free_port, send, served_profile

pytestmark = pytest.mark.anyio

HEADERS = {"content-type": "application/json", "a2a-version": "1.0"}


@contextlib.contextmanager
def serving(folder: Path, serve: str = "", *, descriptors: int | None = None) -> Iterator[Server]:
    """``tether a2a serve`` with ``[plugin.a2a.serve]`` lines ``serve``."""
    server = Server(
        served_profile(folder, serve=serve or "idle_close = 600"),
        free_port(),
        descriptors=descriptors,
    )
    try:
        yield server
    finally:
        server.stop()


def port_of(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1].strip("/"))


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port_of(server)), timeout=TIMEOUT)


def closed_by_server(raw: socket.socket) -> bytes:
    """What the server said before it closed ``raw`` (fails if it is still open after
    :data:`TIMEOUT`)."""
    said = b""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        raw.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = raw.recv(65536)
        except ConnectionResetError:
            return said
        except TimeoutError:
            break
        if not chunk:
            return said
        said += chunk
    raise AssertionError(f"the server kept the connection open; it said {said[:200]!r}")


def problems(server: Server) -> list[str]:
    """What the server logged besides its start line."""
    return [line for line in server.stderr().splitlines() if "tether a2a serve:" not in line]


# ------------------------------------------------------------------ slow and idle connections


def test_a_connection_that_sends_no_request_is_closed(tmp_path):
    with serving(tmp_path, "header_timeout = 1") as server:
        silent, partial = connect(server), connect(server)
        partial.sendall(b"POST / HTTP/1.1\r\nHost: a\r\n")  # headers never finished
        try:
            assert closed_by_server(silent) == b""
            assert closed_by_server(partial) == b""
        finally:
            silent.close()
            partial.close()


def test_a_connection_that_trickles_its_headers_is_closed_on_time(tmp_path):
    with serving(tmp_path, "header_timeout = 1") as server, connect(server) as raw:
        # Closed at its header timeout, not kept open by each byte (a busy machine adds some).
        assert trickle(raw) < TIMEOUT / 2


def trickle(raw: socket.socket) -> float:
    """Send ``raw`` a byte every 0.2 s (the attack) until the server closes it: how long that
    took."""
    started = time.monotonic()
    while time.monotonic() - started < TIMEOUT:
        try:
            raw.sendall(b"X")
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError("the server took a byte every 0.2 s for a minute")


def test_a_body_that_does_not_come_in_time_gets_408_and_the_connection_closes(tmp_path):
    with serving(tmp_path, "body_timeout = 1") as server, connect(server) as raw:
        raw.sendall(
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        said = closed_by_server(raw)
    assert said.startswith(b"HTTP/1.1 408 ")
    assert b"did not come within 1.0s" in said
    assert "Traceback" not in server.stderr()


def test_keep_alive_connections_close_after_keep_alive_requests(tmp_path):
    with serving(tmp_path, "keep_alive_requests = 2") as server:
        card = server.url + ".well-known/agent-card.json"
        with httpx.Client(timeout=TIMEOUT) as http:
            answers = [http.get(card) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.headers.get("connection") for a in answers] == [None, "close", None]


# ------------------------------------------------------------------ descriptors


async def test_idle_connections_past_the_descriptor_limit_leave_room_for_real_requests(
    tmp_path,
):
    # The 1,100 idle connections at a limit of 1,024, scaled down: 200 at 128.
    with serving(tmp_path, descriptors=128) as server:
        idle = [connect(server) for _ in range(200)]
        try:
            async with client_of(server.url) as client:
                task, _ = await send(client, "echo still here")
            assert task.artifacts[0].parts[0].text == "echo: still here (message 1)"
        finally:
            for raw in idle:
                raw.close()
        logged = problems(server)
    assert "Traceback" not in server.stderr()
    # One line per closed connection at most, and fewer: they are rate-limited.
    assert 1 <= len(logged) <= 10, logged
    assert all("closed an idle connection to make room" in line for line in logged), logged


async def test_out_of_descriptors_is_one_line_and_the_server_recovers(tmp_path):
    # max_connections set past what 128 descriptors allow: accept itself runs out.
    serve = "max_connections = 1000\nheader_timeout = 2"
    with serving(tmp_path, serve, descriptors=128) as server:
        idle = [connect(server) for _ in range(200)]
        try:
            deadline = time.monotonic() + TIMEOUT
            while "out of descriptors" not in server.stderr():
                assert time.monotonic() < deadline, server.stderr()[-2000:]
                time.sleep(0.05)
        finally:
            for raw in idle:
                raw.close()
        # The idle ones closed (by us, or by their header timeout): it serves again.
        async with client_of(server.url) as client:
            task, _ = await send(client, "echo back again")
        assert task.artifacts[0].parts[0].text == "echo: back again (message 1)"
        logged = problems(server)
    assert "Traceback" not in server.stderr()
    assert logged[0].startswith("max_connections = 1000, but the descriptor limit"), logged
    exhausted = [line for line in logged if "out of descriptors" in line]
    assert 1 <= len(exhausted) <= 5, logged
    assert len(logged) <= 12, logged


# ------------------------------------------------------------------ how much at once


def test_requests_past_max_requests_get_503_and_the_server_goes_on(tmp_path):
    with serving(tmp_path, "max_requests = 2\nbody_timeout = 600") as server:
        held = [connect(server) for _ in range(2)]
        for raw in held:  # two requests in flight: their bodies are still coming
            raw.sendall(
                b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
        card = server.url + ".well-known/agent-card.json"
        deadline = time.monotonic() + TIMEOUT
        while (busy := httpx.get(card, timeout=TIMEOUT)).status_code != 503:
            assert time.monotonic() < deadline, "the third request was not refused"
        assert busy.headers["retry-after"] == "1"
        for raw in held:
            raw.close()
        while httpx.get(card, timeout=TIMEOUT).status_code != 200:
            assert time.monotonic() < deadline, "the server did not take requests again"
    assert "Traceback" not in server.stderr()


def test_large_bodies_past_max_large_bodies_wait_then_get_503(tmp_path):
    padding = " " * 90000  # over 64 KiB: a large body
    serve = "max_large_bodies = 1\nbody_timeout = 1"
    with serving(tmp_path, serve) as server, httpx.Client(timeout=TIMEOUT, headers=HEADERS) as http:

        def post(body: str) -> httpx.Response:
            return http.post(server.url, content=body.encode())

        with ThreadPoolExecutor(1) as pool:
            # A whole answer starts when the turn ends: the slot is held for 10 s.
            first = pool.submit(post, _rpc("SendMessage", _said(text="nap 10 a")) + padding)
            wait_for_a_session(tmp_path / "served.db")
            second = post(_rpc("GetTask", {"id": "x"}) + padding)
            small = post(_rpc("GetTask", {"id": "x"}))
            ended = first.result().json()["result"]["task"]["status"]["state"]
        third = post(_rpc("GetTask", {"id": "x"}) + padding)  # the slot is free again
    assert ended == "TASK_STATE_COMPLETED"
    assert second.status_code == 503
    assert second.headers["retry-after"] == "1"
    assert small.json()["error"]["code"] == third.json()["error"]["code"] == -32001  # not found


def wait_for_a_session(path: Path) -> None:
    async def sessions() -> int:
        store = SQLiteStore(path)
        try:
            return len(await store.sessions())
        finally:
            await store.aclose()

    deadline = time.monotonic() + TIMEOUT
    while not path.exists() or not anyio.run(sessions):
        assert time.monotonic() < deadline, "no session started"
        time.sleep(0.05)


def test_the_default_body_limit_is_4_mib(tmp_path):
    with serving(tmp_path) as server, connect(server) as raw:
        raw.sendall(
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {4 * 2**20 + 1}\r\n\r\n".encode()
        )
        said = closed_by_server(raw)
    assert said.startswith(b"HTTP/1.1 413 ")
    assert b"a request is at most 4 MiB" in said


# ------------------------------------------------------------------ malformed requests


def _rpc(method: str, params: object, request_id: object = 1) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def _said(role: str = "ROLE_USER", text: str = "echo hi", **extra: object) -> dict[str, object]:
    message = {"messageId": "m1", "role": role, "parts": [{"text": text}]}
    return {"message": {**message, **extra}}


DEEP = "[" * 5000 + "]" * 5000
#: JSON-RPC bodies and the error code each gets.
RPC_CASES = [
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\xff\xfe"}}', -32700),
    (('{"jsonrpc":"2.0","id":2,"method":"GetTask","params":' + DEEP + "}").encode(), -32700),
    (b'{"jsonrpc":"2.0",', -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":NaN}}', -32700),
    (b"[1, 2]", -32600),
    (b'"GetTask"', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}', -32600),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask","params":{"id":"x"}}', -32600),
    (b'{"jsonrpc":"2.0","id":true,"method":"GetTask","params":{"id":"x"}}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"},"extra":1}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":5}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600),
    (_rpc("SendMessage", _said("ROLE_AGENT")), -32602),
    (_rpc("SendStreamingMessage", _said("ROLE_AGENT")), -32602),
    (_rpc("SendMessage", _said("ROLE_UNSPECIFIED")), -32602),
    (_rpc("SendMessage", _said(parts=[])), -32602),
    (_rpc("SendMessage", _said(parts=[{"text": ""}])), -32602),
    (_rpc("SendMessage", {**_said(), "configuration": 5}), -32602),
    (_rpc("SendMessage", _said(parts=[{"data": json.loads("[" * 150 + "]" * 150)}])), -32602),
    (_rpc("GetTask", {"id": 5}), -32602),
    (_rpc("GetTask", ["x"]), -32602),
    (_rpc("NoSuchMethod", {}), -32601),
]
#: HTTP+JSON paths (under /rest) and bodies: each gets HTTP 400.
REST_CASES = [
    (
        "/message:send",
        b'{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"\xff"}]}}',
    ),
    ("/message:stream", b'{"message":{"messageId":"m1","role":"\xc3(","parts":[]}}'),
    ("/message:send", ('{"message":' + DEEP + "}").encode()),
    ("/message:send", b'{"message":'),
    ("/message:send", b"[1]"),
    ("/message:send", json.dumps(_said("ROLE_AGENT")).encode()),
    ("/message:stream", json.dumps(_said("ROLE_AGENT")).encode()),
    ("/message:send", json.dumps(_said(parts=[])).encode()),
]


def test_malformed_requests_get_the_error_the_spec_names_and_one_line_at_most(tmp_path):
    with serving(tmp_path) as server:
        with httpx.Client(timeout=TIMEOUT, headers=HEADERS) as http:
            rpc = [http.post(server.url, content=body) for body, _ in RPC_CASES]
            rest = [
                http.post(server.url + "rest" + path, content=body) for path, body in REST_CASES
            ]
        logged = problems(server)
    codes = [(answer.status_code, answer.json()["error"]["code"]) for answer in rpc]
    assert codes == [(200, code) for _, code in RPC_CASES]
    ids = [answer.json()["id"] for answer in rpc]
    assert ids[4:6] == [None, None]
    assert ids[-1] == 1  # a request's id when it has a valid one
    statuses = [(answer.status_code, answer.json()["error"]["status"]) for answer in rest]
    assert statuses == [(400, "INVALID_ARGUMENT")] * len(REST_CASES)
    said = [answer.json()["error"]["message"] for answer in rpc + rest]
    assert "the body is not UTF-8 (byte 59)" in said[0]
    assert "the JSON is nested too deep" in said[1]
    assert "role ROLE_USER, not ROLE_AGENT" in said[12]
    assert "Traceback" not in server.stderr()
    assert len(logged) <= len(RPC_CASES) + len(REST_CASES), logged
    assert not any("Internal" in line or "-32603" in line for line in logged), logged

    async def sessions() -> list[object]:
        store = SQLiteStore(tmp_path / "served.db")
        try:
            return list(await store.sessions())
        finally:
            await store.aclose()

    assert anyio.run(sessions) == []  # none of them started a conversation
