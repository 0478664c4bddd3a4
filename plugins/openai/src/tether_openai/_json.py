"""Parsed JSON, narrowed: what a server sent is checked, never trusted.

``json.loads`` and ``httpx.Response.json()`` return ``Any``; these narrow one value to the shape
the caller needs, or ``None``, so every field read afterwards is an ``object`` to check.
"""

from __future__ import annotations

from typing import cast

__all__ = ("json_array", "json_object")


def json_object(value: object) -> dict[str, object] | None:
    """``value`` if it is a JSON object, else ``None``."""
    if isinstance(value, dict):
        return cast("dict[str, object]", value)  # parsed JSON: an object's keys are strings
    return None


def json_array(value: object) -> list[object] | None:
    """``value`` if it is a JSON array, else ``None``."""
    if isinstance(value, list):
        return cast("list[object]", value)
    return None
