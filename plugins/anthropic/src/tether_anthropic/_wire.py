"""tether requests to Messages API content blocks, and a Messages API ``message`` back to a
response. Plain JSON both ways: the SDK sends the body as it is, and an answer (whole, or put
back together from a stream) is read here as the JSON object the API documents."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from tether.models import FinishReason, Message, ModelResponse, ToolCall, ToolSchema, Usage

__all__ = (
    "STOP_REASONS",
    "NotAMessage",
    "ThinkingMemory",
    "encode_messages",
    "encode_system",
    "encode_tools",
    "parse_message",
)

#: Stop reasons of the API -> tether's finish reasons (an unknown one is ``stop``).
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}
#: The thinking blocks of this many answers are remembered (see :class:`ThinkingMemory`).
THINKING_MEMORY = 256


class NotAMessage(ValueError):
    """A 200 answer that is not a Messages API ``message``; the text names what is wrong."""


@dataclass
class ThinkingMemory:
    """The thinking blocks of the answers that called tools, by their first call's id.

    With extended thinking on, the API wants an answer's thinking blocks (with their
    signatures) back, unchanged, when the request continues after its tool calls. tether's
    messages have no place for them (they are the provider's, not the conversation's), so the
    model keeps them here for as long as it lives: the last :data:`THINKING_MEMORY` answers.
    """

    blocks: OrderedDict[str, list[dict[str, Any]]] = field(
        default_factory=OrderedDict[str, list[dict[str, Any]]]
    )

    def remember(self, calls: tuple[ToolCall, ...], blocks: list[dict[str, Any]]) -> None:
        if not calls or not blocks:
            return
        self.blocks[calls[0].id] = blocks
        while len(self.blocks) > THINKING_MEMORY:
            self.blocks.popitem(last=False)

    def of(self, message: Message) -> list[dict[str, Any]] | None:
        """The remembered thinking blocks of an assistant message that called tools."""
        if not message.tool_calls:
            return None
        return self.blocks.get(message.tool_calls[0].id)


def encode_system(system: tuple[str, ...]) -> list[dict[str, Any]]:
    """The base prompt blocks as ``system`` text blocks (empty blocks left out: the API
    refuses an empty text block)."""
    return [{"type": "text", "text": block} for block in system if block.strip()]


def encode_tools(tools: tuple[ToolSchema, ...]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def encode_messages(
    messages: tuple[Message, ...], thinking: ThinkingMemory | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array. Tool results become ``tool_result`` blocks of a user message
    (the results of one step in one message, first, as the API wants), user text after them
    joins that message; an assistant answer is its remembered thinking, its text and its
    ``tool_use`` blocks. A message with nothing to send (an empty answer) is left out, and
    messages of one role in a row are one message."""
    encoded: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            role, blocks = "assistant", _assistant_blocks(message, thinking)
        elif message.role == "tool":
            role, blocks = "user", [_tool_result(message)]
        else:  # user, and system messages in the history (the API has no such role there)
            role, blocks = "user", _text_and_images(message)
        if not blocks:
            continue
        if encoded and encoded[-1]["role"] == role:
            encoded[-1]["content"].extend(blocks)
        else:
            encoded.append({"role": role, "content": blocks})
    return encoded


def _text_and_images(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_image(image.mime_type, image.data) for image in message.images)
    return blocks


def _image(mime_type: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data}}


def _tool_result(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.images:
        block["content"] = _text_and_images(message)
    elif message.content:
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True
    return block


def _assistant_blocks(message: Message, thinking: ThinkingMemory | None) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    remembered = thinking.of(message) if thinking is not None else None
    if remembered:
        blocks.extend(remembered)
    if message.content.strip():
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        # A call whose arguments the model wrote badly goes back with none: ``input`` must be
        # an object; the model reads its raw text in the error result that answers it.
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def parse_message(data: object) -> tuple[ModelResponse, list[dict[str, Any]]]:
    """A ``message`` JSON object -> the response, and its thinking blocks (to send back).

    Raises :class:`NotAMessage` naming what is missing or malformed. Text blocks are joined;
    ``tool_use`` blocks are the calls (``input`` as the object sent, or, from a stream, the
    JSON text put together: text that is not a JSON object is kept as ``invalid_arguments``).
    """
    body = _object(data)
    if body is None:
        raise NotAMessage(f"the body is a JSON {type(data).__name__}, not an object")
    raw_content = body.get("content")
    if not isinstance(raw_content, list):
        raise NotAMessage("it has no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[dict[str, Any]] = []
    for index, raw in enumerate(cast("list[object]", raw_content)):
        block = _object(raw)
        kind = block.get("type") if block is not None else None
        if block is None or not isinstance(kind, str):
            raise NotAMessage(f"content[{index}] is not a content block")
        if kind == "text":
            text = block.get("text")
            texts.append(text if isinstance(text, str) else "")
        elif kind == "tool_use":
            calls.append(_tool_call(block, index))
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(dict(block))
        # Other blocks (a server tool's, citations) are the provider's: not part of the answer.
    stop = body.get("stop_reason")
    finish = STOP_REASONS.get(stop, "stop") if isinstance(stop, str) else "stop"
    if calls and finish == "stop":
        finish = "tool_calls"
    return (
        ModelResponse(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=usage_of(_object(body.get("usage")) or {}),
            finish_reason=finish,
        ),
        thinking,
    )


def usage_of(usage: Mapping[str, object]) -> Usage:
    """The API's usage -> tether's. The API counts ``input_tokens`` without the cache: the
    tokens read from it and written to it come on top, so tether's ``input_tokens`` is the sum
    of the three (as every other provider counts it), ``cached_input_tokens`` the part read
    and ``cache_write_input_tokens`` the part written."""
    read = _count(usage.get("cache_read_input_tokens"))
    written = _count(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_count(usage.get("input_tokens")) + read + written,
        output_tokens=_count(usage.get("output_tokens")),
        cached_input_tokens=read,
        cache_write_input_tokens=written,
    )


def _tool_call(block: dict[str, object], index: int) -> ToolCall:
    call_id, name = block.get("id"), block.get("name")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
        raise NotAMessage(f"content[{index}] is a tool_use block without an id or a name")
    raw = block.get("input")
    given = _object(raw)
    if given is not None:
        return ToolCall(id=call_id, name=name, arguments=given)
    if raw is None or raw == "":
        return ToolCall(id=call_id, name=name)
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    try:
        parsed = _object(json.loads(text))
    except ValueError:
        parsed = None
    if parsed is not None:
        return ToolCall(id=call_id, name=name, arguments=parsed)
    # The turn loop answers such a call with an error result and does not run the tool.
    return ToolCall(id=call_id, name=name, invalid_arguments=text)


def _object(value: object) -> dict[str, object] | None:
    if isinstance(value, dict):
        return cast("dict[str, object]", value)
    return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
