"""A streamed answer (``stream: true``): the SDK's server-sent events into deltas, and back into
one ``message`` JSON object, which :func:`tether_anthropic._wire.parse_message` reads as it
reads an answer that was not streamed (so both ways give the same ``ModelResponse``).

The events, as the SDK types them (``anthropic.types.RawMessageStreamEvent``):
``message_start`` (the message, its usage so far), ``content_block_start`` (a block: ``text``,
``thinking``, ``redacted_thinking``, ``tool_use``), ``content_block_delta`` (``text_delta``,
``thinking_delta``, ``signature_delta``, ``input_json_delta``, ``citations_delta``),
``content_block_stop``, ``message_delta`` (the stop reason, the usage, cumulative) and
``message_stop``. ``ping`` and ``error`` events are the SDK's (an ``error`` is raised).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.models import ModelDelta

if TYPE_CHECKING:
    from anthropic.types import RawMessageStreamEvent

__all__ = ("StreamAssembler",)

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


@dataclass
class _Block:
    data: dict[str, Any]
    pieces: list[str] = field(default_factory=list[str])
    """The text, thinking or input JSON as it arrived."""
    call: int = -1
    """For ``tool_use``: which call of the answer."""


@dataclass
class StreamAssembler:
    """Feeds on the events of one streamed answer (:meth:`feed`: the deltas they carry), and
    says what the whole answer was (:meth:`message`)."""

    id: str | None = None
    blocks: dict[int, _Block] = field(default_factory=dict[int, _Block])
    calls: int = 0
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict[str, int])
    finished: bool = False
    """Whether ``message_stop`` arrived."""

    def feed(self, event: RawMessageStreamEvent) -> list[ModelDelta]:
        """The deltas of one event."""
        if event.type == "content_block_delta":
            block = self.blocks.get(event.index)
            if block is None:
                return []
            delta = event.delta
            if delta.type == "text_delta":
                block.pieces.append(delta.text)
                return [ModelDelta("text", delta.text)] if delta.text else []
            if delta.type == "thinking_delta":
                block.pieces.append(delta.thinking)
                return [ModelDelta("reasoning", delta.thinking)] if delta.thinking else []
            if delta.type == "input_json_delta":
                block.pieces.append(delta.partial_json)
                if not delta.partial_json:
                    return []
                return [ModelDelta("tool_call", delta.partial_json, index=block.call)]
            if delta.type == "signature_delta":
                block.data["signature"] = delta.signature
            return []  # citations: the provider's, not part of the answer
        if event.type == "content_block_start":
            return self._start(event.index, event.content_block.to_dict())
        if event.type == "message_start":
            self.id = event.message.id
            self._usage(event.message.usage.to_dict())
        elif event.type == "message_delta":
            if event.delta.stop_reason is not None:
                self.stop_reason = event.delta.stop_reason
            self._usage(event.usage.to_dict())
        elif event.type == "message_stop":
            self.finished = True
        return []

    def _start(self, index: int, data: dict[str, Any]) -> list[ModelDelta]:
        block = _Block(data)
        self.blocks[index] = block
        kind = data.get("type")
        if kind == "tool_use":
            block.call = self.calls
            self.calls += 1
            # The input arrives as JSON text pieces; the start's ``input`` is a placeholder.
            return [ModelDelta("tool_call", "", index=block.call, name=str(data.get("name")))]
        if kind == "text":
            text = str(data.get("text") or "")
            block.pieces.append(text)
            return [ModelDelta("text", text)] if text else []
        if kind == "thinking":
            text = str(data.get("thinking") or "")
            block.pieces.append(text)
            return [ModelDelta("reasoning", text)] if text else []
        return []

    def _usage(self, usage: dict[str, object]) -> None:
        for name in _USAGE_FIELDS:
            value = usage.get(name)
            if isinstance(value, int):
                self.usage[name] = value

    def message(self) -> dict[str, Any]:
        """The whole answer, as a ``message`` object."""
        content: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            data = dict(block.data)
            kind = data.get("type")
            if kind == "text":
                data["text"] = "".join(block.pieces)
            elif kind == "thinking":
                data["thinking"] = "".join(block.pieces)
            elif kind == "tool_use":
                data["input"] = "".join(block.pieces)
            content.append(data)
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": self.stop_reason,
            "usage": dict(self.usage),
        }
