"""A model for the worker tests: the first request of a session leaves a marker, then thinks
for ten minutes (a worker to be killed in its model step); every later request answers."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tether.models import ModelRequest, ModelResponse


def answer(request: ModelRequest) -> ModelResponse:
    marker = Path(os.environ["TETHER_TEST_MARKERS"]) / "thinking"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)
    last = next(m for m in reversed(request.messages) if m.role == "user")
    return ModelResponse(text=f"thought about {last.content}")
