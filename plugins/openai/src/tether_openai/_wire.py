"""tether requests to chat-completions JSON, and chat-completion JSON back to responses."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal

from tether.models import FinishReason, Message, ModelRequest, ModelResponse, ToolCall, Usage

from ._json import json_array, json_object
from ._text_calls import TextCallFormat, parse_text_calls

__all__ = ("FINISH_REASONS", "NotAChatCompletion", "encode_messages", "parse_response")

#: The skill tool's name (tether-skill-tool): a skill written as a call is loaded with it.
LOAD_SKILL = "load_skill"

#: Finish reasons of the API -> tether's.
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "refusal",
}

#: How an assistant message that only calls tools carries its empty content.
ToolCallContent = Literal["empty", "null"]


class NotAChatCompletion(ValueError):
    """A 200 response whose JSON is not a chat completion; the text names the missing part."""


def encode_messages(
    request: ModelRequest, *, tool_call_content: ToolCallContent = "empty"
) -> list[dict[str, Any]]:
    """The ``messages`` array: each base prompt block as a system message, then the history."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": block} for block in request.system
    ]
    images: list[dict[str, Any]] = []  # of the tool messages just sent
    for message in request.messages:
        if images and message.role != "tool":
            messages.append(_images_message(images))
            images = []
        messages.append(_message(message, tool_call_content))
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
        messages.append(_images_message(images))
    return messages


def _images_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool results' images, as the user message after the step's tool messages (a tool
    message of Chat Completions holds text only, and the tool messages of one step must follow
    their assistant message without a break)."""
    return {"role": "user", "content": parts}


def _message(message: Message, tool_call_content: ToolCallContent) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant":
        content: str | None = message.content
        if not content and message.tool_calls and tool_call_content == "null":
            content = None
        data: dict[str, Any] = {"role": "assistant", "content": content}
        if message.tool_calls:
            data["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments_text(call)},
                }
                for call in message.tool_calls
            ]
        return data
    return {"role": message.role, "content": message.content}


def _arguments_text(call: ToolCall) -> str:
    # Arguments the model wrote badly go back exactly as written, so the model sees its own
    # mistake next to the error result instead of a call it never made.
    if call.invalid_arguments is not None:
        return call.invalid_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def parse_response(
    data: Any,
    *,
    text_calls: TextCallFormat | None = None,
    tool_names: Iterable[str] = (),
    skills: Iterable[str] = (),
) -> ModelResponse:
    """A chat-completion JSON object -> :class:`ModelResponse`.

    Raises :class:`NotAChatCompletion` naming the missing or malformed part. Tool calls without
    an ``id`` get a stable one derived from the response (its ``id``, else a digest of the body)
    and the call's index; arguments sent as a JSON object are taken as they are. With
    ``text_calls`` set and no structured call in the message, calls written in the text are
    parsed (only for the tools in ``tool_names``) and the text is kept as the content. A call
    that names one of ``skills`` instead of a tool becomes ``load_skill({"name": ...})`` when
    ``load_skill`` is among the tools (small models call a skill as if it were a tool).
    """
    body = json_object(data)
    if body is None:
        raise NotAChatCompletion(f"the body is a JSON {type(data).__name__}, not an object")
    choices = json_array(body.get("choices"))
    if not choices:
        raise NotAChatCompletion("it has no choices")
    choice = json_object(choices[0])
    message = json_object(choice.get("message")) if choice is not None else None
    if choice is None or message is None:
        raise NotAChatCompletion("choices[0] has no message object")
    content = _content_text(message.get("content"))
    prefix = _id_prefix(body)
    raw_calls = json_array(message.get("tool_calls") or [])
    if raw_calls is None:
        raise NotAChatCompletion("choices[0].message.tool_calls is not a list")
    calls = [_tool_call(call, index, prefix) for index, call in enumerate(raw_calls)]
    finish = FINISH_REASONS.get(str(choice.get("finish_reason") or "stop"), "stop")
    if not calls and text_calls is not None and content:
        names = frozenset(tool_names)
        loadable = frozenset(skills) - names if LOAD_SKILL in names else frozenset[str]()
        written = parse_text_calls(content, text_calls, names | loadable)
        for index, (name, arguments) in enumerate(written):
            if name in names:
                calls.append(ToolCall(id=f"{prefix}_text_{index}", name=name, arguments=arguments))
            elif name in loadable:
                calls.append(
                    ToolCall(id=f"{prefix}_text_{index}", name=LOAD_SKILL, arguments={"name": name})
                )
        if calls:
            finish = "tool_calls"
    if message.get("refusal"):
        finish = "refusal"
    usage = json_object(body.get("usage")) or {}
    details = json_object(usage.get("prompt_tokens_details")) or {}
    cached = details.get("cached_tokens") or usage.get("prompt_cache_hit_tokens")
    return ModelResponse(
        text=content or str(message.get("refusal") or ""),
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            cached_input_tokens=_count(cached),
        ),
        finish_reason=finish,
    )


def _content_text(content: object) -> str | None:
    """The content string; a list of parts (``[{"type": "text", "text": ...}]``, which some
    servers send) is joined."""
    if content is None or isinstance(content, str):
        return content
    parts = json_array(content)
    if parts is not None:
        texts = [_part_text(part) for part in parts]
        if all(text is not None for text in texts):
            return "".join(text or "" for text in texts)
    raise NotAChatCompletion(
        f"choices[0].message.content is a JSON {type(content).__name__}, not a string"
    )


def _part_text(part: object) -> str | None:
    """A content part's text (``""`` when it has none); ``None`` when it is no text part."""
    fields = json_object(part)
    text = fields.get("text", "") if fields is not None else None
    return text if isinstance(text, str) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _id_prefix(data: dict[str, object]) -> str:
    """``call_<response id>``, or a digest of the body when the server sent no id."""
    response_id = data.get("id")
    if isinstance(response_id, str) and response_id:
        return f"call_{response_id}"
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    return f"call_{digest[:16]}"


def _tool_call(call: object, index: int, prefix: str) -> ToolCall:
    where = f"choices[0].message.tool_calls[{index}]"
    fields = json_object(call)
    if fields is None:
        raise NotAChatCompletion(f"{where} is not an object")
    function = json_object(fields.get("function"))
    name = function.get("name") if function is not None else None
    if function is None or not isinstance(name, str):
        raise NotAChatCompletion(f"{where} has no function name")
    call_id = fields.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"{prefix}_{index}"
    raw = function.get("arguments")
    invalid: str | None = None
    arguments: dict[str, object] | None
    if (given := json_object(raw)) is not None:  # some servers send the object itself
        arguments = given
    elif raw is None or raw == "":
        arguments = {}
    elif isinstance(raw, str):
        try:
            arguments = json_object(json.loads(raw))
        except json.JSONDecodeError:
            arguments = None
        if arguments is None:
            invalid = raw
    else:
        arguments, invalid = None, json.dumps(raw, ensure_ascii=False)
    if arguments is None:
        # The model wrote arguments that are not a JSON object: the turn loop answers the call
        # with an error result and does not run the tool.
        arguments, invalid = {}, invalid if invalid is not None else str(raw)
    return ToolCall(id=call_id, name=name, arguments=arguments, invalid_arguments=invalid)
