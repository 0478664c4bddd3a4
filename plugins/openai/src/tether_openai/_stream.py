"""Streamed chat completions (``stream: true``): server-sent chunks into deltas and back into
one chat-completion object, which :func:`tether_openai._wire.parse_response` reads as it reads
an answer that was not streamed (so both ways give the same ``ModelResponse``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tether.models import ModelDelta

from ._json import json_array, json_object

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
    reasoning: list[str] = field(default_factory=list[str])
    refusal: list[str] = field(default_factory=list[str])
    calls: dict[int, _Call] = field(default_factory=dict[int, _Call])
    finish: str | None = None
    usage: dict[str, object] | None = None
    began: bool = False
    """Whether a chunk with choices was seen (a stream of chat-completion chunks)."""

    def feed(self, chunk: dict[str, Any]) -> list[ModelDelta]:
        """The deltas of one chunk (a ``chat.completion.chunk`` object)."""
        chunk_id = chunk.get("id")
        if self.id is None and isinstance(chunk_id, str):
            self.id = chunk_id
        usage = json_object(chunk.get("usage"))
        if usage is not None:
            self.usage = usage
        deltas: list[ModelDelta] = []
        choices = json_array(chunk.get("choices")) or []
        self.began = self.began or bool(choices)
        for raw in choices:
            choice = json_object(raw)
            if choice is None or choice.get("index", 0) != 0:
                continue
            delta = json_object(choice.get("delta")) or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.content.append(text)
                deltas.append(ModelDelta("text", text))
            thought = delta.get("reasoning_content")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                deltas.append(ModelDelta("reasoning", thought))
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refusal.append(refusal)
            for raw_call in json_array(delta.get("tool_calls")) or []:
                deltas.extend(self._call_piece(raw_call))
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                self.finish = finish
        return deltas

    def _call_piece(self, raw: object) -> list[ModelDelta]:
        piece = json_object(raw)
        if piece is None:
            return []
        index = piece.get("index", len(self.calls))
        if not isinstance(index, int):
            return []
        call = self.calls.setdefault(index, _Call())
        call_id = piece.get("id")
        if isinstance(call_id, str):
            call.id = call_id
        function = json_object(piece.get("function")) or {}
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

    @property
    def finished(self) -> bool:
        """Whether the answer's end was seen (a finish reason)."""
        return self.finish is not None

    def completion(self) -> dict[str, Any]:
        """The whole answer, as a chat completion."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.content) if self.content else None,
        }
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = [
                {
                    **({"id": call.id} if call.id is not None else {}),
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
