"""``FunctionModel``: a model that is a Python callable (``function:pkg.module:fn``)."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import cast

from ..contracts import ModelRequest, ModelResponse
from ..errors import ErrorCode, ModelError
from ._stream import ModelDelta

__all__ = ("FunctionModel", "function_model_from_spec")

#: What a function model is: a function of the request that answers (a response or text, maybe
#: awaited), or streams (an async iterator of deltas, then the answer).
ModelFunction = Callable[
    [ModelRequest],
    "ModelResponse | str | Awaitable[ModelResponse | str] | AsyncIterator[ModelDelta | ModelResponse | str]",  # noqa: E501
]


class FunctionModel:
    """Calls ``function(request)``; a returned ``str`` becomes a text-only response. A function
    that returns an async iterator (an ``async def`` with ``yield``) streams: it yields
    :class:`~tether.models.ModelDelta` pieces, then its answer.

    The function may be sync or async and may raise :class:`tether.ModelError` to act out a
    failing provider. Every request it saw is kept in :attr:`requests` for assertions.
    """

    def __init__(
        self, function: ModelFunction, *, name: str | None = None, accepts_images: bool = False
    ) -> None:
        self._function = function
        self.accepts_images = accepts_images
        """Whether requests carry images (``Message.images``); else a note stands in."""
        self._is_async = inspect.iscoroutinefunction(function)
        self.name = name or f"function:{getattr(function, '__qualname__', 'anonymous')}"
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        result = await self._call(request)
        if isinstance(result, AsyncIterator):  # a streaming function, not streamed: its answer
            async for item in cast("AsyncIterator[object]", result):
                if not isinstance(item, ModelDelta):
                    return self._checked(item)
            return self._checked(None)
        return self._checked(result)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """The function's answer; a function that returns an async iterator streams it (its
        :class:`~tether.models.ModelDelta` pieces, then its answer, a ``ModelResponse`` or a
        ``str``, last)."""
        result = await self._call(request)
        if isinstance(result, AsyncIterator):
            last: object = None
            async for item in cast("AsyncIterator[object]", result):
                if isinstance(item, ModelDelta):
                    yield item
                else:
                    last = item
                    break
            yield self._checked(last)
            return
        yield self._checked(result)

    async def _call(self, request: ModelRequest) -> object:
        self.requests.append(request)
        # The function is the user's code: its result is checked, not trusted.
        result: object = self._function(request)
        if self._is_async or inspect.isawaitable(result):
            result = await cast("Awaitable[object]", result)
        return result

    def _checked(self, result: object) -> ModelResponse:
        if isinstance(result, str):
            return ModelResponse(text=result)
        if not isinstance(result, ModelResponse):
            raise ModelError(
                ErrorCode.MODEL_REQUEST_FAILED,
                f"{self.name} returned {type(result).__name__}, not a ModelResponse or str",
                remedy="return tether.models.ModelResponse(...) or a string (last, when streaming)",
            )
        return result


def function_model_from_spec(target: str, base: Path) -> FunctionModel:
    """``pkg.module:fn`` -> a :class:`FunctionModel` calling ``fn``; ``base`` is importable."""
    module_name, sep, attr = target.partition(":")
    if not sep or not _is_dotted_name(module_name) or not _is_dotted_name(attr):
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"function model {target!r} is not of the form module:function (a dotted module "
            "path, a colon, a function name)",
            remedy='write e.g. "function:my_package.models:echo"',
        )
    added = str(base) not in sys.path
    if added:  # a module next to the profile (or in the current directory for --model)
        sys.path.insert(0, str(base))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the module's own code may raise anything while it runs
        found = isinstance(exc, ImportError) and getattr(exc, "name", None) == module_name
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"function model {target!r} cannot be imported: {type(exc).__name__}: {exc}",
            remedy="check the module path and that it is importable"
            if found
            else "fix the module (--debug shows the traceback)",
        ) from exc
    finally:
        if added:
            sys.path.remove(str(base))
    function: object = module
    for part in attr.split("."):
        try:
            function = getattr(function, part)
        except Exception as exc:
            raise ModelError(
                ErrorCode.MODEL_SPEC_UNKNOWN,
                f"function model {target!r} cannot be imported: module {module_name!r} has no "
                f"{attr!r} ({type(exc).__name__}: {exc})",
                remedy="check the function's name",
            ) from exc
    if not callable(function):
        raise ModelError(
            ErrorCode.MODEL_SPEC_UNKNOWN,
            f"function model {target!r} names a {type(function).__name__}, not a function",
            remedy="name a function that takes a ModelRequest and returns a ModelResponse or str",
        )
    return FunctionModel(cast(ModelFunction, function), name=f"function:{target}")


def _is_dotted_name(text: str) -> bool:
    """``a.b.c`` where every part is a Python identifier (no relative ``..a``, no spaces)."""
    return bool(text) and all(part.isidentifier() for part in text.split("."))
