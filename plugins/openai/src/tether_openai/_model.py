"""The chat-completions model: tether requests to JSON and back, over httpx."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any, Literal, cast

import httpx

from tether.errors import ErrorCode, ModelError
from tether.models import ModelDelta, ModelRequest, ModelResponse

from ._defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_TOKENS, DEFAULT_READ_TIMEOUT
from ._errors import (
    body_note,
    error_text,
    is_context_overflow,
    is_overflow_text,
    is_retryable,
    retry_after,
)
from ._json import json_object
from ._stream import StreamAssembler
from ._text_calls import TextCallFormat
from ._wire import NotAChatCompletion, ToolCallContent, encode_messages, parse_response

__all__ = ("DEFAULT_MAX_TOKENS", "ChatCompletionsModel")

logger = logging.getLogger("tether.openai")


OVERFLOW_REMEDY = (
    'the request is longer than the model\'s context: an agent with compaction = "auto" '
    "compacts and asks again; otherwise compact the session (tether sessions compact ID), set "
    "context_window for the agent to what the server takes, or start a new session"
)


class ChatCompletionsModel:
    """A model behind ``POST {base_url}/chat/completions``.

    ``max_tokens`` caps every answer (the turn's remaining output budget lowers it; ``None``
    sends none). ``tool_call_content`` is how an assistant message that only calls tools
    carries its empty content (``"empty"``: ``""``; ``"null"``: JSON null). ``tool_choice``
    (``"auto"``, or ``None`` to leave it out) is sent when the request has tools.
    ``tool_calls_in_text`` parses calls a model wrote as text (``"json"`` or ``"xml"``).
    """

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_tokens: int | None = DEFAULT_MAX_TOKENS,
        tool_call_content: ToolCallContent = "empty",
        tool_choice: Literal["auto"] | None = "auto",
        tool_calls_in_text: TextCallFormat | None = None,
        images: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.accepts_images = images
        """Whether requests carry the images of tool results (as ``image_url`` parts)."""
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.max_tokens = max_tokens
        self.tool_call_content: ToolCallContent = tool_call_content
        self.tool_choice = tool_choice
        self.tool_calls_in_text: TextCallFormat | None = tool_calls_in_text
        if timeout is not None:  # one number for all four, as before
            connect_timeout = read_timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=transport,
        )

    @classmethod
    def from_endpoint(
        cls,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key_env: str | None,
        **options: Any,
    ) -> ChatCompletionsModel:
        """Read the key from ``api_key_env``; a missing key names the variable to set."""
        api_key = None
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise ModelError(
                    ErrorCode.MODEL_CONFIG_MISSING,
                    f"model {name} needs an API key in the environment variable {api_key_env}, "
                    "which is not set",
                    remedy=f"export {api_key_env}=... (or use the scripted model offline)",
                )
        return cls(name, model, base_url=base_url, api_key=api_key, **options)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request``."""
        messages = encode_messages(request, tool_call_content=self.tool_call_content)
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
            if self.tool_choice is not None:
                body["tool_choice"] = self.tool_choice
        limits = [n for n in (self.max_tokens, request.max_output_tokens) if n is not None]
        if limits:
            body["max_tokens"] = min(limits)
        return body

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one step; every failure is a ``MODEL_REQUEST_FAILED`` :class:`ModelError`.

        A request that times out or is cancelled has its connection closed before the error
        propagates (httpx drops a connection whose response was not read to the end), so a
        retry never runs alongside it.
        """
        try:
            response = await self._client.post(self.url, json=self.body(request))
        except httpx.TimeoutException as exc:
            phase = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: no answer from {self.url} in time ({type(exc).__name__})",
                recoverable=True,
                remedy=f"raise [plugin.openai] {phase}_timeout, or check the server",
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: cannot reach {self.url}: {type(exc).__name__}: "
                f"{str(exc)[:300] or 'the connection failed'}",
                recoverable=True,
                remedy="check the base URL and that the server is running",
            ) from exc
        if response.status_code != 200:
            raise self._http_error(response)
        return self._whole(response, request)

    def _whole(self, response: httpx.Response, request: ModelRequest) -> ModelResponse:
        """The answer of a response that holds one whole chat completion."""
        try:
            return parse_response(
                response.json(),
                text_calls=self.tool_calls_in_text,
                tool_names=[tool.name for tool in request.tools],
            )
        except (NotAChatCompletion, ValueError, UnicodeDecodeError) as exc:
            error = ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the response from {self.url} is not a chat completion: "
                f"{str(exc)[:300]}",
                remedy="check that the base URL points at an OpenAI-compatible API",
            )
            _attach_body(error, response)
            raise error from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Answer one step streamed (``stream: true``, usage in the last chunk): the text,
        reasoning and tool-call argument pieces as they arrive, then the answer, the same
        ``ModelResponse`` :meth:`request` gives. A stream cut before its end, or an error the
        server sends inside it, is a recoverable ``MODEL_REQUEST_FAILED`` (the step is sent
        again); failures before it starts are :meth:`request`'s."""
        body = self.body(request)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        assembler = StreamAssembler()
        # A server that ignores ``stream`` and answers one JSON completion is read whole.
        try:
            async with self._client.stream("POST", self.url, json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise self._http_error(response)
                media = response.headers.get("content-type", "").partition(";")[0].strip()
                if media.lower() == "application/json":
                    # A server that does not stream answers whole: one answer, no deltas.
                    await response.aread()
                    yield self._whole(response, request)
                    return
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue  # SSE comments, event names, keep-alives
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    for delta in assembler.feed(self._chunk(data)):
                        yield delta
        except httpx.TimeoutException as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} stalled ({type(exc).__name__})",
                recoverable=True,
                remedy="raise [plugin.openai] read_timeout, or check the server",
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} broke: {type(exc).__name__}: "
                f"{str(exc)[:300] or 'the connection failed'}",
                recoverable=True,
                remedy="check the server; the step is sent again",
            ) from exc
        if not assembler.finished:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} ended before the answer did",
                recoverable=True,
                remedy="check the server; the step is sent again",
            )
        try:
            yield parse_response(
                assembler.completion(),
                text_calls=self.tool_calls_in_text,
                tool_names=[tool.name for tool in request.tools],
            )
        except NotAChatCompletion as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} is not a chat completion: "
                f"{str(exc)[:300]}",
                remedy="check that the base URL points at an OpenAI-compatible API",
            ) from exc

    def _chunk(self, data: str) -> dict[str, Any]:
        """One ``data:`` line of the stream, as a chunk; an error object the server sent
        inside the stream is raised."""
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: a streamed chunk from {self.url} is not JSON: {data[:200]!r}",
                remedy="check that the base URL points at an OpenAI-compatible API",
            ) from exc
        if not isinstance(chunk, dict):
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: a streamed chunk from {self.url} is not an object: {data[:200]!r}",
                remedy="check that the base URL points at an OpenAI-compatible API",
            )
        found = cast("dict[str, Any]", chunk)
        error = found.get("error")
        if error is not None:
            found_error = json_object(error)
            detail = found_error.get("message") if found_error is not None else error
            if is_overflow_text(data):  # too long: sending it again cannot help
                raise ModelError(
                    ErrorCode.CONTEXT_WINDOW_EXCEEDED,
                    f"{self.name}: the server refused the request mid-stream: {str(detail)[:300]}",
                    remedy=OVERFLOW_REMEDY,
                )
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the server failed mid-stream: {str(detail)[:300]}",
                recoverable=True,
                remedy="the step is sent again; if it keeps failing, check the server",
            )
        return found

    def _http_error(self, response: httpx.Response) -> ModelError:
        status = response.status_code
        remedy = None
        code = ErrorCode.MODEL_REQUEST_FAILED
        if is_context_overflow(response):
            remedy = OVERFLOW_REMEDY
            code = ErrorCode.CONTEXT_WINDOW_EXCEEDED
        elif status in (401, 403, 404):
            remedy = "check the model name and the API key"
        recoverable = is_retryable(status)
        error = ModelError(
            code,
            f"{self.name}: HTTP {status} from {self.url}: {error_text(response)}",
            recoverable=recoverable,
            retry_after=retry_after(response) if recoverable else None,
            remedy=remedy,
        )
        _attach_body(error, response)
        return error

    async def probe(self) -> str:
        """Check that the endpoint answers ``GET {base_url}/models``; a line saying so.

        Raises ``MODEL_REQUEST_FAILED`` naming the URL and the reason when it does not.
        """
        url = self.base_url + "/models"
        try:
            response = await self._client.get(url)
        except httpx.HTTPError as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: cannot reach {url}: {type(exc).__name__}: "
                f"{str(exc)[:300] or 'no answer in time'}",
                remedy="check the base URL and that the server is running",
            ) from exc
        if response.status_code != 200:
            error = ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: HTTP {response.status_code} from {url}: {error_text(response)}",
                remedy="check the base URL and the API key",
            )
            _attach_body(error, response)
            raise error
        try:
            data: Any = response.json()
            listed = [str(item["id"]) for item in data["data"]]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the answer from {url} is not a model list ({exc!r:.200})",
                remedy="check that the base URL points at an OpenAI-compatible API "
                "(it usually ends in /v1)",
            ) from exc
        line = f"model {self.name}: {url} answers, {len(listed)} model(s) listed"
        if listed and self.model not in listed:
            line += f"; {self.model!r} is not among them ({', '.join(listed[:5])})"
        return line


def _attach_body(error: ModelError, response: httpx.Response) -> None:
    """Keep the whole body: as ``error.body``, as a note (``--debug`` prints it) and in the
    debug log."""
    body = body_note(response)
    error.body = body
    error.add_note(f"response body ({response.status_code}):\n{body}")
    logger.debug("%s: HTTP %s body: %s", error.message, response.status_code, body)
