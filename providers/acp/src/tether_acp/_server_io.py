"""The wire of ``tether acp``: JSON-RPC messages, one per line, checked before the ACP SDK
sees them.

The SDK's own reader serves only well-behaved clients: a line that is JSON but not an object
(``[1]``, ``"x"``) stops it, ``null`` ends the connection as if the input had closed, a line it
cannot parse (bad JSON, invalid UTF-8) is logged and never answered, and a line of any length is
read into memory. :class:`LineGuard` is the :class:`acp.Transport` ``tether acp`` uses instead:

* a line is at most :data:`LINE_LIMIT` bytes (50 MiB, the newline not counted); a longer one is
  read past in chunks, never held whole;
* a line must be UTF-8 JSON (``NaN``, ``Infinity`` and numbers out of a double's range are not
  JSON) holding one JSON-RPC object;
* what fails is answered with a JSON-RPC error when it is a request whose id can be read (from
  the broken line too, as far as it is intact): ``-32700`` for a line that is not UTF-8 JSON,
  ``-32600`` for one that is not a valid request (too long, an array, a wrong ``jsonrpc`` or
  ``method``); a broken answer to one of the server's own requests fails that request; the rest
  (a broken notification, a line without a usable id) is logged on standard error and dropped;
* a notification the server does not take, or whose parameters are wrong, is dropped (logged),
  since there is nobody to answer;
* a blank line is skipped, and the last line counts even without a newline.

Whatever passes is a JSON-RPC request, notification or response that the SDK's dispatcher handles
without failing; unknown methods and wrong parameters of a request are answered by the SDK
(``-32601``, ``-32602``). The guard also counts the requests it hands on and the answers that go
out (:meth:`LineGuard.drain`), so that the server can answer what it started before it stops.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import anyio
from pydantic import BaseModel, ValidationError

__all__ = ("CHUNK", "END_GRACE", "LINE_LIMIT", "SALVAGE", "ByteSink", "ByteSource", "LineGuard")

log = logging.getLogger("tether.acp.server")

LINE_LIMIT = 50 * 1024 * 1024
"""The longest line read (bytes, its newline not counted): 50 MiB, the ACP SDK's buffer size."""

CHUNK = 256 * 1024
"""Bytes asked of the input per read."""

SALVAGE = 64 * 1024
"""Bytes of an over-long line kept to read its id from."""

END_GRACE = 10.0
"""Seconds the requests in progress when the input ends have to answer before the connection
closes (and cancels them)."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class ByteSource(Protocol):
    """Where lines come from: an :class:`asyncio.StreamReader`, or a file read in a thread."""

    async def read(self, n: int, /) -> bytes:
        """Up to ``n`` bytes; ``b""`` at the end of the input."""
        ...


class ByteSink(Protocol):
    """Where messages go: an :class:`asyncio.StreamWriter`."""

    def write(self, data: bytes, /) -> None:
        """Queue ``data`` (never blocks)."""
        ...

    async def drain(self) -> None:
        """Wait until the queue is small again; raises once the other end is gone."""
        ...


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
"""No id: the line has none, or it could not be read."""


@dataclass(frozen=True)
class _Overlong:
    """A line longer than the limit: its first bytes and its length."""

    prefix: bytes
    size: int


@dataclass(frozen=True)
class _Envelope:
    """What could be read of a line's JSON-RPC object before it broke."""

    id: object = _MISSING
    method: object = _MISSING
    answers: bool = False
    """It has a ``result`` or an ``error``: an answer to a request of the server."""


class _Reject(Exception):
    """A line that is not a message the connection can take."""

    def __init__(self, code: int, reason: str, *envelopes: _Envelope) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.envelopes = envelopes
        """What could be read of the message (of each message of a batch)."""


class LineGuard:
    """An :class:`acp.Transport` over a byte source and sink: one JSON-RPC message per line,
    checked (see the module docstring).

    ``notifications`` maps each notification method the server takes to the model of its
    parameters; any other notification is dropped. ``limit`` is the longest line in bytes.

    At the end of the input, ``on_end()`` is called (the server stops its turns) and the
    requests in progress get ``grace`` seconds to answer (their updates still go out) before
    :meth:`receive` reports the end to the connection, which then cancels what is left.
    """

    def __init__(
        self,
        source: ByteSource,
        sink: ByteSink,
        *,
        notifications: Mapping[str, type[BaseModel]],
        limit: int = LINE_LIMIT,
        on_end: Callable[[], None] | None = None,
        grace: float = END_GRACE,
    ) -> None:
        self._source = source
        self._sink = sink
        self._notifications = dict(notifications)
        self._limit = limit
        self._on_end = on_end
        self._grace = grace
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer known to hold no newline
        self._eof = False
        self._line = 0
        self._gone: str | None = None  # why the sink failed, once it did
        self._in_flight: Counter[str] = Counter()
        self._answered = anyio.Event()

    # ------------------------------------------------------------------ the Transport

    async def receive(self) -> dict[str, Any] | None:
        """The next message for the connection; ``None`` at the end of the input."""
        while True:
            line = await self._next_line()
            if line is None:
                await self._end()
                return None
            self._line += 1
            try:
                message = self._check(line)
            except _Reject as reject:
                message = await self._reject(reject)
            if message is None:
                continue
            if isinstance(message.get("method"), str) and "id" in message:
                self._in_flight[_key(message["id"])] += 1
            return message

    async def send(self, message: dict[str, Any]) -> None:
        """Write ``message`` as one line. Once the client's end is gone, messages are dropped
        (a request raises :class:`ConnectionError`: nobody will answer it)."""
        is_request = "method" in message and "id" in message
        if "method" not in message and "id" in message:
            self._count_answer(message["id"])
        if self._gone is None:
            data = _encode(message)
            try:
                self._sink.write(data)
                await self._sink.drain()
            except (OSError, RuntimeError) as exc:  # a closed pipe, a closed transport
                self._gone = f"{type(exc).__name__}: {exc}"
                log.warning("the client's end of the connection is closed (%s)", self._gone)
        if self._gone is not None and is_request:
            raise ConnectionError(f"the ACP client's end is closed ({self._gone})")

    async def close(self) -> None:
        """Nothing to release: the streams belong to whoever made them."""

    async def drain(self) -> None:
        """Wait until every request handed to the connection has been answered."""
        while self._in_flight:
            self._answered = anyio.Event()
            await self._answered.wait()

    async def _end(self) -> None:
        if self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            on_end()
        with anyio.move_on_after(self._grace):
            await self.drain()
        if self._in_flight:
            log.warning(
                "the input ended; %d request(s) still unanswered after %g s are cancelled",
                self._in_flight.total(),
                self._grace,
            )

    # ------------------------------------------------------------------ lines

    async def _read(self) -> bytes:
        try:
            return await self._source.read(CHUNK)
        except OSError as exc:
            log.warning("reading the input failed (%s); taken as its end", _short(exc))
            return b""

    async def _next_line(self) -> bytes | _Overlong | None:
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n", self._searched)
            if end >= 0:
                self._searched = 0
                if end > self._limit:
                    prefix = bytes(buffer[:SALVAGE])
                    del buffer[: end + 1]
                    return _Overlong(prefix, end)
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                return line
            self._searched = len(buffer)
            if len(buffer) > self._limit:
                return await self._skip_overlong()
            if self._eof:
                if not buffer:
                    return None
                line = bytes(buffer)  # the last line, without its newline
                buffer.clear()
                self._searched = 0
                return line
            chunk = await self._read()
            if chunk:
                buffer += chunk
            else:
                self._eof = True

    async def _skip_overlong(self) -> _Overlong:
        """Read past the rest of an over-long line, keeping only its first bytes."""
        buffer = self._buffer
        prefix, size = bytes(buffer[:SALVAGE]), len(buffer)
        buffer.clear()
        self._searched = 0
        while True:
            chunk = await self._read()
            if not chunk:
                self._eof = True
                return _Overlong(prefix, size)
            end = chunk.find(b"\n")
            if end >= 0:
                buffer += chunk[end + 1 :]
                return _Overlong(prefix, size + end)
            size += len(chunk)

    # ------------------------------------------------------------------ checks

    def _check(self, line: bytes | _Overlong) -> dict[str, Any] | None:
        """The message ``line`` holds; ``None`` for a blank line; raises :class:`_Reject`."""
        where = f"line {self._line}"
        if isinstance(line, _Overlong):
            text = line.prefix.decode("utf-8", "replace")
            raise _Reject(
                INVALID_REQUEST,
                f"{where} is {line.size} bytes long, over the limit of {self._limit} bytes; "
                "send less in one message (a resource link instead of the content)",
                _salvage(text),
            )
        if not line.strip():
            return None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Reject(
                PARSE_ERROR,
                f"{where} is not UTF-8 (byte 0x{line[exc.start]:02x} at offset {exc.start}); "
                "ACP messages are UTF-8 JSON",
                _salvage(line.decode("utf-8", "replace")),
            ) from None
        try:
            value: object = json.loads(text, parse_constant=_not_json, parse_float=_finite)
        except (ValueError, RecursionError) as exc:
            raise _Reject(
                PARSE_ERROR,
                f"{where} is not JSON ({_short(exc)}); send one JSON-RPC message per line",
                _salvage(text),
            ) from None
        if isinstance(value, list):
            raise _Reject(
                INVALID_REQUEST,
                f"{where} is a JSON-RPC batch (an array); ACP takes one message per line",
                *map(_envelope_of, cast("list[object]", value)),
            )
        if not isinstance(value, dict):
            raise _Reject(
                INVALID_REQUEST,
                f"{where} is JSON but not a JSON-RPC message (an object): {_shown(value)}",
            )
        # Parsed JSON: an object's keys are strings.
        return self._check_message(cast("dict[str, Any]", value), where)

    def _check_message(self, message: dict[str, Any], where: str) -> dict[str, Any] | None:
        envelope = _envelope_of(message)
        if "id" in message and not _valid_id(message["id"]):
            raise _Reject(
                INVALID_REQUEST,
                f"{where}: its id {_shown(message['id'])} is not a string or a number",
            )
        if message.get("jsonrpc", "2.0") != "2.0":
            raise _Reject(
                INVALID_REQUEST,
                f'{where}: "jsonrpc" must be "2.0", not {_shown(message["jsonrpc"])}',
                envelope,
            )
        method = message.get("method", _MISSING)
        if method is not _MISSING and not isinstance(method, str):
            raise _Reject(
                INVALID_REQUEST,
                f'{where}: "method" must be a string, not {_shown(method)}',
                envelope,
            )
        if isinstance(method, str):
            if "id" in message:
                return message  # a request: the dispatcher answers it, whatever it holds
            return self._check_notification(message, method, where)
        if "id" not in message:
            raise _Reject(
                INVALID_REQUEST,
                f"{where} is neither a request, a notification nor an answer "
                '(it has no "method" and no "id")',
            )
        error = message.get("error")
        if "result" not in message and not _valid_error(error):
            problem = "no result and no error" if error is None else "an invalid error"
            raise _Reject(
                INTERNAL_ERROR,
                f"{where}: the client's answer has {problem}",
                _Envelope(message["id"], _MISSING, True),
            )
        return message

    def _check_notification(
        self, message: dict[str, Any], method: str, where: str
    ) -> dict[str, Any] | None:
        model = self._notifications.get(method)
        if model is None:
            log.info("%s: notification %s is not one tether acp takes; dropped", where, method)
            return None
        try:
            model.model_validate(message.get("params"))
        except ValidationError as exc:
            log.warning(
                "%s: notification %s has invalid params (%s); dropped",
                where,
                method,
                _short(exc.errors(include_url=False, include_input=False)),
            )
            return None
        return message

    async def _reject(self, reject: _Reject) -> dict[str, Any] | None:
        """Answer or drop what ``reject`` is about. A request whose id could be read is
        answered with the error; an answer to one of the server's own requests that could not
        be read becomes an error answer, so that the request waiting for it fails."""
        error = {"code": reject.code, "message": reject.reason, "data": {"line": self._line}}
        answered = False
        failed: dict[str, Any] | None = None
        for envelope in reject.envelopes:
            if envelope.id is _MISSING or not _valid_id(envelope.id):
                continue
            if envelope.method is not _MISSING:  # a request, however malformed
                await self.send({"jsonrpc": "2.0", "id": envelope.id, "error": error})
                answered = True
            elif envelope.answers and envelope.method is _MISSING and failed is None:
                failed = {"jsonrpc": "2.0", "id": envelope.id, "error": error}
        if answered:
            log.warning("%s; answered with error %d", reject.reason, reject.code)
        elif failed is not None:
            log.warning("%s; the request it answers fails", reject.reason)
        else:
            log.warning("%s; dropped (no request id to answer)", reject.reason)
        return failed

    def _count_answer(self, request_id: object) -> None:
        key = _key(request_id)
        if self._in_flight[key] > 0:
            self._in_flight[key] -= 1
            if not self._in_flight[key]:
                del self._in_flight[key]
            if not self._in_flight:
                self._answered.set()


# ---------------------------------------------------------------------- helpers


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _valid_id(value: object) -> bool:
    """JSON-RPC ids are strings, numbers or null (booleans are not numbers here)."""
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def _valid_error(error: object) -> bool:
    if not isinstance(error, dict):
        return False
    fields = cast("dict[str, object]", error)  # parsed JSON: an object's keys are strings
    return isinstance(fields.get("code"), int) and isinstance(fields.get("message"), str)


def _key(request_id: object) -> str:
    """One key per id, whatever its type (``1`` and ``"1"`` differ)."""
    return json.dumps(request_id) if _valid_id(request_id) else repr(request_id)


def _salvage(text: str) -> _Envelope:
    """The top-level ``id``, ``method`` and whether it answers, read from the start of a JSON
    object until it breaks (an over-long line's prefix, a line that is not JSON)."""
    found: dict[str, object] = {}
    keys: set[str] = set()  # with a value or not: {"id": 1, "result": {"brok
    position = _skip_space(text, 0)
    if not text.startswith("{", position):
        return _Envelope()
    position += 1
    try:
        while True:
            key, position = _DECODER.raw_decode(text, _skip_space(text, position))
            position = _skip_space(text, position)
            if not isinstance(key, str) or not text.startswith(":", position):
                break
            keys.add(key)
            value, position = _DECODER.raw_decode(text, _skip_space(text, position + 1))
            found.setdefault(key, value)
            position = _skip_space(text, position)
            if not text.startswith(",", position):
                break
            position += 1
    except (ValueError, RecursionError):
        pass
    return _Envelope(
        found.get("id", _MISSING),
        found.get("method", _MISSING) if "method" not in keys or "method" in found else None,
        "result" in keys or "error" in keys,
    )


def _skip_space(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    return match.end() if match is not None else position


def _envelope_of(value: object) -> _Envelope:
    """The id, method and kind of a parsed message (anything else has none)."""
    if not isinstance(value, dict):
        return _Envelope()
    message = cast("dict[str, object]", value)  # parsed JSON: an object's keys are strings
    return _Envelope(
        message.get("id", _MISSING),
        message.get("method", _MISSING),
        "result" in message or "error" in message,
    )


def _shown(value: object) -> str:
    """A value in an error message: its JSON, cut short."""
    try:
        text = json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _short(problem: object) -> str:
    text = str(problem)
    return text if len(text) <= 300 else text[:297] + "..."


def _encode(message: dict[str, Any]) -> bytes:
    """``message`` as one line of ASCII JSON. Values JSON cannot hold become what it can:
    ``NaN`` and infinities ``null``, other objects their ``str()``; an answer that still
    cannot be written becomes an internal error."""
    try:
        text = json.dumps(message, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:
        try:
            text = json.dumps(_finite_only(message), separators=(",", ":"), default=str)
        except (ValueError, TypeError, RecursionError) as exc:
            if "method" in message or "id" not in message:
                raise
            error = {"code": INTERNAL_ERROR, "message": f"the answer is not JSON: {exc}"}
            text = json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
    return (text + "\n").encode("ascii")


def _finite_only(value: object) -> object:
    # An answer is any mapping, sequence or value a handler built.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_only(v) for k, v in cast("dict[object, object]", value).items()}
    if isinstance(value, list | tuple):
        return [_finite_only(v) for v in cast("list[object] | tuple[object, ...]", value)]
    return value
