"""The chat-completions model: tether requests to JSON and back, over httpx."""

from __future__ import annotations

import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

import anyio
import httpx

from tether.errors import ErrorCode, ModelError
from tether.models import ModelDelta, ModelRequest, ModelResponse

from ._defaults import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_DEADLINE,
    DEFAULT_MAX_TOKENS,
    DEFAULT_READ_TIMEOUT,
    DEFAULT_STREAM_DEADLINE,
)
from ._errors import (
    body_note,
    body_start,
    dead_endpoint,
    error_text,
    is_context_overflow,
    is_overflow_text,
    is_retryable,
    retry_after,
)
from ._json import json_object
from ._stream import StreamAssembler
from ._text_calls import TextCallFormat, skill_names
from ._wire import NotAChatCompletion, ToolCallContent, encode_messages, parse_response

__all__ = ("DEFAULT_MAX_TOKENS", "ChatCompletionsModel")

logger = logging.getLogger("tether.openai")


OVERFLOW_REMEDY = (
    'the request is longer than the model\'s context: an agent with compaction = "auto" '
    "compacts and asks again; otherwise compact the session (tether sessions compact ID), set "
    "context_window for the agent to what the server takes, or start a new session"
)
#: A 200 answer that is not what the API gives: the base URL is most likely wrong.
NOT_THE_API_REMEDY = (
    "check the base URL ({base_url}): does it end with /v1? It must be the root of an "
    "OpenAI-compatible API, to which /chat/completions is appended (e.g. "
    "http://localhost:11434/v1)"
)
#: How many steps' first attempts a model remembers (steps whose retries the turn loop gave up
#: on are forgotten, oldest first).
MAX_TRACKED_REQUESTS = 64

T = TypeVar("T")


@dataclass
class _Attempts:
    """The attempts at one step's request, and when they must end."""

    request: ModelRequest
    until: float
    """``time.monotonic()`` past which no attempt may run."""
    limit: float
    """The deadline, in seconds from the first attempt."""
    count: int = 0


class ChatCompletionsModel:
    """A model behind ``POST {base_url}/chat/completions``.

    ``max_tokens`` caps every answer (the turn's remaining output budget lowers it; ``None``
    sends none). ``tool_call_content`` is how an assistant message that only calls tools
    carries its empty content (``"empty"``: ``""``; ``"null"``: JSON null). ``tool_choice``
    (``"auto"``, or ``None`` to leave it out) is sent when the request has tools.
    ``tool_calls_in_text`` parses calls a model wrote as text (``"json"`` or ``"xml"``).
    ``deadline`` and ``stream_deadline`` bound the attempts at one step's request, in seconds
    from the first (the turn loop's retries send the same request again).
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
        deadline: float = DEFAULT_DEADLINE,
        stream_deadline: float = DEFAULT_STREAM_DEADLINE,
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
        self.deadline = deadline
        """Seconds one step's request may take, retries included (answers not streamed)."""
        self.stream_deadline = stream_deadline
        """The same for a streamed answer."""
        self._attempts: OrderedDict[int, _Attempts] = OrderedDict()
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
        api_key_required: bool = True,
        **options: Any,
    ) -> ChatCompletionsModel:
        """Read the key from ``api_key_env``; a missing key names the variable to set (unless
        ``api_key_required`` is false: then no key is sent)."""
        api_key = None
        if api_key_env is not None:
            api_key = os.environ.get(api_key_env) or None
            if not api_key and api_key_required:
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
        retry never runs alongside it. The attempts at one step (the turn loop sends the same
        request again after a recoverable failure) end within ``deadline`` seconds of the
        first: past it, the error is no longer recoverable.
        """
        attempts = self._begin(request, self.deadline)
        try:
            body = self.body(request)
            try:
                response = await self._within(
                    attempts, lambda: self._client.post(self.url, json=body)
                )
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, streamed=False) from exc
            if response.status_code != 200:
                raise self._http_error(response)
            answer = self._whole(response, request)
        except ModelError as exc:
            settled = self._settle(request, attempts, exc)
            if settled is exc:
                raise
            raise settled from exc
        self._attempts.pop(id(request), None)
        return answer

    def _whole(self, response: httpx.Response, request: ModelRequest) -> ModelResponse:
        """The answer of a response that holds one whole chat completion."""
        try:
            data: object = response.json()
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._not_a_completion(response, "it is not JSON") from exc
        try:
            return self._parse(data, request)
        except NotAChatCompletion as exc:
            raise self._not_a_completion(response, str(exc)) from exc

    def _parse(self, data: object, request: ModelRequest) -> ModelResponse:
        """A chat completion's answer to ``request`` (raises :class:`NotAChatCompletion`)."""
        reading = self.tool_calls_in_text
        return parse_response(
            data,
            text_calls=reading,
            tool_names=[tool.name for tool in request.tools],
            skills=skill_names([m.content for m in request.messages]) if reading else (),
        )

    def _not_a_completion(self, response: httpx.Response, why: str) -> ModelError:
        """A 200 answer that is not a chat completion (an HTML page, JSON of another shape):
        not recoverable, since asking the same URL again gets the same page."""
        media = response.headers.get("content-type", "no content type").partition(";")[0]
        error = ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{self.name}: the response from {self.url} is not a chat completion ({why[:300]}): "
            f"HTTP {response.status_code}, {media.strip()}, beginning {body_start(response)}",
            remedy=NOT_THE_API_REMEDY.format(base_url=self.base_url),
        )
        _attach_body(error, response)
        return error

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Answer one step streamed (``stream: true``, usage in the last chunk): the text,
        reasoning and tool-call argument pieces as they arrive, then the answer, the same
        ``ModelResponse`` :meth:`request` gives. A stream cut before its end, or an error the
        server sends inside it, is a recoverable ``MODEL_REQUEST_FAILED``; failures before it
        starts are :meth:`request`'s. Each wait for the next line is bounded by
        ``read_timeout``, and the attempts at one step by ``stream_deadline`` in all."""
        attempts = self._begin(request, self.stream_deadline)
        try:
            async for item in self._stream(request, attempts):
                yield item
        except ModelError as exc:
            settled = self._settle(request, attempts, exc)
            if settled is exc:
                raise
            raise settled from exc
        self._attempts.pop(id(request), None)

    async def _stream(
        self, request: ModelRequest, attempts: _Attempts
    ) -> AsyncIterator[ModelDelta | ModelResponse]:
        body = self.body(request)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        assembler = StreamAssembler()
        sent = self._client.build_request("POST", self.url, json=body)
        opened = False
        done = False
        try:
            response = await self._within(attempts, lambda: self._client.send(sent, stream=True))
            opened = True
            try:
                if response.status_code != 200:
                    await self._within(attempts, response.aread)
                    raise self._http_error(response)
                media = response.headers.get("content-type", "").partition(";")[0].strip().lower()
                if media != "text/event-stream":
                    # A server that does not stream answers whole: one answer, no deltas. Any
                    # other page (HTML, say) is read whole too, and said to be what it is.
                    await self._within(attempts, response.aread)
                    yield self._whole(response, request)
                    return
                lines = response.aiter_lines()
                while True:
                    line = await self._within(attempts, lambda: anext(lines, None))
                    if line is None:
                        break
                    if not line.startswith("data:"):
                        continue  # SSE comments, event names, keep-alives
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    for delta in assembler.feed(self._chunk(data)):
                        yield delta
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, streamed=opened) from exc
        if done and not assembler.began:
            # A stream that ended as streams do, without one chat-completion chunk.
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} is not a chat completion: it ended "
                "without a chunk that has choices",
                remedy=NOT_THE_API_REMEDY.format(base_url=self.base_url),
            )
        if not assembler.finished and not done:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} ended before the answer did",
                recoverable=True,
                remedy="check the server if it keeps failing",
            )
        try:
            yield self._parse(assembler.completion(), request)
        except NotAChatCompletion as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} is not a chat completion: "
                f"{str(exc)[:300]}",
                remedy=NOT_THE_API_REMEDY.format(base_url=self.base_url),
            ) from exc

    def _begin(self, request: ModelRequest, limit: float) -> _Attempts:
        """The attempts at ``request`` so far, with this one counted: the turn loop sends the
        same request object again when it retries, so its deadline runs from the first."""
        key = id(request)
        found = self._attempts.get(key)
        if found is None or found.request is not request:
            found = _Attempts(request, time.monotonic() + limit, limit)
            self._attempts[key] = found
            while len(self._attempts) > MAX_TRACKED_REQUESTS:  # steps the turn loop gave up on
                self._attempts.popitem(last=False)
        found.count += 1
        return found

    async def _within(self, attempts: _Attempts, wait: Callable[[], Awaitable[T]]) -> T:
        """What ``wait()`` gives, unless the request's deadline passes first: then the wait is
        cancelled (its connection dropped) and the error says so."""
        left = attempts.until - time.monotonic()
        if left > 0:
            with anyio.move_on_after(left):
                return await wait()
        raise ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{self.name}: no answer from {self.url} in time",
            recoverable=True,  # made final by _settle, which says which deadline passed
        )

    def _settle(self, request: ModelRequest, attempts: _Attempts, error: ModelError) -> ModelError:
        """``error`` as the turn loop should see it: a recoverable one stops being so when the
        request's deadline has passed, or when the wait the server asked for would pass it."""
        if error.recoverable:
            left = attempts.until - time.monotonic()
            setting = "deadline" if attempts.limit == self.deadline else "stream_deadline"
            why = None
            if left <= 0:
                why = (
                    f"{self.name}: the request to {self.url} did not finish within its deadline "
                    f"of {attempts.limit:g} s ({attempts.count} attempt(s); the last: "
                    f"{error.message.removeprefix(self.name + ': ')})"
                )
            elif error.retry_after is not None and error.retry_after >= left:
                why = (
                    f"{error.message} (the server asked to wait {error.retry_after:g} s, more "
                    f"than the {left:.0f} s left of the request's {attempts.limit:g} s deadline)"
                )
            if why is not None:
                settled = ModelError(
                    error.code,
                    why,
                    body=error.body,
                    remedy=f"check the server, or raise [plugin.openai] {setting} (now "
                    f"{attempts.limit:g} s)",
                )
                for note in getattr(error, "__notes__", ()):
                    settled.add_note(note)
                error = settled
        if not error.recoverable:
            self._attempts.pop(id(request), None)
        return error

    def _transport_error(self, exc: httpx.HTTPError, *, streamed: bool) -> ModelError:
        """An error of the connection: final when the endpoint cannot be reached at all (its
        host does not resolve, its port refuses), recoverable otherwise (a timeout, a dropped
        connection)."""
        dead = dead_endpoint(exc, self.base_url)
        if dead is not None:
            what, remedy = dead
            return ModelError(ErrorCode.MODEL_REQUEST_FAILED, f"{self.name}: {what}", remedy=remedy)
        if isinstance(exc, httpx.TimeoutException):
            phase = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
            what = (
                f"the stream from {self.url} stalled"
                if streamed
                else f"no answer from {self.url} in time"
            )
            return ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: {what} ({type(exc).__name__})",
                recoverable=True,
                remedy=f"raise [plugin.openai] {phase}_timeout, or check the server",
            )
        what = f"the stream from {self.url} broke" if streamed else f"cannot reach {self.url}"
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{self.name}: {what}: {type(exc).__name__}: "
            f"{str(exc)[:300] or 'the connection failed'}",
            recoverable=True,
            remedy="check the base URL and that the server is running",
        )

    def _chunk(self, data: str) -> dict[str, Any]:
        """One ``data:`` line of the stream, as a chunk; an error object the server sent
        inside the stream is raised."""
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: a streamed chunk from {self.url} is not JSON: {data[:200]!r}",
                remedy=NOT_THE_API_REMEDY.format(base_url=self.base_url),
            ) from exc
        if not isinstance(chunk, dict):
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: a streamed chunk from {self.url} is not an object: {data[:200]!r}",
                remedy=NOT_THE_API_REMEDY.format(base_url=self.base_url),
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
                remedy="check the server if it keeps failing",
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
            dead = dead_endpoint(exc, self.base_url)
            if dead is not None:
                what, remedy = dead
                raise ModelError(
                    ErrorCode.MODEL_REQUEST_FAILED, f"{self.name}: {what}", remedy=remedy
                ) from exc
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
                remedy=NOT_THE_API_REMEDY.format(base_url=self.base_url),
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
