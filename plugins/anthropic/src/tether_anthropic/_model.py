"""The Messages model: tether requests to ``POST /v1/messages`` over the official SDK, and back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
from anthropic.types import Message as WireMessage
from anthropic.types import RawMessageStreamEvent

from tether.errors import ErrorCode, ModelError
from tether.models import ModelDelta, ModelRequest, ModelResponse

from ._cache import place_breakpoints
from ._defaults import DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_TOKENS, DEFAULT_READ_TIMEOUT
from ._errors import error_from
from ._stream import StreamAssembler
from ._wire import (
    NotAMessage,
    ThinkingMemory,
    encode_messages,
    encode_system,
    encode_tools,
    parse_message,
)

__all__ = ("MessagesModel",)

#: The path of the Messages API under the base URL.
MESSAGES_PATH = "/v1/messages"
#: The smallest thinking budget the API takes.
MIN_THINKING_BUDGET = 1024
#: Tokens of ``max_tokens`` kept for the answer after the thinking.
ANSWER_ROOM = 1024


class MessagesModel:
    """A Claude model behind ``POST {base_url}/v1/messages``.

    ``max_tokens`` caps every answer (the turn's remaining output budget lowers it; the API
    requires one). ``thinking_budget`` turns extended thinking on with that many tokens
    (``None``: off). ``cache`` places the prompt-cache breakpoints (``tether_anthropic._cache``).
    ``api_key`` ``None`` sends no key (a local proxy that takes none). The SDK's own retries
    are off: the turn loop retries, honouring ``retry-after``.
    """

    accepts_images = True
    """Claude models take images: tool results' images go as ``image`` blocks."""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        thinking_budget: int | None = None,
        cache: bool = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + MESSAGES_PATH
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.cache = cache
        self.thinking = ThinkingMemory()
        # No key: the SDK would look for one in its own places, then refuse to send; say
        # plainly that this request goes without.
        self._headers: dict[str, Any] = {} if api_key else {"X-Api-Key": anthropic.Omit()}
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or None,
            base_url=self.base_url,
            max_retries=0,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            http_client=http_client,
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.close()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request``, breakpoints placed."""
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": min(
                n for n in (self.max_tokens, request.max_output_tokens) if n is not None
            ),
        }
        system = encode_system(request.system)
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = encode_tools(request.tools)
        body["messages"] = encode_messages(request.messages, self.thinking)
        budget = self._thinking_budget(request, body["max_tokens"])
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if self.cache:
            place_breakpoints(body)
        return body

    def _thinking_budget(self, request: ModelRequest, max_tokens: int) -> int | None:
        """The thinking budget of this request: the setting, cut so that the answer keeps
        :data:`ANSWER_ROOM` tokens of ``max_tokens`` (the thinking counts as output); ``None``
        (no thinking) when less than the API's minimum is left, or when the request goes on
        from tool calls whose thinking is not remembered (a model made again, after a
        restart: the API wants that thinking back, and only the model that got it had it)."""
        if self.thinking_budget is None:
            return None
        budget = min(self.thinking_budget, max_tokens - ANSWER_ROOM)
        if budget < MIN_THINKING_BUDGET:
            return None
        last = next((m for m in reversed(request.messages) if m.role == "assistant"), None)
        if last is not None and last.tool_calls and not self.thinking.of(last):
            return None
        return budget

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one step; every failure is a :class:`ModelError` (recoverable ones carry
        the wait the server asked for)."""
        try:
            response = await self._client.post(
                MESSAGES_PATH,
                cast_to=httpx.Response,
                body=self.body(request),
                options={"headers": self._headers},
            )
            data: object = response.json()
        except ValueError as exc:
            raise self._not_a_message(exc) from exc
        except (anthropic.AnthropicError, httpx.HTTPError) as exc:
            raise error_from(self.name, self.url, exc) from exc
        return self._answer(data)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """Answer one step streamed: text, thinking (``reasoning``) and tool-input pieces as
        they arrive, then the answer, the same ``ModelResponse`` :meth:`request` gives. A
        stream cut before ``message_stop``, or an ``error`` event inside it, is a recoverable
        ``MODEL_REQUEST_FAILED`` (an overloaded API included); failures before it starts are
        :meth:`request`'s."""
        body = self.body(request)
        body["stream"] = True
        assembler = StreamAssembler()
        try:
            events = await self._client.post(
                MESSAGES_PATH,
                cast_to=WireMessage,
                body=body,
                options={"headers": self._headers},
                stream=True,
                stream_cls=anthropic.AsyncStream[RawMessageStreamEvent],
            )
            async with events:
                async for event in events:
                    for delta in assembler.feed(event):
                        yield delta
        except (anthropic.AnthropicError, httpx.HTTPError) as exc:
            raise error_from(self.name, self.url, exc) from exc
        if not assembler.finished:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the stream from {self.url} ended before the answer did",
                recoverable=True,
                remedy="check the server (tether check --model SPEC asks whether it answers)",
            )
        yield self._answer(assembler.message())

    def _answer(self, data: object) -> ModelResponse:
        try:
            response, thinking = parse_message(data)
        except NotAMessage as exc:
            raise self._not_a_message(exc) from exc
        self.thinking.remember(response.tool_calls, thinking)
        return response

    def _not_a_message(self, exc: Exception) -> ModelError:
        return ModelError(
            ErrorCode.MODEL_REQUEST_FAILED,
            f"{self.name}: the answer from {self.url} is not a Messages API message: "
            f"{str(exc)[:300]}",
            remedy="check that the base URL points at an Anthropic Messages API "
            "(without /v1: the path is appended)",
        )

    async def probe(self) -> str:
        """Check that the API answers ``GET {base_url}/v1/models``; a line saying so.

        Raises ``MODEL_REQUEST_FAILED`` naming the URL and the reason when it does not.
        """
        url = self.base_url + "/v1/models"
        try:
            response = await self._client.get(
                "/v1/models", cast_to=httpx.Response, options={"headers": self._headers}
            )
            data: Any = response.json()
            listed = [str(item["id"]) for item in data["data"]]
        except (anthropic.AnthropicError, httpx.HTTPError) as exc:
            error = error_from(self.name, url, exc)
            error.recoverable = False
            raise error from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the answer from {url} is not a model list ({exc!r:.200})",
                remedy="check that the base URL points at an Anthropic Messages API",
            ) from exc
        line = f"model {self.name}: {url} answers, {len(listed)} model(s) listed"
        if listed and self.model not in listed:
            line += f"; {self.model!r} is not among them ({', '.join(listed[:5])})"
        return line
