"""Streamed answers: LiteLLM's chunks (OpenAI's ``chat.completion.chunk`` shape, whatever the
provider, as dicts) into deltas, and back into one chat completion, which
:func:`tether_litellm._wire.parse_completion` reads as it reads a whole answer (so both ways
give the same ``ModelResponse``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from tether.models import ModelDelta

__all__ = ("StreamAssembler",)


@dataclass
class _Call:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


@dataclass
class StreamAssembler:
    """Feeds on the chunks of one streamed answer (:meth:`feed`: the deltas they carry), and
    says what the whole answer was (:meth:`completion`)."""

    id: str | None = None
    content: list[str] = field(default_factory=list[str])
    refusal: list[str] = field(default_factory=list[str])
    calls: dict[int, _Call] = field(default_factory=dict[int, _Call])
    finish: str | None = None
    usage: dict[str, object] | None = None

    @property
    def finished(self) -> bool:
        """Whether the answer's end was seen (a finish reason)."""
        return self.finish is not None

    def feed(self, chunk: dict[str, Any]) -> list[ModelDelta]:
        """The deltas of one chunk."""
        chunk_id = chunk.get("id")
        if self.id is None and isinstance(chunk_id, str) and chunk_id:
            self.id = chunk_id
        usage = _object(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        deltas: list[ModelDelta] = []
        choices = chunk.get("choices")
        for raw in cast("list[object]", choices) if isinstance(choices, list) else []:
            choice = _object(raw)
            if choice is None or choice.get("index", 0) != 0:
                continue
            delta = _object(choice.get("delta")) or {}
            thought = delta.get("reasoning_content")
            if isinstance(thought, str) and thought:
                deltas.append(ModelDelta("reasoning", thought))
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.content.append(text)
                deltas.append(ModelDelta("text", text))
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refusal.append(refusal)
            calls = delta.get("tool_calls")
            for piece in cast("list[object]", calls) if isinstance(calls, list) else []:
                deltas.extend(self._call_piece(piece))
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish = finish
        return deltas

    def _call_piece(self, raw: object) -> list[ModelDelta]:
        piece = _object(raw)
        if piece is None:
            return []
        index = piece.get("index")
        if not isinstance(index, int):
            index = len(self.calls)
        call = self.calls.setdefault(index, _Call())
        call_id = piece.get("id")
        if isinstance(call_id, str) and call_id:
            call.id = call_id
        function = _object(piece.get("function")) or {}
        name = function.get("name")
        first = not call.name and isinstance(name, str) and bool(name)
        if first:
            call.name = str(name)
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else ""
        call.arguments.append(text)
        if not text and not first:
            return []
        return [ModelDelta("tool_call", text, index=index, name=call.name if first else None)]

    def completion(self) -> dict[str, Any]:
        """The whole answer, as a chat completion."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content else None,
        }
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for _, call in sorted(self.calls.items())
            ]
        body: dict[str, Any] = {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
        }
        if self.id is not None:
            body["id"] = self.id
        if self.usage is not None:
            body["usage"] = self.usage
        return body


def _object(value: object) -> dict[str, object] | None:
    if isinstance(value, dict):
        return cast("dict[str, object]", value)
    return None
