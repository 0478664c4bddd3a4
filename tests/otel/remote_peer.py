"""The model of the tethers tests/otel/test_remote.py serves (``function:`` this module's
``brain``): it answers ``done: TEXT`` and reports the usage of a provider that read 2,900
tokens (2,048 of them from its cache) and wrote 163, as a real model would."""

from __future__ import annotations

from tether.models import ModelRequest, ModelResponse, Usage

#: What the served model reports for each answer.
USAGE = Usage(input_tokens=2900, output_tokens=163, cached_input_tokens=2048)


def brain(request: ModelRequest) -> ModelResponse:
    users = [m for m in request.messages if m.role == "user"]
    return ModelResponse(text=f"done: {users[-1].content if users else ''}", usage=USAGE)
