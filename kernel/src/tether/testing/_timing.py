"""Time limits of a test suite, scaled by one setting, and waiting on a condition.

A time limit in a test is a hang detector, not a performance claim: on a machine whose cores are
busy (a CI runner, two engineers running suites at once) the same test takes several times as
long. Every limit of tether's suite goes through :func:`scaled`, so one environment variable
makes all of them generous at once:

* ``TETHER_TEST_TIME_SCALE``: a positive number every time limit is multiplied by;
* unset, the factor is 1 on a developer's machine and :data:`CI_TIME_SCALE` under ``CI=true``.

:func:`wait_until` and :func:`wait_until_sync` poll a condition until it holds, with a scaled
deadline, instead of sleeping a fixed time and hoping the work is done.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = (
    "CI_TIME_SCALE",
    "TIME_SCALE_ENV",
    "scaled",
    "time_scale",
    "wait_until",
    "wait_until_sync",
)

T = TypeVar("T")

#: The environment variable that scales every time limit of the suite.
TIME_SCALE_ENV = "TETHER_TEST_TIME_SCALE"

#: The factor when ``CI=true`` and ``TETHER_TEST_TIME_SCALE`` is unset. CI runners share their
#: cores; a limit four times too generous costs nothing while the suite passes and only delays
#: the report of a real hang.
CI_TIME_SCALE = 4.0

#: How often the waits poll their condition (seconds; not scaled: it is a latency, not a limit).
POLL_INTERVAL = 0.02


def time_scale() -> float:
    """The factor every time limit of the suite is multiplied by (read from the environment on
    each call, so a test or a subprocess sees the value it was started with)."""
    text = os.environ.get(TIME_SCALE_ENV, "").strip()
    if not text:
        return CI_TIME_SCALE if os.environ.get("CI", "").lower() == "true" else 1.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{TIME_SCALE_ENV}={text!r} is not a positive number: set it to the factor every "
            f"time limit of the test suite is multiplied by (for example 3), or unset it"
        )
    return value


def scaled(seconds: float) -> float:
    """``seconds`` times :func:`time_scale`: the time limit to use for a wait or a deadline."""
    return seconds * time_scale()


async def wait_until(condition: Callable[[], T], what: str, timeout: float = 30) -> T:
    """Poll ``condition`` until it returns something truthy, and return that; after
    ``scaled(timeout)`` seconds fail with ``TimeoutError`` naming ``what`` (what was awaited)."""
    import anyio

    limit = scaled(timeout)
    with anyio.move_on_after(limit):
        while not (result := condition()):
            await anyio.sleep(POLL_INTERVAL)
        return result
    raise TimeoutError(f"waited {limit:g} s for {what}")


def wait_until_sync(condition: Callable[[], T], what: str, timeout: float = 30) -> T:
    """:func:`wait_until` for code that is not async (a test driving subprocesses): blocks the
    thread between polls."""
    limit = scaled(timeout)
    deadline = time.monotonic() + limit
    while not (result := condition()):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"waited {limit:g} s for {what}")
        time.sleep(POLL_INTERVAL)
    return result
