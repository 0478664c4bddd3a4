"""A model for the worker tests: its first step calls the ``quick`` tool; the first request of
its second step leaves a marker, then thinks for ten minutes (a worker to be killed in a later
model step); every later request answers."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tether.models import ModelRequest, ModelResponse, ToolCall


def answer(request: ModelRequest) -> ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return ModelResponse(
            tool_calls=(ToolCall(id="call_1", name="quick", arguments={"text": "step"}),)
        )
    marker = Path(os.environ["TETHER_TEST_MARKERS"]) / "second-step"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(600)
    return ModelResponse(text="went on")
