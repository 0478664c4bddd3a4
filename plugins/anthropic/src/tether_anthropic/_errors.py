"""What a failure of the Messages API means for the turn loop: the SDK's exceptions as
:class:`tether.ModelError` (recoverable or not, how long the server asked to wait)."""

from __future__ import annotations

import json
import logging
from typing import cast

import anthropic
import httpx

from tether.errors import ErrorCode, ModelError
from tether.models import retry_after_seconds

__all__ = (
    "MAX_ERROR_CHARS",
    "OVERFLOW_REMEDY",
    "RETRYABLE_ERROR_TYPES",
    "RETRYABLE_STATUS",
    "error_from",
    "is_retryable",
    "retry_after",
)

logger = logging.getLogger("tether.anthropic")

#: Status codes worth a retry: timeouts, conflicts, rate limits, server trouble (every 5xx,
#: Anthropic's 529 "overloaded" included).
RETRYABLE_STATUS = frozenset({408, 409, 429})
#: Error types of an error the server sends inside a stream (after a 200) worth a retry.
RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
#: How much of the server's error message goes into the one-line error.
MAX_ERROR_CHARS = 300
#: How much of an error body the note on the error keeps.
MAX_BODY_NOTE_CHARS = 100_000
#: The longest wait a ``retry-after`` may ask for that is passed on as it is (an hour).

OVERFLOW_REMEDY = (
    'the request is longer than the model\'s context: an agent with compaction = "auto" '
    "compacts and asks again; otherwise compact the session (tether sessions compact ID), set "
    "context_window for the agent to what the model takes, or start a new session"
)
_OVERFLOW_WORDS = ("prompt is too long", "context window", "context length", "too many tokens")


def is_retryable(status: int) -> bool:
    """408, 409, 429 and every 5xx (529 included)."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def error_from(name: str, url: str, exc: Exception) -> ModelError:
    """The :class:`ModelError` for an exception of the SDK (or of httpx under it)."""
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: no answer from {url} in time",
            recoverable=True,
            remedy="raise [plugin.anthropic] read_timeout, or check the server",
        )
    if isinstance(exc, anthropic.APIConnectionError | httpx.HTTPError):
        cause = exc.__cause__ or exc
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: cannot reach {url} (or the answer broke off): {type(cause).__name__}: "
            f"{str(cause)[:MAX_ERROR_CHARS] or 'the connection failed'}",
            recoverable=True,
            remedy="check the base URL and that the server is running",
        )
    if isinstance(exc, anthropic.APIStatusError):
        return _status_error(name, url, exc)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: the answer from {url} is not a Messages API response: {exc.message}",
            remedy="check that the base URL points at an Anthropic Messages API",
        )
    return ModelError(
        ErrorCode.MODEL_REQUEST_FAILED,
        f"{name}: the request to {url} failed: {type(exc).__name__}: {str(exc)[:MAX_ERROR_CHARS]}",
        remedy="check the base URL and the API key",
    )


def _status_error(name: str, url: str, exc: anthropic.APIStatusError) -> ModelError:
    status = exc.status_code
    kind, text = _error_body(exc.body)
    if not text:
        text = exc.response.reason_phrase or "(no body)"
    text = " ".join(text.split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + f"... ({len(text)} characters; --debug shows the body)"
    code = ErrorCode.MODEL_REQUEST_FAILED
    remedy: str | None = None
    if status == 200:  # an ``error`` event inside a stream that had begun
        where = f"{name}: the server failed mid-stream"
        recoverable = kind in RETRYABLE_ERROR_TYPES
    else:
        where = f"{name}: HTTP {status} from {url}"
        recoverable = is_retryable(status)
    if not recoverable and any(words in text.lower() for words in _OVERFLOW_WORDS):
        code, remedy = ErrorCode.CONTEXT_WINDOW_EXCEEDED, OVERFLOW_REMEDY
    elif status in (401, 403, 404):
        remedy = "check the model name and the API key (ANTHROPIC_API_KEY)"
    elif status == 529 or kind == "overloaded_error":
        remedy = "the API is overloaded; try again in a few minutes"
    error = ModelError(
        code,
        f"{where}: {kind + ': ' if kind else ''}{text}",
        recoverable=recoverable,
        retry_after=retry_after(exc.response.headers) if recoverable else None,
        remedy=remedy,
    )
    body = _body_note(exc.body, exc.response)
    error.body = body
    error.add_note(f"response body ({status}):\n{body}")
    logger.debug("%s: HTTP %s body: %s", error.message, status, body)
    return error


def _error_body(body: object) -> tuple[str, str]:
    """``(error.type, error.message)`` of an Anthropic error body, ``""`` where missing."""
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return "", body
    if not isinstance(body, dict):
        return "", ""
    error = cast("dict[str, object]", body).get("error")
    if not isinstance(error, dict):
        return "", ""
    found = cast("dict[str, object]", error)
    kind, message = found.get("type"), found.get("message")
    return (kind if isinstance(kind, str) else ""), (message if isinstance(message, str) else "")


def _body_note(body: object, response: httpx.Response) -> str:
    if body is None:
        try:
            text = response.text
        except httpx.ResponseNotRead:
            text = ""
    elif isinstance(body, str):
        text = body
    else:
        text = json.dumps(body, indent=2, ensure_ascii=False, default=str)
    if len(text) > MAX_BODY_NOTE_CHARS:
        text = text[:MAX_BODY_NOTE_CHARS] + f"\n... ({len(text)} characters in all)"
    return text


def retry_after(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait (``tether.models.retry_after_seconds``)."""
    return retry_after_seconds(headers, now=now)
