"""The two transports with a cap on what a server sends, read as it streams in.

A server's message is read up to ``max_message_bytes``; past that, nothing more of it is kept
(the rest is read and dropped as it comes, so a server writing 300 MB costs tether that cap,
not 300 MB). A message that is too large, or that is not a JSON-RPC message (``"result":
null``, a bad escape, not JSON at all), is turned into a JSON-RPC *error* for the request it
answers, at once, so the call fails with a tool error instead of waiting out its timeout:

- stdio (:func:`capped_stdio_client`): the server's standard output is split into lines by
  bytes, each line kept up to the cap. Which request a bad line answers is its ``id`` when the
  line's first 64 KiB or its end hold one (the Python SDK writes it first, the TypeScript SDK
  last), else the one request in flight when there is exactly one. A bad line that answers
  nothing we asked (a server's log line on standard output) is dropped, as the SDK does.
- streamable HTTP (:class:`CappedTransport`, under the SDK's ``httpx2`` client): a JSON
  response body is read up to the cap (decoded: a compressed body counts unpacked), and a
  body over it or not a JSON-RPC message becomes an error response to the POST's request.
  Server-sent events are capped per event by the SDK (``max_sse_event_size``).

The errors carry :data:`TOO_LARGE` or :data:`MALFORMED` as their code and say what was wrong;
``Connection`` words the tool error.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO, cast

import anyio
import anyio.abc
import httpx2
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.message import SessionMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

__all__ = (
    "MALFORMED",
    "TOO_LARGE",
    "CappedTransport",
    "capped_stdio_client",
    "describe_invalid",
)

log = logging.getLogger("tether.mcp")

#: The code of the error a message over ``max_message_bytes`` becomes (tether's own: JSON-RPC
#: leaves codes outside -32768..-32000 to the application).
TOO_LARGE = -31_001
#: The code of the error a message that is not JSON-RPC becomes.
MALFORMED = -31_002

#: How much of a bad line's start and end is searched for its ``id``.
_EDGE = 64 * 1024
#: Seconds a server has to exit after its standard input closes, then after SIGTERM.
_EXIT_GRACE = 2.0
_TOKEN = re.compile(
    rb'"(?:[^"\\]|\\.)*"|[{}\[\],:]|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null', re.DOTALL
)
_ID_AT_END = re.compile(
    rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,256}")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$'
)


def too_large_message(limit: int) -> str:
    return (
        f"its answer is larger than {limit:,} bytes (max_message_bytes); the rest of it was skipped"
    )


def describe_invalid(error: Exception) -> str:
    """One line saying why a message is not JSON-RPC (a pydantic error is many lines)."""
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        kind = first.get("type", "")
        if kind == "json_invalid":
            return f"it is not JSON ({first.get('msg', '')})"
        found = [e for e in error.errors() if e.get("loc", ())[:1] in (("JSONRPCResponse",),)]
        pick = found[0] if found else first
        where = ".".join(str(part) for part in pick.get("loc", ())[1:]) or "the message"
        return f"it is not a JSON-RPC message ({where}: {pick.get('msg', '')})"
    return f"it is not a JSON-RPC message ({type(error).__name__}: {error})"


def _refusal(request_id: int | str, code: int, message: str) -> SessionMessage:
    error = ErrorData(code=code, message=message)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


# ------------------------------------------------------------------------------ identifying


class _Pending:
    """The ids of our requests still waiting for an answer, as the transport saw them go."""

    def __init__(self) -> None:
        self.ids: dict[str, int | str] = {}

    def sent(self, message: object) -> None:
        if isinstance(message, JSONRPCRequest):
            self.ids[_key(message.id)] = message.id
        elif isinstance(message, JSONRPCNotification) and message.method.endswith("cancelled"):
            params = message.params or {}
            self.ids.pop(_key(params.get("requestId")), None)

    def answered(self, request_id: object) -> None:
        self.ids.pop(_key(request_id), None)

    def get(self, request_id: object) -> int | str | None:
        return self.ids.get(_key(request_id))

    def only(self) -> int | str | None:
        return next(iter(self.ids.values())) if len(self.ids) == 1 else None


def _key(request_id: object) -> str:
    return json.dumps(request_id)


class _Head:
    """What the start of a message says at its top level: its ``id``, whether it is a
    request (``method``) or an answer (``result``, ``error``)."""

    def __init__(self, data: bytes) -> None:
        self.id: object = None
        self.request = False
        self.answer = False
        depth = 0
        expect_key = False
        key: str | None = None
        for token in _TOKEN.finditer(data):
            text = token.group()
            if text in (b"{", b"["):
                if depth == 1 and key is not None:
                    key = None
                depth += 1
                expect_key = text == b"{" and depth == 1
            elif text in (b"}", b"]"):
                depth -= 1
                if depth <= 0:
                    return
            elif depth != 1:
                continue
            elif text == b",":
                expect_key = True
            elif text == b":":
                pass
            elif expect_key:
                try:
                    key = json.loads(text)
                except ValueError:
                    key = None
                expect_key = False
                if key == "method":
                    self.request = True
                elif key in ("result", "error"):
                    self.answer = True
            elif key == "id":
                with suppress(ValueError):
                    self.id = json.loads(text)
                key = None
                if self.request or self.answer:
                    return  # all that is asked of the head is known
            else:
                key = None


def _id_at_end(tail: bytes) -> object:
    found = _ID_AT_END.search(tail)
    if found is None:
        return None
    try:
        return json.loads(found[1])
    except ValueError:
        return None


def _answered(head: _Head, tail: bytes | None, pending: _Pending) -> int | str | None:
    """The request of ours a bad message answers, or None (we cannot tell, or it is not an
    answer to us). ``tail`` is None while the message is still coming in."""
    if head.request:
        return None
    if head.id is not None:
        return pending.get(head.id)
    if tail is not None and (found := pending.get(_id_at_end(tail))) is not None:
        return found
    if head.answer:
        return pending.only()
    return None


# ------------------------------------------------------------------------------ stdio


@asynccontextmanager
async def capped_stdio_client(
    server: StdioServerParameters, errlog: TextIO, *, max_bytes: int
) -> AsyncGenerator[tuple[Any, Any]]:
    """The SDK's stdio transport with a line cap: the server started in its own session
    (process group), its lines read as bytes up to ``max_bytes``, stopped as the SDK stops it
    (stdin closed, then SIGTERM, then SIGKILL to its whole group)."""
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        stderr=errlog,
        cwd=server.cwd,
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    pending = _Pending()

    async def deliver(item: SessionMessage | Exception) -> None:
        await read_writer.send(item)

    async def reader() -> None:
        """Reads until the server's stdout ends; once the session is gone, what the server
        still writes is read and dropped (a server blocked writing could not exit)."""
        assert process.stdout is not None
        lines = _Lines(max_bytes, pending, deliver)
        listening = True
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    if listening:
                        try:
                            await lines.feed(chunk)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            listening = False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # our own shutdown closed the pipe under the read

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    message = session_message.message
                    pending.sent(message)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await _stop(process)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            group.cancel_scope.cancel()


class _Lines:
    """Splits a server's standard output into messages, each kept up to ``limit`` bytes."""

    def __init__(
        self,
        limit: int,
        pending: _Pending,
        deliver: Callable[[SessionMessage | Exception], Any],
    ) -> None:
        self.limit = limit
        self.pending = pending
        self.deliver = deliver
        self.buffer = bytearray()
        self.skipping = False  # the line is over the cap: only its edges are kept
        self.head: _Head | None = None
        self.refused = False  # its request was answered with an error already
        self.tail = b""

    async def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if self.skipping:
                self.tail = (self.tail + piece)[-_EDGE:]
            else:
                self.buffer += piece
                if len(self.buffer) > self.limit:
                    await self._over()
            if end < 0:
                return
            await self._line_ended()
            start = end + 1

    async def _over(self) -> None:
        """The line passed the cap: keep its edges only; answer its request now if known."""
        self.skipping = True
        self.head = _Head(bytes(self.buffer[:_EDGE]))
        self.tail = bytes(self.buffer[-_EDGE:])
        self.buffer = bytearray()
        request = _answered(self.head, None, self.pending)
        if request is not None:
            self.refused = True
            await self._refuse(request, TOO_LARGE, too_large_message(self.limit))

    async def _line_ended(self) -> None:
        if self.skipping:
            head, tail, refused = self.head, self.tail, self.refused
            self.skipping, self.head, self.tail, self.refused = False, None, b"", False
            if refused or head is None:
                return
            request = _answered(head, tail, self.pending)
            if request is None:
                log.warning(
                    "an MCP server wrote a message of more than %s bytes that answers no "
                    "request of tether's; it was skipped",
                    f"{self.limit:,}",
                )
                return
            await self._refuse(request, TOO_LARGE, too_large_message(self.limit))
            return
        line = bytes(self.buffer)
        self.buffer = bytearray()
        if not line.strip():
            return
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            request = _answered(_Head(line[:_EDGE]), line[-_EDGE:], self.pending)
            if request is None:
                log.debug("an MCP server wrote a line that is not JSON-RPC: %s", line[:200])
                return
            await self._refuse(request, MALFORMED, describe_invalid(exc))
            return
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self.pending.answered(message.id)
        await self.deliver(SessionMessage(message))

    async def _refuse(self, request: int | str, code: int, message: str) -> None:
        self.pending.answered(request)
        await self.deliver(_refusal(request, code, message))


async def _stop(process: anyio.abc.Process) -> None:
    """Stop the server as the SDK does: close its stdin, wait, then SIGTERM and SIGKILL to
    its process group (its own children too). The reader drains its output meanwhile."""
    assert process.stdin is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for sent in (None, signal.SIGTERM, signal.SIGKILL):
        if sent is not None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sent)
        if await _exited(process, _EXIT_GRACE):
            break
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        assert process.stdout is not None
        await process.stdout.aclose()
    # Once the leader has exited, what is left of its group (a child that kept the pipes)
    # is ended too, as the SDK's tree kill does.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


async def _exited(process: anyio.abc.Process, within: float) -> bool:
    with anyio.move_on_after(within):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


# ------------------------------------------------------------------------------ HTTP


class CappedTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that reads a JSON response body up to ``limit`` bytes and
    answers for a server whose body is over it or not JSON-RPC (see the module)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").lower()
        if request.method != "POST" or not kind.startswith("application/json"):
            return response  # server-sent events are capped per event by the SDK
        response.request = request
        body = bytearray()
        over = False
        try:
            async for piece in response.aiter_bytes():  # decoded: a gzip bomb counts unpacked
                body += piece
                if len(body) > self._limit:
                    over = True
                    break
        finally:
            await response.aclose()
        request_id = _request_id(request)
        headers = [
            (key, value)
            for key, value in response.headers.multi_items()
            if key.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        status = response.status_code
        if request_id is not None and over:
            reply = _refusal(request_id, TOO_LARGE, too_large_message(self._limit))
            body, status = bytearray(_dump(reply)), 200
        elif request_id is not None and status < 400:
            try:
                jsonrpc_message_adapter.validate_json(bytes(body), by_name=False)
            except ValidationError as exc:
                reply = _refusal(request_id, MALFORMED, describe_invalid(exc))
                body = bytearray(_dump(reply))
        elif over:
            body = bytearray()
        return httpx2.Response(
            status, headers=headers, content=bytes(body), extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _request_id(request: httpx2.Request) -> int | str | None:
    try:
        sent = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if isinstance(sent, dict) and "method" in sent:
        found = cast(dict[str, object], sent).get("id")
        if isinstance(found, int | str) and not isinstance(found, bool):
            return found
    return None


def _dump(message: SessionMessage) -> bytes:
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
