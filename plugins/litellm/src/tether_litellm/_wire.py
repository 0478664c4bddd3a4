"""tether requests to the OpenAI-shaped messages LiteLLM takes, and the OpenAI-shaped chat
completion it answers with (``ModelResponse.model_dump()``) back to a tether response. LiteLLM
translates both to and from each provider's own API (Bedrock's Converse, Vertex AI, ...)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, cast

from tether.models import FinishReason, Message, ModelRequest, ModelResponse, ToolCall, Usage

__all__ = (
    "FINISH_REASONS",
    "NotAChatCompletion",
    "encode_messages",
    "encode_tools",
    "parse_completion",
    "usage_of",
)

#: Finish reasons LiteLLM reports (OpenAI's, which it maps every provider's to) -> tether's;
#: an unknown one is ``stop``.
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "refusal",
    "guardrail_intervened": "refusal",
}


class NotAChatCompletion(ValueError):
    """An answer that is not a chat completion; the text names the missing part."""


def encode_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [
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


def encode_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The ``messages`` list: each base prompt block as a system message, then the history.

    A tool result's images go as ``image_url`` parts of one user message after the step's
    tool messages (an OpenAI tool message holds text only, and the tool messages of a step
    must follow their assistant message without a break); LiteLLM turns them into each
    provider's image blocks."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": block} for block in request.system
    ]
    images: list[dict[str, Any]] = []
    for message in request.messages:
        if images and message.role != "tool":
            messages.append({"role": "user", "content": images})
            images = []
        messages.append(_message(message))
        if message.images:
            images.append({"type": "text", "text": f"The images of {message.name or 'a tool'}:"})
            images.extend(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
                }
                for image in message.images
            )
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role != "assistant":
        return {"role": message.role, "content": message.content}
    data: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        # No text: ``None``, which LiteLLM leaves out for the providers that refuse an empty
        # text block (Anthropic's, Bedrock's).
        data["content"] = message.content or None
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    # Arguments the model wrote badly go back as written: the model sees its
                    # own mistake next to the error result.
                    "arguments": call.invalid_arguments
                    if call.invalid_arguments is not None
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    return data


def parse_completion(data: object) -> ModelResponse:
    """A chat completion (a dict) -> :class:`ModelResponse`; raises :class:`NotAChatCompletion`
    naming what is missing. Calls without an id get one derived from the answer's id."""
    body = _object(data)
    if body is None:
        raise NotAChatCompletion(f"it is a {type(data).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise NotAChatCompletion("it has no choices")
    choice = _object(cast("list[object]", choices)[0])
    message = _object(choice.get("message")) if choice is not None else None
    if choice is None or message is None:
        raise NotAChatCompletion("choices[0] has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise NotAChatCompletion(f"choices[0].message.content is a {type(content).__name__}")
    raw_calls: object = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise NotAChatCompletion("choices[0].message.tool_calls is not a list")
    prefix = _id_prefix(body)
    calls = tuple(
        _tool_call(call, index, prefix)
        for index, call in enumerate(cast("list[object]", raw_calls))
    )
    reason = choice.get("finish_reason")
    finish = FINISH_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    if calls and finish == "stop":
        finish = "tool_calls"
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        finish = "refusal"
    return ModelResponse(
        text=content or (refusal if isinstance(refusal, str) else ""),
        tool_calls=calls,
        usage=usage_of(_object(body.get("usage")) or {}),
        finish_reason=finish,
    )


def usage_of(usage: Mapping[str, object]) -> Usage:
    """LiteLLM's usage (OpenAI's shape) -> tether's. ``prompt_tokens`` counts the tokens read
    from and written to a prompt cache already; the part read is
    ``prompt_tokens_details.cached_tokens`` (LiteLLM's for every provider; DeepSeek's
    ``prompt_cache_hit_tokens`` and Anthropic's ``cache_read_input_tokens`` where it is not
    set), the part written ``cache_creation_input_tokens`` (Anthropic's, Bedrock's)."""
    details = _object(usage.get("prompt_tokens_details")) or {}
    read = (
        _count(details.get("cached_tokens"))
        or _count(usage.get("cache_read_input_tokens"))
        or _count(usage.get("prompt_cache_hit_tokens"))
    )
    written = _count(usage.get("cache_creation_input_tokens")) or _count(
        details.get("cache_creation_tokens")
    )
    return Usage(
        input_tokens=_count(usage.get("prompt_tokens")),
        output_tokens=_count(usage.get("completion_tokens")),
        cached_input_tokens=read,
        cache_write_input_tokens=written,
    )


def _tool_call(raw: object, index: int, prefix: str) -> ToolCall:
    where = f"choices[0].message.tool_calls[{index}]"
    call = _object(raw)
    function = _object(call.get("function")) if call is not None else None
    name = function.get("name") if function is not None else None
    if call is None or function is None or not isinstance(name, str) or not name:
        raise NotAChatCompletion(f"{where} has no function name")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"{prefix}_{index}"
    arguments = function.get("arguments")
    given = _object(arguments)
    if given is not None:
        return ToolCall(id=call_id, name=name, arguments=given)
    if arguments is None or arguments == "":
        return ToolCall(id=call_id, name=name)
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    try:
        parsed = _object(json.loads(text))
    except ValueError:
        parsed = None
    if parsed is not None:
        return ToolCall(id=call_id, name=name, arguments=parsed)
    # The turn loop answers such a call with an error result and does not run the tool.
    return ToolCall(id=call_id, name=name, invalid_arguments=text)


def _id_prefix(body: dict[str, object]) -> str:
    answer_id = body.get("id")
    if isinstance(answer_id, str) and answer_id:
        return f"call_{answer_id}"
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
    return f"call_{digest[:16]}"


def _object(value: object) -> dict[str, object] | None:
    if isinstance(value, dict):
        return cast("dict[str, object]", value)
    return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
