"""Models: the ``Model`` protocol, message types, ``FunctionModel`` and ``ScriptedModel``.

The contract (``Model`` and its optional parts, ``ModelProvider``, the message and request
types) is defined in :mod:`tether.contracts` and re-exported here under the same names.

Specs are ``provider:name`` strings, made by the model providers plugins offer through the
``tether_model_providers`` hook. The kernel's built-in plugin ``tether.models`` (``_plugin.py``)
offers ``function:module:fn`` and ``scripted:PATH``, loaded like any other plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ground import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from ..contracts import (
        ClosableModel,
        FinishReason,
        ImagePart,
        Message,
        Model,
        ModelProvider,
        ModelRequest,
        ModelResponse,
        ProbingModel,
        RemoteAgent,
        RemoteAgentModel,
        Role,
        SessionBoundModel,
        ToolCall,
        ToolSchema,
        Usage,
    )
    from ._function import (
        FunctionModel,
        function_model_from_spec,
    )
    from ._plugin import (
        BUILTIN_MODEL_PROVIDERS,
    )
    from ._prices import BUILTIN_PRICES, price_for
    from ._protocol import (
        FIRST_PARTY_MODEL_PREFIXES,
        find_model_provider,
        is_session_bound,
        remote_agent_of,
        resolve_model,
    )
    from ._retry import (
        MAX_RETRY_AFTER,
        retry_after_seconds,
    )
    from ._scripted import (
        ScriptedModel,
        ScriptStep,
    )
    from ._stream import (
        DeltaKind,
        ModelDelta,
        StreamingModel,
        stream_answer,
        streamed,
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
    "BUILTIN_PRICES",
    "BUILTIN_WINDOWS",
    "FIRST_PARTY_MODEL_PREFIXES",
    "MAX_RETRY_AFTER",
    "ClosableModel",
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
    "ProbingModel",
    "RemoteAgent",
    "RemoteAgentModel",
    "Role",
    "ScriptStep",
    "ScriptedModel",
    "SessionBoundModel",
    "StreamingModel",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "estimate_tokens",
    "find_model_provider",
    "function_model_from_spec",
    "is_session_bound",
    "message_tokens",
    "messages_tokens",
    "price_for",
    "remote_agent_of",
    "resolve_model",
    "retry_after_seconds",
    "schema_tokens",
    "stream_answer",
    "streamed",
    "window_for",
)

# The names are imported when first used: loading a kernel registers the built-in plugin
# (_plugin.py) without building the message models (pydantic) or the model classes.
# A value starting with a dot is a module beside this package (the contracts room).
_LAZY = {
    "BUILTIN_MODEL_PROVIDERS": "_plugin",
    "BUILTIN_PRICES": "_prices",
    "BUILTIN_WINDOWS": "_windows",
    "price_for": "_prices",
    "MAX_RETRY_AFTER": "_retry",
    "FIRST_PARTY_MODEL_PREFIXES": "_protocol",
    "ContextWindow": "_windows",
    "DeltaKind": "_stream",
    "FinishReason": ".contracts",
    "FunctionModel": "_function",
    "ImagePart": ".contracts",
    "Message": ".contracts",
    "Model": ".contracts",
    "ModelDelta": "_stream",
    "ModelProvider": ".contracts",
    "ProbingModel": ".contracts",
    "RemoteAgent": ".contracts",
    "RemoteAgentModel": ".contracts",
    "ClosableModel": ".contracts",
    "SessionBoundModel": ".contracts",
    "ModelRequest": ".contracts",
    "ModelResponse": ".contracts",
    "Role": ".contracts",
    "ScriptStep": "_scripted",
    "ScriptedModel": "_scripted",
    "StreamingModel": "_stream",
    "ToolCall": ".contracts",
    "ToolSchema": ".contracts",
    "Usage": ".contracts",
    "estimate_tokens": "_windows",
    "find_model_provider": "_protocol",
    "is_session_bound": "_protocol",
    "function_model_from_spec": "_function",
    "message_tokens": "_windows",
    "messages_tokens": "_windows",
    "remote_agent_of": "_protocol",
    "resolve_model": "_protocol",
    "retry_after_seconds": "_retry",
    "schema_tokens": "_windows",
    "stream_answer": "_stream",
    "streamed": "_stream",
    "window_for": "_windows",
}


__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, globals(), __all__)
