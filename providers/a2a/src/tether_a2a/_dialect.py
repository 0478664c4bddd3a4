"""The A2A dialect of pydantic-ai's ``fasta2a`` client, served next to A2A 1.0 and 0.3.

``fasta2a`` (2.x, the client of pydantic-ai's A2A agents) sends A2A 0.3's method names
(``message/send``, ``message/stream``) with A2A 1.0's objects (a wrapped result,
``{"task": {...}}``; parts without ``kind``) and 0.3's enum values (``user``, ``completed``).
Neither binding reads that: the a2a-sdk's 0.3 layer answers a bare 0.3 task, which fasta2a's
client reads as an empty result.

Such a request is told apart by its message: A2A 0.3 requires ``kind: "message"`` on it (its
``Message`` schema), fasta2a's has none. :class:`Fasta2aDialect` rewrites it as the 1.0 request
it means (``SendMessage``/``SendStreamingMessage``, ``ROLE_*`` enums, ``A2A-Version: 1.0``) and
its answer, JSON or an event stream, back to fasta2a's enum values (fasta2a's own
``jsonrpc_v1`` module does the same between its server and 1.0 clients). ``tasks/get`` and
``tasks/cancel`` need nothing: the 0.3 task they answer is one fasta2a's client reads.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

__all__ = ("Fasta2aDialect", "from_fasta2a", "to_fasta2a")

#: fasta2a's method names, and the 1.0 method each means.
_METHODS = {"message/send": "SendMessage", "message/stream": "SendStreamingMessage"}
#: A2A 0.3's JSON-RPC methods (the a2a-sdk's 0.3 layer serves them).
_V03 = frozenset(
    {
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "agent/getAuthenticatedExtendedCard",
    }
)
#: The id a request whose id is null goes on with.
_NULL_ID = "tether-null-id"
_ROLES = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_STATES = {
    state: "TASK_STATE_" + state.upper().replace("-", "_")
    for state in (
        "submitted",
        "working",
        "input-required",
        "completed",
        "canceled",
        "failed",
        "rejected",
        "auth-required",
    )
}
_ROLES_BACK = {v: k for k, v in _ROLES.items()}
_STATES_BACK = {v: k for k, v in _STATES.items()}
#: A part's ``data`` and ``metadata`` are the application's: their ``role``/``state`` keys are
#: values, left as they are.
_APPLICATION = frozenset({"data", "metadata"})


def _enums(value: Any, roles: dict[str, str], states: dict[str, str]) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in cast("dict[str, Any]", value).items():
            if key in _APPLICATION:
                out[key] = item
            elif key == "role" and isinstance(item, str):
                out[key] = roles.get(item, item)
            elif key == "state" and isinstance(item, str):
                out[key] = states.get(item, item)
            else:
                out[key] = _enums(item, roles, states)
        return out
    if isinstance(value, list):
        return [_enums(item, roles, states) for item in cast("list[Any]", value)]
    return value


def from_fasta2a(request: Any) -> dict[str, Any] | None:
    """The A2A 1.0 request a fasta2a request means, or ``None`` when ``request`` is not one
    (another method, or a message with A2A 0.3's ``kind``)."""
    if not isinstance(request, dict):
        return None
    envelope = cast("dict[str, Any]", request)
    method = envelope.get("method")
    params = envelope.get("params")
    if not isinstance(method, str) or method not in _METHODS or not isinstance(params, dict):
        return None
    message = cast("dict[str, Any]", params).get("message")
    if not isinstance(message, dict) or "kind" in message:
        return None
    return {**envelope, "method": _METHODS[method], "params": _enums(params, _ROLES, _STATES)}


def to_fasta2a(answer: bytes, *, enums: bool = True, null_id: bool = False) -> bytes:
    """A JSON-RPC answer with its result's enums as fasta2a reads them (``enums``), and its
    id ``null`` (``null_id``: the request's was)."""
    try:
        data: Any = json.loads(answer)
    except ValueError:
        return answer
    if isinstance(data, dict):
        envelope = cast("dict[str, Any]", data)
        if enums and "result" in envelope:
            envelope = {
                **envelope,
                "result": _enums(envelope["result"], _ROLES_BACK, _STATES_BACK),
            }
        if null_id:
            envelope = {**envelope, "id": None}
        data = envelope
    return json.dumps(data, separators=(",", ":")).encode()


Send = Callable[[Any], Awaitable[None]]


class Fasta2aDialect:
    """An ASGI layer in front of the JSON-RPC route at ``rpc_path``: a fasta2a request goes on
    as the 1.0 request it means, and its answer comes back in fasta2a's values."""

    def __init__(self, app: Any, *, rpc_path: str) -> None:
        self.app, self.rpc_path = app, rpc_path

    async def __call__(self, scope: Any, receive: Any, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") != self.rpc_path
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(b"".join(chunks), receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            data: Any = json.loads(body)
        except ValueError:
            data = None
        meant = from_fasta2a(data)
        # JSON-RPC 2.0 allows a request id of null (fasta2a's tasks/get sends one); the
        # a2a-sdk's 0.3 layer refuses it: the request goes on with an id of its own, and the
        # answer's id is null again.
        null_id = (
            isinstance(data, dict)
            and cast("dict[str, Any]", data).get("method") in _V03
            and "id" in data
            and cast("dict[str, Any]", data)["id"] is None
        )
        if meant is None and not null_id:
            await self.app(scope, _replay(body, receive), send)
            return
        request = meant if meant is not None else dict(cast("dict[str, Any]", data))
        if null_id:
            request["id"] = _NULL_ID
        body = json.dumps(request).encode()
        headers = [
            (key, value)
            for key, value in scope.get("headers", ())
            if key.lower() not in (b"content-length", b"a2a-version")
        ]
        headers.append((b"content-length", str(len(body)).encode()))
        if meant is not None:
            headers.append((b"a2a-version", b"1.0"))
        answer = _Answer(send, enums=meant is not None, null_id=null_id)
        await self.app({**scope, "headers": headers}, _replay(body, receive), answer)


class _Answer:
    """``send`` with the answer's JSON (whole, or each event of a stream) in fasta2a's
    values."""

    def __init__(self, send: Send, *, enums: bool, null_id: bool) -> None:
        self.send = send
        self.enums, self.null_id = enums, null_id
        self.stream = False
        self.start: dict[str, Any] | None = None
        self.body: list[bytes] = []
        self.pending = b""

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            media = next((v for k, v in headers if k.lower() == b"content-type"), b"")
            self.stream = media.startswith(b"text/event-stream")
            if self.stream:
                await self.send(message)
            else:  # the length changes: sent with the body
                self.start = {**message, "headers": headers}
            return
        if message["type"] != "http.response.body":
            await self.send(message)
            return
        more = message.get("more_body", False)
        chunk: bytes = message.get("body", b"")
        if self.stream:
            lines = (self.pending + chunk).split(b"\n")
            self.pending = b"" if not more else lines.pop()
            out = b"\n".join(
                b"data: " + self._fix(line[len(b"data: ") :])
                if line.startswith(b"data: ")
                else line
                for line in lines
            )
            await self.send({**message, "body": out + (b"\n" if more and lines else b"")})
            return
        self.body.append(chunk)
        if more:
            return
        body = self._fix(b"".join(self.body))
        start = self.start or {"type": "http.response.start", "status": 200, "headers": []}
        start["headers"] = [
            (k, v) for k, v in start["headers"] if k.lower() != b"content-length"
        ] + [(b"content-length", str(len(body)).encode())]
        await self.send(start)
        await self.send({"type": "http.response.body", "body": body})

    def _fix(self, answer: bytes) -> bytes:
        return to_fasta2a(answer, enums=self.enums, null_id=self.null_id)


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[Any]]:
    given = False

    async def replayed() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
