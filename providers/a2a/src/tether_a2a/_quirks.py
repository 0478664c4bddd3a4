"""What tether's A2A client forgives the agents it talks to, before the a2a-sdk parses their
answers.

The a2a-sdk reads an answer with protobuf's JSON parser, which takes a timestamp only as
RFC 3339 with a zone (``...Z`` or ``+02:00``). pydantic-ai's fasta2a writes its task
timestamps as Python's ``datetime.now().isoformat()``: no zone, so every answer of a fasta2a
agent failed to parse. :class:`Forgiving`, the HTTP transport of the A2A client, mends such
answers (a JSON body, or each event of a stream) before the SDK sees them:

* a ``timestamp`` of the protocol's objects (a task's or an update's ``status``, a message's)
  without a zone is read as UTC (``Z`` appended): the spec's timestamps are UTC, and the
  timestamp is not used by tether (only parsed);
* a part's ``data`` and any ``metadata`` are the agent's own and left as they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx

__all__ = ("Forgiving", "mend")

#: An ISO 8601 date and time without a zone (what RFC 3339 requires).
_ZONELESS = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?")
#: What is the agent's own, not the protocol's.
_APPLICATION = frozenset({"data", "metadata"})


def mend(value: Any) -> tuple[Any, bool]:
    """``value`` with its zoneless ``timestamp`` members read as UTC; whether any was."""
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for key, item in cast("dict[str, Any]", value).items():
            if key in _APPLICATION:
                out[key] = item
            elif key == "timestamp" and isinstance(item, str) and _ZONELESS.fullmatch(item):
                out[key] = item[:10] + "T" + item[11:] + "Z"
                changed = True
            else:
                out[key], inner = mend(item)
                changed = changed or inner
        return out, changed
    if isinstance(value, list):
        items = [mend(item) for item in cast("list[Any]", value)]
        return [item for item, _ in items], any(changed for _, changed in items)
    return value, False


def _mend_json(body: bytes) -> bytes:
    try:
        data = json.loads(body)
    except ValueError:
        return body  # the SDK says what is wrong with it
    mended, changed = mend(data)
    return json.dumps(mended).encode() if changed else body


async def _mend_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """An event stream, each ``data:`` line mended (lines are put back together first)."""
    pending = b""
    async for chunk in chunks:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if lines:
            yield b"\n".join(_mend_line(line) for line in lines) + b"\n"
    if pending:
        yield _mend_line(pending)


def _mend_line(line: bytes) -> bytes:
    if line.startswith(b"data:"):
        end = b"\r" if line.endswith(b"\r") else b""
        text = line[len(b"data:") :].removesuffix(b"\r")
        return b"data: " + _mend_json(text.strip()) + end
    return line


class _Events(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in _mend_events(self.response.aiter_raw()):
            yield chunk

    async def aclose(self) -> None:
        await self.response.aclose()


class Forgiving(httpx.AsyncBaseTransport):
    """An HTTP transport that mends A2A answers (see the module) on their way in."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media == "text/event-stream":
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=_Events(response),
                extensions=response.extensions,
            )
        if media.endswith("json"):  # application/json, application/a2a+json
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            mended = _mend_json(body)
            headers = httpx.Headers(response.headers)
            headers.pop("content-encoding", None)  # aread() decoded it
            headers["content-length"] = str(len(mended))
            return httpx.Response(
                response.status_code,
                headers=headers,
                content=mended,
                extensions=response.extensions,
            )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()
