"""Whether an object implements a runtime-checkable protocol, answered once per class.

On Python 3.11, ``isinstance`` against a ``runtime_checkable`` protocol collects the protocol's
members and looks each one up on the object at every call (about 10 µs; even ``issubclass``
enters the ABC machinery's Python frame). tether asks such questions on hot paths (a model
closable at every hold, a run settling for every background child, a skill provider telling its
changes at every turn), and the members it asks about are methods of the object's class; so the
answer is kept per class and protocol.
"""

from __future__ import annotations

from typing import TypeGuard, TypeVar

__all__ = ("implements",)

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
