"""The garbage collector's thresholds while a runtime is open.

CPython's cyclic collector scans every tracked object again in each collection of an older
generation. A process with thousands of live children holds hundreds of thousands of them (a
live background child is about 120), and with the default thresholds (700, 10, 10) the
collector runs so often over that growing heap that it took half the CPU at 4,000 children and
made 4,000 children cost 5.9 times what 1,000 cost (``benchmarks/subagents.py``). With the first
threshold at 50,000 it takes under a tenth and the cost is linear (ratio 4.0). Collections get
rarer, not skipped: cyclic garbage waits longer (at most about 50,000 new objects) before it is
freed.

While at least one runtime is open with ``tune_collector=True`` (the default of
:meth:`Runtime.open`), the thresholds are :data:`RUNTIME_THRESHOLDS`; the previous ones come
back when the last such runtime closes, unless someone changed them in between (theirs stay).
A process whose collector is disabled, or whose first threshold is already higher, is left as
it is.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from contextlib import contextmanager

__all__ = ("RUNTIME_THRESHOLDS", "tuned_collector")

#: The collector's thresholds while a runtime is open.
RUNTIME_THRESHOLDS: tuple[int, int, int] = (50_000, 20, 20)


class _Tuning:
    """How many open runtimes tuned the collector, and what to restore after the last."""

    def __init__(self) -> None:
        self.holders = 0
        self.saved: tuple[int, int, int] | None = None

    def enter(self) -> None:
        self.holders += 1
        if self.holders > 1:
            return
        current = gc.get_threshold()
        if gc.isenabled() and current[0] < RUNTIME_THRESHOLDS[0]:
            self.saved = current
            gc.set_threshold(*RUNTIME_THRESHOLDS)

    def leave(self) -> None:
        self.holders -= 1
        if self.holders > 0 or self.saved is None:
            return
        saved, self.saved = self.saved, None
        if gc.get_threshold() == RUNTIME_THRESHOLDS:
            gc.set_threshold(*saved)


_TUNING = _Tuning()


@contextmanager
def tuned_collector() -> Generator[None]:
    """The collector at :data:`RUNTIME_THRESHOLDS` for the block (see the module docstring)."""
    _TUNING.enter()
    try:
        yield
    finally:
        _TUNING.leave()
