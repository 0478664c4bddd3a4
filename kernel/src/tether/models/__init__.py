"""Models: the ``Model`` protocol, message types, ``FunctionModel`` and ``ScriptedModel``.

Specs are ``provider:name`` strings. The kernel itself provides ``function:module:fn`` and
``scripted:PATH``; plugins add more through the ``tether_model_providers`` hook.
"""

from __future__ import annotations

from pathlib import Path

from ._function import FunctionModel, function_model_from_spec
from ._protocol import (
    FIRST_PARTY_MODEL_PREFIXES,
    Model,
    ModelProvider,
    find_model_provider,
    resolve_model,
)
from ._scripted import ScriptedModel, ScriptStep
from ._types import (
    FinishReason,
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    ToolCall,
    ToolSchema,
    Usage,
)

__all__ = (
    "BUILTIN_MODEL_PROVIDERS",
    "FIRST_PARTY_MODEL_PREFIXES",
    "FinishReason",
    "FunctionModel",
    "Message",
    "Model",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "Role",
    "ScriptStep",
    "ScriptedModel",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "find_model_provider",
    "function_model_from_spec",
    "resolve_model",
)


def _scripted(name: str, base: Path) -> ScriptedModel:
    path = Path(name).expanduser()
    return ScriptedModel.from_file(path if path.is_absolute() else base / path)


#: Model providers the kernel ships: ``function:`` and ``scripted:``.
BUILTIN_MODEL_PROVIDERS: tuple[ModelProvider, ...] = (
    ModelProvider("function", function_model_from_spec, "a Python callable module:function"),
    ModelProvider("scripted", _scripted, "a TOML/JSON script of steps"),
)
