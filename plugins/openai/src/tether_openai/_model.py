"""The chat-completions model: tether requests to JSON and back, over httpx."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from tether.errors import ErrorCode, ModelError
from tether.models import Message, ModelRequest, ModelResponse, ToolCall, Usage

#: Finish reasons of the API -> tether's.
FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "refusal",
}
#: Status codes worth a retry: rate limits and server trouble.
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class ChatCompletionsModel:
    """A model behind ``POST {base_url}/chat/completions``."""

    def __init__(
        self,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers, timeout=httpx.Timeout(timeout), transport=transport
        )

    @classmethod
    def from_endpoint(
        cls,
        name: str,
        model: str,
        *,
        base_url: str,
        api_key_env: str | None,
        timeout: float,
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
        return cls(name, model, base_url=base_url, api_key=api_key, timeout=timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for ``request``."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": block} for block in request.system
        ]
        messages += [_message(m) for m in request.messages]
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
        if request.max_output_tokens is not None:
            body["max_tokens"] = request.max_output_tokens
        return body

    async def request(self, request: ModelRequest) -> ModelResponse:
        try:
            response = await self._client.post(self.url, json=self.body(request))
        except httpx.TimeoutException as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: no answer from {self.url} in time ({type(exc).__name__})",
                recoverable=True,
                remedy="raise [plugin.openai] timeout, or check the server",
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: cannot reach {self.url}: {type(exc).__name__}: {exc}",
                recoverable=True,
                remedy="check the base URL and that the server is running",
            ) from exc
        if response.status_code != 200:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: HTTP {response.status_code} from {self.url}: "
                f"{_error_text(response)}",
                recoverable=response.status_code in RETRYABLE_STATUS,
                remedy="check the model name and the API key"
                if response.status_code in (401, 403, 404)
                else None,
            )
        try:
            return parse_response(response.json())
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name}: the response is not a chat completion: {exc}",
                remedy="check that the base URL points at an OpenAI-compatible API",
            ) from exc


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant":
        data: dict[str, Any] = {"role": "assistant", "content": message.content or None}
        if message.tool_calls:
            data["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
        return data
    return {"role": message.role, "content": message.content}


def parse_response(data: dict[str, Any]) -> ModelResponse:
    """A chat-completion JSON object -> :class:`ModelResponse`."""
    choice = data["choices"][0]
    message = choice["message"]
    calls = []
    for call in message.get("tool_calls") or []:
        raw = call["function"].get("arguments") or "{}"
        try:
            arguments = json.loads(raw)
        except json.JSONDecodeError:
            arguments = None
        invalid = None
        if not isinstance(arguments, dict):
            # The model wrote arguments that are not a JSON object: the turn loop answers the
            # call with an error result and does not run the tool.
            arguments, invalid = {}, raw
        calls.append(
            ToolCall(
                id=call["id"],
                name=call["function"]["name"],
                arguments=arguments,
                invalid_arguments=invalid,
            )
        )
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or usage.get("prompt_cache_hit_tokens") or 0
    finish = FINISH_REASONS.get(choice.get("finish_reason") or "stop", "stop")
    if message.get("refusal"):
        finish = "refusal"
    return ModelResponse(
        text=message.get("content") or message.get("refusal") or "",
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            cached_input_tokens=cached,
        ),
        finish_reason=finish,  # type: ignore[arg-type]
    )


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    except ValueError:
        pass
    return response.text[:300] or response.reason_phrase
