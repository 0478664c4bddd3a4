"""The built-in plugin ``tether.models``: the ``function:`` and ``scripted:`` model providers.

Every kernel loads it in its global layer, after the profile's plugins, exactly as it loads an
installed plugin (see :data:`tether.loading.BUILTIN_PLUGINS`): a plugin that offers
``function`` or ``scripted`` itself, in any layer an agent sees, wins.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..contracts import ModelProvider
from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ._function import FunctionModel
    from ._scripted import ScriptedModel

__all__ = ("BUILTIN_MODEL_PROVIDERS", "tether_model_providers")


# The model classes are imported when a model is made, not when the kernel loads the plugin.


def _function(name: str, base: Path) -> FunctionModel:
    from ._function import function_model_from_spec

    return function_model_from_spec(name, base)


def _scripted(name: str, base: Path) -> ScriptedModel:
    from ._scripted import ScriptedModel

    path = Path(name).expanduser()
    return ScriptedModel.from_file(path if path.is_absolute() else base / path)


#: The model providers of the built-in plugin: ``function:`` and ``scripted:``.
BUILTIN_MODEL_PROVIDERS: tuple[ModelProvider, ...] = (
    ModelProvider("function", _function, "a Python callable module:function"),
    ModelProvider("scripted", _scripted, "a TOML/JSON script of steps"),
)


@hookimpl
def tether_model_providers() -> Iterable[ModelProvider]:
    """The built-in model providers."""
    return BUILTIN_MODEL_PROVIDERS
