"""Models: the ``Model`` protocol, message types, ``FunctionModel`` and ``ScriptedModel``.

Specs are ``provider:name`` strings, made by the model providers plugins offer through the
``tether_model_providers`` hook. The kernel's built-in plugin ``tether.models`` (``_plugin.py``)
offers ``function:module:fn`` and ``scripted:PATH``, loaded like any other plugin.
"""

from __future__ import annotations

from ._function import FunctionModel, function_model_from_spec
from ._plugin import BUILTIN_MODEL_PROVIDERS
from ._protocol import (
    FIRST_PARTY_MODEL_PREFIXES,
    Model,
    ModelProvider,
    find_model_provider,
    resolve_model,
)
from ._scripted import ScriptedModel, ScriptStep
from ._stream import DeltaKind, ModelDelta, StreamingModel, stream_answer, streamed
from ._types import (
    FinishReason,
    ImagePart,
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    ToolCall,
    ToolSchema,
    Usage,
)
from ._windows import (
    BUILTIN_WINDOWS,
    ContextWindow,
    estimate_tokens,
    message_tokens,
    messages_tokens,
    schema_tokens,
    window_for,
)

__all__ = (
    "BUILTIN_MODEL_PROVIDERS",
    "BUILTIN_WINDOWS",
    "FIRST_PARTY_MODEL_PREFIXES",
    "ContextWindow",
    "DeltaKind",
    "FinishReason",
    "FunctionModel",
    "ImagePart",
    "Message",
    "Model",
    "ModelDelta",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "Role",
    "ScriptStep",
    "ScriptedModel",
    "StreamingModel",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "estimate_tokens",
    "find_model_provider",
    "function_model_from_spec",
    "message_tokens",
    "messages_tokens",
    "resolve_model",
    "schema_tokens",
    "stream_answer",
    "streamed",
    "window_for",
)
