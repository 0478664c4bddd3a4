"""Real processes for the lifecycle tests: ``lifecycle_worker.py`` (killed half-way through
ending sessions) and the store tests' ``store_worker.py`` (a live holder), never left
running."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.store.conftest import Worker, spawn

__all__ = ("spawn", "spawn_lifecycle")

LIFECYCLE_WORKER = Path(__file__).with_name("lifecycle_worker.py")


@pytest.fixture
def spawn_lifecycle() -> Iterator[Callable[..., Worker]]:
    """Start lifecycle workers; each is killed and reaped when the test ends."""
    started: list[Worker] = []

    def start(*args: object) -> Worker:
        worker = Worker(*args, script=LIFECYCLE_WORKER)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()
