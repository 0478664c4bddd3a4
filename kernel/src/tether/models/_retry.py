"""How long a model server asked to be left alone: its ``retry-after`` headers, read once for
every model adapter (tether-openai, tether-anthropic and tether-litellm read the same headers)."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping

__all__ = ("MAX_RETRY_AFTER", "retry_after_seconds")

#: The longest wait a server's answer may ask for, in seconds (a larger one is cut to this).
MAX_RETRY_AFTER = 3600.0


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``retry-after`` in seconds or
    as an HTTP date; ``None`` when absent or unreadable. Capped at :data:`MAX_RETRY_AFTER`.
    ``headers`` is looked up by lower-case name (``httpx.Headers`` ignores case)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _number(millis)
        if seconds is not None:
            return min(seconds / 1000, MAX_RETRY_AFTER)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is None:
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        seconds = max(0.0, when.timestamp() - (time.time() if now is None else now))
    return min(seconds, MAX_RETRY_AFTER)


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None
