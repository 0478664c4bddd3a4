"""Context windows: how many tokens a model takes, and how tether counts what it sends.

A model's window comes, first found, from: the agent's ``context_window`` (profile), the model
object's own ``context_window`` attribute (a plugin's model that knows it), or the built-in
table below, matched on the longest prefix of the model's name (the part of the spec after the
provider: ``deepseek:deepseek-chat`` -> ``deepseek-chat``). Unknown: no budget is kept.

Counting (:func:`estimate_tokens`, :func:`message_tokens`): about four bytes of UTF-8 a token
(so about four ASCII characters, and less than one CJK character), four tokens of framing per
message, the call's name and JSON arguments for each tool call, and 1,000 tokens per image. It
is an estimate; an agent counts exactly what the provider reported for its last request and
estimates only what was appended since (docs/compaction.md, "Counting").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from ..contracts import Message, ToolSchema

__all__ = (
    "BUILTIN_WINDOWS",
    "ContextWindow",
    "estimate_tokens",
    "message_tokens",
    "messages_tokens",
    "schema_tokens",
    "window_for",
)

#: The built-in table: model-name prefix -> (context window, output limit), in tokens.
#: The providers' published figures for the first-party models tether speaks to.
BUILTIN_WINDOWS: dict[str, tuple[int, int]] = {
    "deepseek-chat": (128_000, 8_192),
    "deepseek-reasoner": (128_000, 65_536),
    "gpt-5": (400_000, 128_000),
    "gpt-4.1": (1_047_576, 32_768),
    "gpt-4o": (128_000, 16_384),
    "gpt-4-turbo": (128_000, 4_096),
    "gpt-4": (8_192, 8_192),
    "gpt-3.5-turbo": (16_385, 4_096),
    "o1": (200_000, 100_000),
    "o3": (200_000, 100_000),
    "o4-mini": (200_000, 100_000),
    # Anthropic's Claude models (their 1M-token windows are a beta opt-in: 200,000 here).
    "claude-3": (200_000, 4_096),
    "claude-3-5": (200_000, 8_192),
    "claude-3-7": (200_000, 64_000),
    "claude-opus-4": (200_000, 32_000),
    "claude-opus-4-5": (200_000, 64_000),
    "claude-sonnet-4": (200_000, 64_000),
    "claude-haiku-4": (200_000, 64_000),
    # Google's Gemini models (input limit, output limit), through tether-openai's gemini: preset.
    "gemini-2.5": (1_048_576, 65_536),
    "gemini-2.0-flash": (1_048_576, 8_192),
    "gemini-1.5-pro": (2_097_152, 8_192),
    "gemini-1.5-flash": (1_048_576, 8_192),
}
#: Tokens a message costs beyond its text (role and framing).
MESSAGE_OVERHEAD = 4
#: Tokens counted for one image.
IMAGE_TOKENS = 1_000
#: The output reserve when the model's output limit is unknown.
DEFAULT_OUTPUT_RESERVE = 4_096


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """A model's context window and output limit, and where the figures came from."""

    tokens: int
    """Input and output together, as the provider counts them."""
    output: int | None
    """The longest answer the model writes (``None``: unknown)."""
    source: Literal["agent", "model", "table"]
    """``agent``: the profile's ``context_window``; ``model``: the model object said;
    ``table``: tether's built-in table."""

    def reserve(self, max_output_tokens: int | None = None) -> int:
        """Tokens kept free for the answer: the model's output limit (else 4,096), or the
        request's ``max_output_tokens`` when smaller, and never more than a quarter of the
        window."""
        reserve = self.output or DEFAULT_OUTPUT_RESERVE
        if max_output_tokens is not None:
            reserve = min(reserve, max_output_tokens)
        return min(reserve, self.tokens // 4)

    def budget(self, max_output_tokens: int | None = None) -> int:
        """The most input tokens a request may carry: the window less the reserve."""
        return self.tokens - self.reserve(max_output_tokens)


def window_for(spec: str | None, model: object, override: int | None) -> ContextWindow | None:
    """The window of the model ``spec`` names (``model`` is the model object): the agent's
    ``override``, the model's ``context_window`` attribute, or the built-in table."""
    output = _model_output(model)
    table = _from_table(spec or getattr(model, "name", None))
    if output is None and table is not None:
        output = table[1]
    if override is not None:
        return ContextWindow(override, output, "agent")
    told = getattr(model, "context_window", None)
    if isinstance(told, int) and not isinstance(told, bool) and told > 0:
        return ContextWindow(told, output, "model")
    if table is not None:
        return ContextWindow(table[0], output, "table")
    return None


def _model_output(model: object) -> int | None:
    told = getattr(model, "max_output_tokens", None)
    if isinstance(told, int) and not isinstance(told, bool) and told > 0:
        return told
    return None


def _from_table(spec: object) -> tuple[int, int] | None:
    return longest_prefix(model_name(spec), BUILTIN_WINDOWS)


_T = TypeVar("_T")


def model_name(spec: object) -> str:
    """The model's name in a spec, as the built-in tables match it: the part after the
    provider, without an ``openai-compatible:MODEL@URL`` spec's URL, in lower case (``""``
    for no spec)."""
    if not isinstance(spec, str):
        return ""
    name = spec.partition(":")[2] or spec
    return name.partition("@")[0].lower()


def longest_prefix(name: str, table: Mapping[str, _T]) -> _T | None:
    """The entry of ``table`` whose key (a model-name prefix) is the longest start of
    ``name``; ``None`` when none is."""
    if not name:
        return None
    best: tuple[int, _T] | None = None
    for prefix, value in table.items():
        if name.startswith(prefix.lower()) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), value)
    return None if best is None else best[1]


def estimate_tokens(text: str) -> int:
    """About four bytes of UTF-8 a token (rounded up)."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
    return (size + 3) // 4


def message_tokens(message: Message) -> int:
    """The estimated tokens of one message (see the module docstring)."""
    tokens = MESSAGE_OVERHEAD + estimate_tokens(message.content)
    for call in message.tool_calls:
        arguments = call.invalid_arguments
        if arguments is None:
            arguments = json.dumps(call.arguments, ensure_ascii=False) if call.arguments else ""
        tokens += MESSAGE_OVERHEAD + estimate_tokens(call.name) + estimate_tokens(arguments)
    if message.images:
        tokens += IMAGE_TOKENS * len(message.images)
    return tokens


def messages_tokens(messages: Iterable[Message]) -> int:
    return sum(message_tokens(message) for message in messages)


def schema_tokens(system: Sequence[str], tools: Sequence[ToolSchema]) -> int:
    """The estimated tokens of a base prompt and a tool list."""
    tokens = sum(estimate_tokens(text) + MESSAGE_OVERHEAD for text in system)
    for tool in tools:
        tokens += estimate_tokens(json.dumps(tool.model_dump(), ensure_ascii=False))
    return tokens
