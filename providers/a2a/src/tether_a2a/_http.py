"""How ``tether a2a serve`` holds under abuse: the parts of its HTTP server uvicorn lacks.

uvicorn does the keep-alive timeout (``timeout_keep_alive``), the header size limit
(``h11_max_incomplete_event_size``) and the listen backlog. What it lacks is here:

* :func:`protocol_class`, uvicorn's h11 protocol with a **header timeout** (a connection that
  sends no complete request headers within ``header_timeout`` of opening, or of its last
  answer, is closed), a **connection cap** (when full, the connection that has waited longest
  for its headers is closed to make room, as nginx reuses its idle connections; when none
  waits, the new one gets 503) and a **request cap per connection** (nginx's
  ``keepalive_requests``).
* :class:`Listener`, the listening socket, which survives **descriptor exhaustion**: when
  ``accept`` fails for want of descriptors it frees a spare one, accepts and closes what
  waits (its clients see the connection closed, as libuv does) and logs one line, rate-limited,
  instead of asyncio's traceback per attempt; :func:`quiet_accept_errors` turns asyncio's own
  report of it into such a line.
* :class:`Admission`, the **bound on requests handled at once** (uvicorn's
  ``limit_concurrency`` counts idle connections too, so idle connections would refuse real
  requests: the attack itself).
* :class:`BodyReader`, the **body**: read within ``body_timeout`` (408), cut off past
  ``max_body`` while it comes in (413), at most ``max_large_bodies`` bodies over
  :data:`LARGE_BODY` at once, and checked before the a2a-sdk sees it: a JSON-RPC body that
  is not UTF-8 JSON gets ``-32700``, one that is not a request ``-32600``, params that do not
  fit the method ``-32602``; an HTTP+JSON body that is not a UTF-8 JSON object gets HTTP 400.
  Each refusal is one log line (rate-limited), never a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import resource
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio

from ._settings import ServeSettings

__all__ = (
    "LARGE_BODY",
    "Admission",
    "BodyReader",
    "Limits",
    "Listener",
    "Notes",
    "Room",
    "protocol_class",
    "quiet_accept_errors",
    "refuse",
    "too_large",
)

log = logging.getLogger("tether.a2a.server")

#: A body over this many bytes is large: at most ``max_large_bodies`` of them at once
#: (uvicorn's own buffer per connection, past which it stops reading the socket).
LARGE_BODY = 64 * 2**10
#: The largest header block taken, in bytes (uvicorn's default, said here).
HEADER_LIMIT = 16 * 2**10
#: Seconds the rest of a refused body is read and dropped before the connection is closed
#: (nginx's ``lingering_timeout``): the client reads the answer instead of a reset.
LINGER = 5.0
#: The listen backlog (nginx's on Linux).
BACKLOG = 511
#: What ``accept`` fails with when the process (or the system) is out of descriptors.
_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: The JSON-RPC members of a request.
_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})


@dataclass(frozen=True)
class Limits:
    """What the server holds to, from ``[plugin.a2a.serve]`` and the descriptor limit."""

    max_body: int
    header_timeout: float
    body_timeout: float
    keep_alive: int
    keep_alive_requests: int
    max_connections: int
    max_requests: int
    max_large_bodies: int

    @classmethod
    def of(cls, settings: ServeSettings) -> Limits:
        """``settings``' limits; ``max_connections`` lowered to what ``ulimit -n`` allows
        (three quarters of it, less 16: the rest is for the store, models, children), unless
        the profile set it (then a warning says it may run out)."""
        connections = settings.max_connections
        allowed = descriptor_room()
        if allowed is not None and connections > allowed:
            if "max_connections" in settings.model_fields_set:
                log.warning(
                    "max_connections = %d, but the descriptor limit (ulimit -n) leaves room for"
                    " about %d: connections past that are closed as they come",
                    connections,
                    allowed,
                )
            else:
                connections = allowed
        return cls(
            max_body=settings.max_body,
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            keep_alive=settings.keep_alive,
            keep_alive_requests=settings.keep_alive_requests,
            max_connections=connections,
            max_requests=settings.max_requests,
            max_large_bodies=settings.max_large_bodies,
        )


def descriptor_room() -> int | None:
    """How many connections the descriptor limit leaves room for (``None``: no limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(1, soft * 3 // 4 - 16)


class Notes:
    """Log lines that may come in floods (refused requests, closed connections, descriptor
    exhaustion): each kind at most ``burst`` lines per ``every`` seconds; the next line after
    a quiet spell says how many were left out."""

    def __init__(self, every: float = 10.0, burst: int = 5) -> None:
        self.every, self.burst = every, burst
        self._kinds: dict[str, list[float]] = {}
        """Per kind: [window start, lines in it, lines left out]."""

    def warn(self, kind: str, message: str, *args: object) -> None:
        now = time.monotonic()
        window = self._kinds.setdefault(kind, [now, 0, 0])
        if now - window[0] >= self.every:
            window[0], window[1] = now, 0
        if window[1] >= self.burst:
            window[2] += 1
            return
        window[1] += 1
        left = int(window[2])
        window[2] = 0
        if left:
            message += f" ({left} more like it not logged)"
        log.warning(message, *args)


# -------------------------------------------------------------------- responses


async def refuse(
    send: Callable[[Any], Awaitable[None]],
    status: int,
    answer: Mapping[str, object],
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    close: bool = False,
) -> None:
    """Answer ``status`` with the JSON ``answer``; ``close``: and close the connection at once
    (else what remains of a body not read is read and dropped, for at most :data:`LINGER`
    seconds, so that the client reads the answer rather than a reset)."""
    body = json.dumps(answer).encode()
    extra = [(b"connection", b"close")] if close else []
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _client(scope: Mapping[str, Any]) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "a client"


# -------------------------------------------------------------------- admission


class Admission:
    """At most ``limits.max_requests`` requests handled at once; more get HTTP 503 with
    ``Retry-After``. A streamed answer counts until its stream ends."""

    def __init__(self, app: Any, limits: Limits, notes: Notes) -> None:
        self.app, self.limits, self.notes = app, limits, notes
        self.running = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.running >= self.limits.max_requests:
            self.notes.warn(
                "busy",
                "refused a request from %s: %d requests run (max_requests)",
                _client(scope),
                self.running,
            )
            answer = {"error": "the server is busy; try again in a moment"}
            await refuse(send, 503, answer, [(b"retry-after", b"1")])
            return
        self.running += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running -= 1


# -------------------------------------------------------------------- bodies


class BodyReader:
    """Reads a request's body before the app does: within ``body_timeout`` (else 408), at
    most ``max_body`` bytes (else 413), at most ``max_large_bodies`` bodies over
    :data:`LARGE_BODY` at once (a slot held until the answer starts); then checks it is what
    its binding takes (:func:`rpc_problem`, :func:`rest_problem`) and hands it on whole.

    ``rpc_path``: where JSON-RPC is served; ``methods``: its methods and their params'
    message types (the a2a-sdk's own table). Other POSTs are HTTP+JSON.
    """

    def __init__(
        self,
        app: Any,
        limits: Limits,
        notes: Notes,
        *,
        rpc_path: str,
        methods: Mapping[str, type[Any]],
        rest_error: Callable[[str], Mapping[str, object]],
    ) -> None:
        self.app, self.limits, self.notes = app, limits, notes
        self.rpc_path, self.methods, self.rest_error = rpc_path, methods, rest_error
        self.large = anyio.Semaphore(limits.max_large_bodies)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        length = _declared(scope)
        slot = length is None or length > LARGE_BODY
        body: bytes | None = None
        waiting = True
        try:
            with anyio.fail_after(self.limits.body_timeout):
                if slot:
                    await self.large.acquire()
                waiting = False
                body = await self._read(scope, receive, send)
        except TimeoutError:
            if slot and waiting:
                self.notes.warn(
                    "large", "refused a request from %s: large bodies wait", _client(scope)
                )
                answer = {"error": "the server is reading other large requests; try again"}
                await refuse(send, 503, answer, [(b"retry-after", b"1")])
                return
            self.notes.warn(
                "slow",
                "closed a request from %s: its body did not come within %gs (body_timeout)",
                _client(scope),
                self.limits.body_timeout,
            )
            answer = {"error": f"the request body did not come within {self.limits.body_timeout}s"}
            await refuse(send, 408, answer, close=True)  # slow: no lingering
            if slot and not waiting:
                self.large.release()
            return
        if body is None:  # refused, or the client left
            if slot:
                self.large.release()
            return
        held = slot

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self.large.release()

        async def started(message: Any) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            if await self._refused(scope, body, started):
                return
            await self.app(scope, _replay(body, receive), started)
        finally:
            release()

    async def _read(self, scope: Any, receive: Any, send: Any) -> bytes | None:
        """The whole body; ``None`` when it was refused (413) or the client left."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body:
                self.notes.warn(
                    "large",
                    "refused a request from %s: its body passed %d bytes (max_body)",
                    _client(scope),
                    self.limits.max_body,
                )
                await refuse(send, 413, too_large(self.limits.max_body))
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refused(self, scope: Any, body: bytes, send: Any) -> bool:
        """Answer the error ``body`` deserves, if any (one log line); whether it did."""
        if scope.get("path") == self.rpc_path:
            problem = rpc_problem(body, self.methods)
            if problem is None:
                return False
            code, message, request_id = problem
            self.notes.warn(
                "malformed", "refused a JSON-RPC request from %s: %s", _client(scope), message
            )
            error = {"code": code, "message": message}
            await refuse(send, 200, {"jsonrpc": "2.0", "id": request_id, "error": error})
            return True
        problem_text = rest_problem(body)
        if problem_text is None:
            return False
        self.notes.warn("malformed", "refused a request from %s: %s", _client(scope), problem_text)
        await refuse(send, 400, self.rest_error(problem_text))
        return True


def too_large(limit: int) -> dict[str, str]:
    shown = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"
    return {"error": f"a request is at most {shown}"}


def _declared(scope: Mapping[str, Any]) -> int | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"content-length" and value.isdigit():
            return int(value)
    return None


def _replay(body: bytes, receive: Any) -> Callable[[], Awaitable[Any]]:
    """A ``receive`` that gives ``body`` whole, then what the connection says next (its
    disconnect)."""
    given = False

    async def replayed() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _json(body: bytes) -> tuple[Any, str | None]:
    """``body`` as JSON, or why it is not (UTF-8, syntax, depth, NaN)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"the body is not UTF-8 (byte {exc.start})"
    try:
        return json.loads(text, parse_constant=_no_constants), None
    except RecursionError:
        return None, "the JSON is nested too deep"
    except ValueError as exc:  # JSONDecodeError, too many digits, NaN
        return None, f"the body is not JSON ({str(exc)[:200]})"


def rpc_problem(
    body: bytes, methods: Mapping[str, type[Any]]
) -> tuple[int, str, str | int | None] | None:
    """What is wrong with the JSON-RPC request ``body`` (code, message, the request's id),
    or ``None``: ``-32700`` not UTF-8 JSON, ``-32600`` not a request, ``-32602`` params that
    do not fit the method. A method that is not in ``methods`` is left to the SDK (-32601)."""
    from google.protobuf import json_format

    data, problem = _json(body)
    if problem is not None:
        return -32700, f"Parse error: {problem}", None
    if isinstance(data, list):
        return -32600, "Invalid Request: batch requests are not supported", None
    if not isinstance(data, dict):
        return -32600, "Invalid Request: a request is a JSON object", None
    request = cast("dict[str, Any]", data)  # JSON's keys are strings
    request_id = request.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        return -32600, "Invalid Request: id must be a string, an integer or null", None
    extra = sorted(set(request) - _MEMBERS)
    if extra:
        shown = ", ".join(json.dumps(key[:50]) for key in extra[:5])
        return -32600, f"Invalid Request: unknown members {shown}", request_id
    if request.get("jsonrpc") != "2.0":
        return -32600, 'Invalid Request: "jsonrpc" must be "2.0"', request_id
    method = request.get("method")
    if not isinstance(method, str) or not method or method.startswith("rpc."):
        return -32600, "Invalid Request: method must be a method name", request_id
    params = request.get("params")
    if params is not None and not isinstance(params, dict | list):
        return -32600, "Invalid Request: params must be an object", request_id
    model = methods.get(method)
    if model is None:
        return None
    if not isinstance(params, dict | None):
        return -32602, f"Invalid params: {method} takes an object", request_id
    given = cast("dict[str, Any]", params or {})
    try:
        json_format.ParseDict(given, model(), ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as exc:
        return -32602, f"Invalid params: {str(exc)[:300]}", request_id
    return None


def rest_problem(body: bytes) -> str | None:
    """What is wrong with the HTTP+JSON body ``body`` (not a UTF-8 JSON object), or
    ``None``; the SDK checks the rest (its own 400s)."""
    if not body.strip():
        return None  # a POST that names all it needs in its path (:cancel, :subscribe)
    data, problem = _json(body)
    if problem is None and not isinstance(data, dict):
        problem = "the body is not a JSON object"
    return problem


# -------------------------------------------------------------------- connections

#: What a connection gets when there is no room for it (and none waits to be closed instead).
_NO_ROOM = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"retry-after: 1\r\nconnection: close\r\ncontent-length: 59\r\n\r\n"
    b'{"error": "the server has no room for another connection"}\n'
)


class Room:
    """The connections open (accepted, whether or not uvicorn has them yet) and those waiting
    for a request's headers, oldest first: what :class:`Listener` and the protocol share."""

    def __init__(self, limits: Limits, notes: Notes) -> None:
        self.limits, self.notes = limits, notes
        self.open = 0
        """Accepted and not yet closed."""
        self.pending = 0
        """Accepted, and not yet handed to a protocol (asyncio does that a moment later)."""
        self.waiting: dict[Any, None] = {}

    @property
    def full(self) -> bool:
        return self.open >= self.limits.max_connections

    def make_room(self) -> bool:
        """Close the connection that has waited longest for its headers; whether there was
        one (it closes by the next turn of the event loop)."""
        oldest = next(iter(self.waiting), None)
        if oldest is None:
            return False
        self.notes.warn(
            "connections",
            "closed an idle connection to make room: %d are open (max_connections)",
            self.open,
        )
        oldest.drop()
        return True


class Listener(socket.socket):
    """The listening socket: it takes a connection only when there is room for it
    (:class:`Room`: else it closes the connection waiting longest for its headers, or answers
    the new one 503 and closes it), and survives descriptor exhaustion. When ``accept`` fails
    for want of descriptors, it frees its spare descriptor, accepts and closes the connections
    that wait (their clients see them closed at once, rather than hanging, as libuv does),
    takes the spare again and logs one line (rate-limited); asyncio then waits for the next
    connection as usual."""

    room: Room | None = None
    spare: int | None = None

    def hold(self, room: Room) -> None:
        """Count connections in ``room``, and keep a spare descriptor."""
        self.room = room
        self.spare = _open_spare()

    def accept(self) -> tuple[socket.socket, Any]:
        room = self.room
        if room is None:
            return super().accept()
        if room.full:
            if not room.make_room() and not room.pending:
                self._no_room(room)
            raise BlockingIOError(errno.EAGAIN, "no room for a new connection yet")
        try:
            accepted = super().accept()
        except OSError as exc:
            if exc.errno not in _EXHAUSTED or self.spare is None:
                raise
            problem = exc.strerror or str(exc)
        else:
            room.open += 1
            room.pending += 1
            return accepted
        closed = self._shed()
        room.notes.warn(
            "descriptors",
            "out of descriptors (%s): closed %d new connection(s); raise ulimit -n or lower"
            " max_connections",
            problem,
            closed,
        )
        raise BlockingIOError(errno.EAGAIN, "no descriptor for a new connection")

    def _no_room(self, room: Room) -> None:
        """Every connection is busy: the new one is told so and closed."""
        try:
            connection, _ = super().accept()
        except OSError:
            return
        with connection:
            connection.setblocking(False)
            with contextlib.suppress(OSError):
                connection.send(_NO_ROOM)
        room.notes.warn(
            "connections",
            "refused a connection: %d are open and none is idle (max_connections)",
            room.open,
        )

    def _shed(self) -> int:
        if self.spare is not None:
            os.close(self.spare)
            self.spare = None
        closed = 0
        try:
            while closed < BACKLOG:
                try:
                    connection, _ = super().accept()
                except OSError:
                    break  # none waits (or still none to spare)
                connection.close()
                closed += 1
        finally:
            self.spare = _open_spare()
        return closed

    def close(self) -> None:
        spare, self.spare = self.spare, None
        if spare is not None:
            os.close(spare)
        super().close()


def _open_spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def quiet_accept_errors(notes: Notes) -> Callable[[Any, dict[str, Any]], None]:
    """An asyncio exception handler: asyncio's report of an ``accept`` that failed for want of
    descriptors (a traceback per attempt, and it attempts once per waiting connection)
    becomes one rate-limited line; anything else goes to asyncio's default handler."""

    def handle(loop: Any, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            exc = context.get("exception")
            notes.warn(
                "descriptors",
                "out of descriptors (%s): new connections wait; raise ulimit -n or lower"
                " max_connections",
                getattr(exc, "strerror", None) or exc,
            )
            return
        loop.default_exception_handler(context)

    return handle


def protocol_class(room: Room) -> type[Any]:
    """uvicorn's h11 protocol with a header timeout, counted in ``room`` (which closes the
    connection waiting longest for its headers to make room), and a request cap per
    connection (see the module's docstring)."""
    import h11
    from uvicorn.protocols.http.flow_control import CLOSE_HEADER
    from uvicorn.protocols.http.h11_impl import H11Protocol

    limits, waiting = room.limits, room.waiting

    class Protocol(H11Protocol):
        _timer: Any = None
        _lingering = False
        _served = 0
        _cycle: Any = None

        def connection_made(self, transport: Any) -> None:  # pyright: ignore[reportIncompatibleMethodOverride]
            room.pending -= 1
            super().connection_made(transport)
            self._track()

        def _wait(self, seconds: float) -> None:
            self._stop_timer()
            self._timer = self.loop.call_later(seconds, self.drop)

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def drop(self) -> None:
            """Close the connection: it sent no request headers in time, makes room, or
            still sends a body that was refused."""
            waiting.pop(self, None)
            self._stop_timer()
            if not self.transport.is_closing():
                self.transport.close()

        def _track(self) -> None:
            """After the connection moved: wait for the next request's headers (at most
            ``header_timeout``), stop waiting once they came, or drop what remains of a
            body answered before it was read (for at most :data:`LINGER` seconds)."""
            ours, theirs = self.conn.our_state, self.conn.their_state
            if theirs is h11.IDLE:
                self._lingering = False
                if self not in waiting:
                    waiting[self] = None
                    self._wait(limits.header_timeout)
            elif theirs is h11.SEND_BODY and ours is h11.DONE:
                if not self._lingering:  # as nginx does, rather than reset the connection
                    self._lingering = True
                    self._wait(LINGER)
            elif self in waiting:
                waiting.pop(self, None)
                self._stop_timer()
            cycle: Any = self.cycle  # None until the first request
            if cycle is not None and cycle is not self._cycle:
                self._cycle = cycle
                self._served += 1
                if self._served >= limits.keep_alive_requests:
                    cycle.default_headers = [*cycle.default_headers, CLOSE_HEADER]

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._track()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._track()

        def connection_lost(self, exc: Exception | None) -> None:
            waiting.pop(self, None)
            self._stop_timer()
            room.open -= 1
            super().connection_lost(exc)

    return Protocol
