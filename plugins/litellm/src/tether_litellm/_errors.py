"""What a failure through LiteLLM means for the turn loop: its exceptions (OpenAI's classes,
which it raises for every provider) as :class:`tether.ModelError`, recoverable or not, with
the wait the provider asked for."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Mapping

import httpx

from tether.errors import ErrorCode, ModelError
from tether.models import retry_after_seconds

from ._sdk import (
    APIConnectionError,
    ContextWindowExceededError,
    MidStreamFallbackError,
    Timeout,
)

__all__ = (
    "MAX_ERROR_CHARS",
    "OVERFLOW_REMEDY",
    "error_from",
    "is_retryable",
    "retry_after",
)

logger = logging.getLogger("tether.litellm")

#: How much of the provider's error message goes into the one-line error.
MAX_ERROR_CHARS = 300
#: How much of an error body the note on the error keeps.
MAX_BODY_NOTE_CHARS = 100_000
#: The longest wait a ``retry-after`` may ask for that is passed on as it is (an hour).

OVERFLOW_REMEDY = (
    'the request is longer than the model\'s context: an agent with compaction = "auto" '
    "compacts and asks again; otherwise compact the session (tether sessions compact ID), set "
    "context_window for the agent to what the model takes, or start a new session"
)
#: Exceptions under LiteLLM's that mean the provider was not reached (or the answer broke off).
_CONNECTION_ERRORS = frozenset(
    {
        "APIConnectionError",
        "ConnectError",
        "ConnectTimeout",
        "ClientConnectorError",
        "ClientConnectorDNSError",
        "ClientConnectionError",
        "ServerDisconnectedError",
        "EndpointConnectionError",
        "gaierror",
    }
)
#: Exceptions under LiteLLM's that mean credentials are missing on this side (no request sent).
_NO_CREDENTIALS = frozenset({"NoCredentialsError", "PartialCredentialsError"})
#: The prefixes LiteLLM puts before a message ("litellm.RateLimitError: RateLimitError: ").
_PREFIX = re.compile(r"^(?:litellm\.)?[A-Za-z]*(?:Error|Exception|Timeout): ")


def is_retryable(status: int) -> bool:
    """408, 409, 429 and every 5xx."""
    return status in (408, 409, 429) or 500 <= status <= 599


def error_from(name: str, where: str, exc: Exception) -> ModelError:
    """The :class:`ModelError` for an exception raised by ``litellm.acompletion`` (or by the
    stream it returned). ``where`` names what was asked: the API base, else the provider."""
    chain = list(_chain(exc))
    kinds = {type(link).__name__ for link in chain}
    text = _text(exc)
    if isinstance(exc, ContextWindowExceededError):
        return _with_body(
            ModelError(
                ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                f"{name}: {where} refused the request as too long: {text}",
                remedy=OVERFLOW_REMEDY,
            ),
            exc,
        )
    if kinds & _NO_CREDENTIALS or _missing_credentials(chain):
        return ModelError(
            ErrorCode.MODEL_CONFIG_MISSING,
            f"{name}: no credentials for {where}: {text}",
            remedy="set the variables LiteLLM documents for this provider (tether check "
            "--model names the ones it misses), or [plugin.litellm] api_key_env",
        )
    if "JSONDecodeError" in kinds:  # a 200 whose body is not JSON: an HTML page, say
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: the answer from {where} is not a chat completion: {text}",
            remedy="check the API base: it must point at the provider's API",
        )
    if isinstance(exc, Timeout):
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: no answer from {where} in time",
            recoverable=True,
            remedy="raise [plugin.litellm] timeout, or check the provider",
        )
    if isinstance(exc, MidStreamFallbackError):
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: the stream from {where} broke off: {text}",
            recoverable=True,
            remedy="the step is sent again; if it keeps failing, check the provider",
        )
    if isinstance(exc, APIConnectionError) or kinds & _CONNECTION_ERRORS:
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: cannot reach {where}: {text}",
            recoverable=True,
            remedy="check the API base and that the provider is reachable",
        )
    status = _status(exc)
    if status is None:
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{name}: the request to {where} failed: {type(exc).__name__}: {text}",
            remedy="check the model name, the API base and the credentials",
        )
    recoverable = is_retryable(status)
    remedy: str | None = None
    if status in (401, 403):
        remedy = "check the credentials (the provider's variables LiteLLM reads, or api_key_env)"
    elif status == 404:
        remedy = "check the model name (LiteLLM's PROVIDER/MODEL) and the API base"
    elif status == 400:
        remedy = "check the model name and [plugin.litellm] params"
    headers = _headers(exc)
    error = ModelError(
        ErrorCode.MODEL_REQUEST_FAILED,
        f"{name}: HTTP {status} from {where}: {text}",
        recoverable=recoverable,
        retry_after=retry_after(headers) if recoverable and headers is not None else None,
        remedy=remedy,
    )
    return _with_body(error, exc)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _missing_credentials(chain: list[BaseException]) -> bool:
    """The OpenAI client (under LiteLLM's OpenAI-shaped routes) refusing to send without a
    key: a bare ``openai.OpenAIError``, which LiteLLM reports as a 500."""
    return any(
        type(link).__name__ == "OpenAIError"
        and type(link).__module__.startswith("openai")
        and "credentials" in str(link).lower()
        for link in chain
    )


def _text(exc: Exception) -> str:
    """LiteLLM's message without the class names it puts in front, on one line, cut."""
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    while (match := _PREFIX.match(text)) is not None:
        text = text[match.end() :]
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + f"... ({len(text)} characters; --debug shows the body)"
    return text or type(exc).__name__


def _status(exc: Exception) -> int | None:
    """The HTTP status the provider answered with (the response's, where LiteLLM kept it:
    it reports some 5xx that mention a rate limit as 429), else LiteLLM's."""
    response = getattr(exc, "response", None)
    if isinstance(response, httpx.Response) and response.status_code >= 400:
        return response.status_code
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def _headers(exc: Exception) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    if isinstance(response, httpx.Response):
        return response.headers
    headers = getattr(exc, "litellm_response_headers", None)
    if isinstance(headers, httpx.Headers):
        return headers
    return None


def _with_body(error: ModelError, exc: Exception) -> ModelError:
    """Keep what the provider answered: as ``error.body``, as a note (``--debug`` prints it)
    and in the debug log."""
    response = getattr(exc, "response", None)
    body: object = getattr(exc, "body", None)
    text = ""
    if isinstance(body, (dict, list)):
        text = json.dumps(body, indent=2, ensure_ascii=False, default=str)
    elif isinstance(body, str):
        text = body
    elif isinstance(response, httpx.Response):
        try:
            text = response.text
        except (httpx.ResponseNotRead, UnicodeDecodeError):
            text = ""
    if not text:
        return error
    if len(text) > MAX_BODY_NOTE_CHARS:
        text = text[:MAX_BODY_NOTE_CHARS] + f"\n... ({len(text)} characters in all)"
    error.body = text
    error.add_note(f"response body:\n{text}")
    logger.debug("%s: body: %s", error.message, text)
    return error


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait (``tether.models.retry_after_seconds``)."""
    return retry_after_seconds(headers, now=now)
