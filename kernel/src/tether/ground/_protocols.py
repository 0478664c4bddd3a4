"""Whether an object implements a runtime-checkable protocol, answered once per class.

On Python 3.11, ``isinstance`` against a ``runtime_checkable`` protocol collects the protocol's
members and looks each one up on the object at every call (about 10 µs; even ``issubclass``
enters the ABC machinery's Python frame). tether asks such questions on hot paths (a model
closable at every hold, a run settling for every background child, a skill provider telling its
changes at every turn), and the members it asks about are methods of the object's class; so the
answer is kept per class and protocol.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeGuard, TypeVar

__all__ = ("implements", "takes_keyword")

_P = TypeVar("_P")

#: ``(class, protocol) -> answer``: a handful of classes per protocol in one process.
_ANSWERS: dict[tuple[type, type], bool] = {}


def implements(obj: object, protocol: type[_P]) -> TypeGuard[_P]:
    """``isinstance(obj, protocol)``, answered once per class of ``obj``.

    For protocols whose members are methods (or class attributes): an instance that adds or
    removes a member on itself keeps its class's answer."""
    key = (type(obj), protocol)
    known = _ANSWERS.get(key)
    if known is None:
        known = _ANSWERS[key] = isinstance(obj, protocol)
    return known


#: ``(function, keyword) -> answer``: a plugin's few functions and methods.
_KEYWORDS: dict[tuple[object, str], bool] = {}


def takes_keyword(function: Callable[..., Any], keyword: str) -> bool:
    """Whether ``function`` can be called with ``keyword=...`` (a parameter of that name that
    is not positional-only, or ``**kwargs``), answered once per function: a contract that
    grows a keyword (a skill provider's ``caller``) calls a plugin written before it as it
    always did. Pass the class's function (``type(obj).method``), not a bound method, to
    answer once per class."""
    key = (function, keyword)
    known = _KEYWORDS.get(key)
    if known is None:
        try:
            parameters = list(inspect.signature(function).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature: called as before
            parameters = []
        known = _KEYWORDS[key] = any(
            p.kind is p.VAR_KEYWORD or (p.name == keyword and p.kind is not p.POSITIONAL_ONLY)
            for p in parameters
        )
    return known
