"""Messages, tool calls and the request/response a model exchanges with the turn loop: the
value types every model plugin reads and writes (re-exported by :mod:`tether.models`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = (
    "FinishReason",
    "ImagePart",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "Role",
    "ToolCall",
    "ToolSchema",
    "Usage",
)

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_calls", "length", "refusal", "error"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """A call the model asks for: ``name(arguments)``, answered by a tool message with ``id``."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    invalid_arguments: str | None = None
    """The model's raw argument text when it was not a JSON object; the call then fails with
    an error result the model sees, and the tool does not run."""


class ImagePart(_Frozen):
    """An image a message carries next to its text (a tool's result, say): base64 ``data``
    of type ``mime_type``. Only models that say they take images see it (``Model``'s
    ``accepts_images``); the others read a note in the text instead."""

    mime_type: str
    data: str
    """The image, base64-encoded."""


class Message(_Frozen):
    """One message of a conversation, in the shape chat models share."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    """Assistant messages only: the tools the model called."""
    tool_call_id: str | None = None
    """Tool messages only: the call this message answers."""
    name: str | None = None
    """Tool messages: the tool's name."""
    is_error: bool = False
    """Tool messages: the tool failed and ``content`` says how."""
    images: tuple[ImagePart, ...] = ()
    """Images that come with the text (a tool's result); see :class:`ImagePart`."""


class ToolSchema(_Frozen):
    """What a model is told about a tool: its name, description and JSON Schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Usage(_Frozen):
    """Token accounting of one model response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    """Input tokens the provider served from its prompt cache (a subset of ``input_tokens``)."""
    cache_write_input_tokens: int = 0
    """Input tokens the provider wrote to its prompt cache (a subset of ``input_tokens``;
    providers that cache without being asked, such as OpenAI's, report none)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens + other.cache_write_input_tokens,
        )


class ModelRequest(_Frozen):
    """Everything a model sees for one step.

    ``system`` is the base prompt (instruction blocks then framework sections), byte-stable for a
    whole session; ``messages`` only grows from one step to the next.
    """

    system: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    tools: tuple[ToolSchema, ...] = ()
    max_output_tokens: int | None = None
    agent: str | None = None
    """The agent preset making the request (scripted models may key their steps by it)."""
    session_label: str | None = None
    """The session's label: for a delegated child, the task's short description."""
    purpose: Literal["turn", "compaction", "sampling"] = "turn"
    """``compaction``: the request asks for a summary of the conversation (its last message
    says so, docs/compaction.md); ``sampling``: a request a tool's MCP server asked the agent's
    model to answer (``sampling/createMessage``, docs/mcp.md), with the server's messages and
    no tools; ``turn``: an ordinary step."""
    earlier_answers: int = 0
    """How many answers of the session a compaction summary replaced: they are not among
    ``messages`` (a scripted model counts them to keep its place)."""


class ModelResponse(_Frozen):
    """One model answer: text and/or tool calls, usage, and why it stopped."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    """The tokens this request cost as the provider reported them; all zero when it reported
    none (a remote agent's model: the request is a message, not an inference)."""
    finish_reason: FinishReason = "stop"
    remote_usage: Usage | None = None
    """What the remote agent behind the model (an A2A or ACP agent) reported its own work on
    this request used, when it reported it: its models' tokens, not what tether sent it.
    Kept apart from ``usage`` (budgets and cache statistics count what tether sent)."""
