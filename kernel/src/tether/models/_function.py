"""``FunctionModel``: a model that is a Python callable (``function:pkg.module:fn``)."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..errors import ErrorCode, ModelError
from ._types import ModelRequest, ModelResponse

__all__ = ("FunctionModel", "function_model_from_spec")

ModelFunction = Callable[[ModelRequest], "ModelResponse | str | Awaitable[ModelResponse | str]"]


class FunctionModel:
    """Calls ``function(request)``; a returned ``str`` becomes a text-only response.

    The function may be sync or async and may raise :class:`tether.ModelError` to act out a
    failing provider. Every request it saw is kept in :attr:`requests` for assertions.
    """

    def __init__(self, function: ModelFunction, *, name: str | None = None) -> None:
        self._function = function
        self._is_async = inspect.iscoroutinefunction(function)
        self.name = name or f"function:{getattr(function, '__qualname__', 'anonymous')}"
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        result = self._function(request)
        if self._is_async or inspect.isawaitable(result):
            result = await result  # type: ignore[misc]
        if isinstance(result, str):
            return ModelResponse(text=result)
        if not isinstance(result, ModelResponse):
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name} returned {type(result).__name__}, not a ModelResponse or str",
                remedy="return tether.models.ModelResponse(...) or a string",
            )
        return result


def function_model_from_spec(target: str, base: Path) -> FunctionModel:
    """``pkg.module:fn`` -> a :class:`FunctionModel` calling ``fn``; ``base`` is importable."""
    module_name, sep, attr = target.partition(":")
    if not sep:
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"function model {target!r} must be module:function",
            remedy='write e.g. "function:my_package.models:echo"',
        )
    added = str(base) not in sys.path
    if added:  # a module next to the profile (or in the current directory for --model)
        sys.path.insert(0, str(base))
    try:
        module = importlib.import_module(module_name)
        function = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"function model {target!r} cannot be imported: {type(exc).__name__}: {exc}",
            remedy="check the module path and that it is importable",
        ) from exc
    finally:
        if added:
            sys.path.remove(str(base))
    return FunctionModel(function, name=f"function:{target}")
