"""What an HTTP error from a chat-completions server means for the turn loop."""

from __future__ import annotations

import errno
import json
import socket
import ssl

import httpx

from tether.models import retry_after_seconds

from ._json import json_object

__all__ = (
    "MAX_ERROR_CHARS",
    "RETRYABLE_STATUS",
    "body_note",
    "body_start",
    "dead_endpoint",
    "error_text",
    "is_context_overflow",
    "is_overflow_text",
    "is_retryable",
    "retry_after",
)

#: Status codes worth a retry: timeouts, conflicts, rate limits and server trouble.
RETRYABLE_STATUS = frozenset({408, 409, 429})
#: How much of the server's error message goes into the one-line error (the whole body is a
#: note on the error, shown with --debug, and logged at debug level).
MAX_ERROR_CHARS = 300
#: How much of an error body the note on the error keeps (a proxy may answer with megabytes).
MAX_BODY_NOTE_CHARS = 100_000
#: The longest wait a ``Retry-After`` may ask for that is passed on as it is (an hour).

_OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_OVERFLOW_WORDS = (
    "context length",
    "context_length",
    "context window",
    "context size",
    "maximum context",
    "too many tokens",
    "exceeds the context",
    "exceed the context",
    "prompt is too long",
    "input is too long",
    "longer than the model",
)


def is_retryable(status: int) -> bool:
    """408, 409, 429 and every 5xx."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def error_text(response: httpx.Response) -> str:
    """The server's ``error.message`` (or the start of the body), capped, on one line."""
    text = ""
    try:
        data: object = response.json()
    except (ValueError, UnicodeDecodeError):
        data = None
    body = json_object(data)
    if body is not None:
        error = body.get("error")
        details = json_object(error)
        if details is not None and details.get("message"):
            text = str(details["message"])
        elif isinstance(error, str):
            text = error
        elif isinstance(body.get("message"), str):
            text = str(body["message"])
    if not text:
        text = response.text.strip() or response.reason_phrase or "(no body)"
    text = " ".join(text.split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + f"... ({len(text)} characters; --debug shows the body)"
    return text


def is_context_overflow(response: httpx.Response) -> bool:
    """Whether a 400/413 says the prompt does not fit the model's context."""
    if response.status_code not in (400, 413, 422):
        return False
    try:
        data: object = response.json()
    except (ValueError, UnicodeDecodeError):
        data = None
    body = json_object(data)
    error = json_object(body.get("error")) if body is not None else None
    if error is not None and error.get("code") in _OVERFLOW_CODES:
        return True
    return is_overflow_text(response.text)


def is_overflow_text(text: str) -> bool:
    """Whether an error's text (a body, a streamed error chunk) says the request does not fit
    the model's context."""
    lowered = text.lower()
    return any(code in lowered for code in _OVERFLOW_CODES) or any(
        words in lowered for words in _OVERFLOW_WORDS
    )


def retry_after(response: httpx.Response, *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait (``tether.models.retry_after_seconds``)."""
    return retry_after_seconds(response.headers, now=now)


def body_note(response: httpx.Response) -> str:
    """The whole response body, for a note on the error (``--debug`` shows it)."""
    try:
        text = json.dumps(response.json(), indent=2, ensure_ascii=False)
    except (ValueError, UnicodeDecodeError):
        text = response.text
    if len(text) > MAX_BODY_NOTE_CHARS:
        text = text[:MAX_BODY_NOTE_CHARS] + f"\n... ({len(text)} characters in all)"
    return text


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, in order (``__cause__``, else ``__context__``), and the
    members of any exception group among them."""
    found: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if any(current is seen for seen in found) or len(found) > 20:
            continue
        found.append(current)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        following = current.__cause__ or current.__context__
        if following is not None:
            todo.append(following)
    return found


def dead_endpoint(exc: httpx.HTTPError, base_url: str) -> tuple[str, str] | None:
    """``(what, remedy)`` when ``exc`` says the endpoint cannot be reached at all, so that
    sending the request again soon cannot help: its host name does not resolve, nothing listens
    on its port, there is no route to it, or its TLS certificate is refused. ``None`` for other
    failures (a timeout, a dropped connection), which are worth a retry."""
    if not isinstance(exc, httpx.ConnectError):
        return None
    host = httpx.URL(base_url).host or base_url
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            reason = cause.strerror or str(cause)
            return (
                f"cannot resolve host {host} (from base_url {base_url}): {reason}",
                "check the host name in the base URL, and the network's DNS",
            )
        if isinstance(cause, ConnectionRefusedError):
            return (
                f"connection refused at {base_url}",
                "is the server running? Start it, or fix the host and port in the base URL",
            )
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"the TLS certificate of {host} is not trusted (from base_url {base_url}): "
                f"{cause.verify_message or cause}",
                "check the host name in the base URL (http:// for a local server that has no "
                "certificate)",
            )
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return (
                f"no route to {host} (from base_url {base_url}): {cause.strerror or cause}",
                "check the host in the base URL and the network",
            )
    return None


def body_start(response: httpx.Response, limit: int = 120) -> str:
    """What a response began with, on one line, for an error that says what came back."""
    try:
        text = response.text
    except (UnicodeDecodeError, LookupError, httpx.ResponseNotRead):
        return "(unreadable body)"
    text = " ".join(text.split())
    if not text:
        return "(an empty body)"
    return repr(text[:limit]) + ("..." if len(text) > limit else "")
