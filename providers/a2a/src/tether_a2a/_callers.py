"""Who sends each A2A message to ``tether a2a serve`` (docs/callers.md, docs/a2a.md).

The server authenticates a request (a bearer token of ``tokens_env``, or the ``authenticator``
callable) and knows its caller by a *name*. That name becomes a :class:`tether.Caller`:
``a2a:NAME`` (vouched for by ``a2a``), with the display name and claims
``[plugin.a2a.serve] callers`` gives it. A new context's session records it as its initiator
and every message of a task runs with its sender's caller, so the served agent's dynamic
instructions, skill providers and declared subagents see who asks, and a caller gate may refuse
it: then the request is answered with HTTP 403 and a JSON-RPC (or HTTP+JSON) error whose
message is tether's one line, and nothing is written (no session, no task, no message).

A server without authentication knows nobody: its messages carry no caller.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast
from urllib.parse import quote

from a2a.utils.errors import A2AError, InvalidRequestError
from pydantic import ValidationError

from tether.agents import admit_caller
from tether.contracts import Admission, Caller, CallerGate
from tether.errors import CallerError, ErrorCode, TetherError

from ._settings import ServeSettings

__all__ = (
    "REFUSED_STATUS",
    "Callers",
    "admit_new",
    "caller_error",
    "caller_id",
    "refusal_answer",
)

#: The HTTP status of a request whose caller a gate refused (RFC 9110: authenticated, not
#: allowed).
REFUSED_STATUS = 403
#: The ``tetherCode`` a refusal's error carries in its ``ErrorInfo`` metadata.
_REFUSED = str(ErrorCode.CALLER_REFUSED)


def caller_id(name: str) -> str:
    """The caller id of the A2A caller ``name``: ``a2a:NAME``, with what a caller id may not
    hold (spaces, control characters) percent-encoded."""
    return "a2a:" + quote(name, safe="@:._-+~!$&'()*,;=/")


class Callers:
    """The callers a server knows: a name (what authenticated it) to its :class:`Caller`."""

    def __init__(self, settings: ServeSettings) -> None:
        self._known: dict[str, Caller] = {}
        for name, table in settings.callers.items():
            try:
                self._known[name] = Caller(
                    id=caller_id(name), name=table.name, via="a2a", claims=dict(table.claims)
                )
            except ValidationError as exc:
                raise _invalid(name, exc) from None

    def of(self, name: str) -> Caller | None:
        """The caller named ``name`` (``""``: nobody, a server without authentication)."""
        if not name:
            return None
        known = self._known.get(name)
        if known is not None:
            return known
        try:
            return Caller(id=caller_id(name), via="a2a")
        except ValidationError as exc:
            raise _invalid(name, exc) from None


def _invalid(name: str, exc: ValidationError) -> CallerError:
    problem = exc.errors()[0].get("msg", str(exc)) if exc.errors() else str(exc)
    return CallerError(
        ErrorCode.CALLER_INVALID,
        f"the A2A caller {json.dumps(name[:200])} cannot be a tether caller: {problem}",
        key="[plugin.a2a.serve] callers",
        remedy="name callers with at most 190 characters (a token's caller, or what the "
        "authenticator returns)",
    )


def admit_new(gates: Sequence[CallerGate], agent: str | None, caller: Caller | None) -> None:
    """Ask ``gates`` whether ``caller`` may start a session and send its first message, as
    the kernel asks them (``CALLER_REFUSED``, in its words), before the session is created:
    a caller admitted to start a session but not to send (a read-only one) leaves nothing
    behind either."""
    for kind in ("session", "followup"):
        admit_caller(gates, Admission("", agent, caller, kind))


def caller_error(exc: TetherError) -> A2AError | None:
    """The A2A error a caller's refusal (or an unreadable caller) is answered with:
    ``InvalidRequestError`` with tether's one-line message and ``tetherCode`` in its
    ``ErrorInfo`` metadata (:func:`refusal_answer` makes a refusal's status 403); ``None``
    for any other error."""
    if exc.code not in (ErrorCode.CALLER_REFUSED, ErrorCode.CALLER_INVALID):
        return None
    return InvalidRequestError(message=str(exc), data={"tetherCode": str(exc.code)})


def refusal_answer(send: Any) -> Any:
    """``send`` for an A2A answer in which a refused caller's error gets HTTP 403.

    The a2a-sdk answers every JSON-RPC error with HTTP 200, and an invalid request over
    HTTP+JSON with 400; a caller a gate refused is answered with 403 in both bindings (the
    JSON-RPC body unchanged; the HTTP+JSON body's ``error.code`` 403 and ``error.status``
    ``PERMISSION_DENIED``). JSON answers are held until whole (they are sent whole); streams
    pass as they come."""
    held: dict[str, Any] | None = None
    body: list[bytes] = []

    async def answer(message: Any) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and _is_json(message):
            held = message
            return
        if message["type"] == "http.response.body" and held is not None:
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            start, whole = _refused(held, b"".join(body))
            held = None
            await send(start)
            await send({"type": "http.response.body", "body": whole})
            return
        await send(message)

    return answer


def _is_json(start: Mapping[str, Any]) -> bool:
    for key, value in start.get("headers", ()):
        if key.lower() == b"content-type":
            return bytes(value).partition(b";")[0].strip().lower() == b"application/json"
    return False


def _refused(start: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bytes]:
    """``start`` and ``body``, with status 403 when the body is a caller's refusal."""
    if _REFUSED.encode() not in body:  # most answers: not parsed
        return start, body
    try:
        data: Any = json.loads(body)
        error = cast("dict[str, Any]", data["error"])
        details = cast("list[Any]", error.get("details") or error.get("data") or [])
    except (ValueError, KeyError, TypeError):
        return start, body
    codes = [
        cast("dict[str, Any]", cast("dict[str, Any]", d).get("metadata") or {}).get("tetherCode")
        for d in details
        if isinstance(d, dict)
    ]
    if _REFUSED not in codes:
        return start, body
    if "details" in error:  # HTTP+JSON (AIP-193): the body says its status too
        error["code"] = REFUSED_STATUS
        error["status"] = "PERMISSION_DENIED"
        body = json.dumps(data).encode()
    headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    return {**start, "status": REFUSED_STATUS, "headers": headers}, body
