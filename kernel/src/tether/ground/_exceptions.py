"""Exception groups: the one place their leaves are walked."""

from __future__ import annotations

__all__ = ("leaves",)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc`` when it is a group (nested groups flattened), in order; else
    ``[exc]``. An empty group is its own only leaf."""
    if isinstance(exc, BaseExceptionGroup):
        group: BaseExceptionGroup[BaseException] = exc  # pyright: ignore[reportUnknownVariableType]
        found = [leaf for inner in group.exceptions for leaf in leaves(inner)]
        return found or [exc]
    return [exc]
