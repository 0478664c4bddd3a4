"""tether-litellm's tests drive LiteLLM's ``openai/MODEL`` route against tests/openai's local
server (a real HTTP server on 127.0.0.1 that plays recorded chat-completions answers): the
route LiteLLM takes for every OpenAI-compatible API, with ``api_base`` pointing at it. Nothing
leaves the machine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.models import ModelDelta, ModelRequest, ModelResponse

from ..openai.conftest import RECORDED, Answer, RecordedServer, server

__all__ = (
    "LITELLM_WARNINGS",
    "RECORDED",
    "Answer",
    "RecordedServer",
    "as_stream",
    "chunk",
    "server",
    "sse",
    "streamed",
)

#: Warnings LiteLLM's own code raises as it works (the suite turns warnings into errors):
#: pydantic's about its ``ReadOnly`` TypedDicts, which tether_litellm silences for the process
#: when it imports LiteLLM (pytest puts its own filters back for each test), and the
#: deprecations of the pydantic and Python APIs it calls, hidden outside tests.
LITELLM_WARNINGS = pytest.mark.filterwarnings(
    r"ignore:.*`ReadOnly` qualifier:UserWarning:pydantic\.",
    r"ignore::DeprecationWarning:litellm\.",
)

#: The variables LiteLLM's OpenAI route reads; a test sets the ones it needs.
OPENAI_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORGANIZATION")


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch):
    for name in OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)


def sse(*chunks: Any, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764460000,
        "model": "deepseek-chat",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def as_stream(name: str) -> bytes:
    """A recorded whole answer (tests/fixtures/openai) as the stream a server sends for it:
    the message in one delta, the finish reason, then the usage."""
    completion = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    (choice,) = completion["choices"]
    first = chunk(choice["message"])
    last = chunk({}, finish=choice["finish_reason"])
    usage = {**chunk({}), "choices": [], "usage": completion["usage"]}
    for piece in (first, last, usage):
        piece["id"] = completion["id"]
    return sse(first, last, usage)


async def streamed(model: Any, request: ModelRequest) -> tuple[list[ModelDelta], ModelResponse]:
    deltas: list[ModelDelta] = []
    answer: ModelResponse | None = None
    async for item in model.stream(request):
        if isinstance(item, ModelDelta):
            deltas.append(item)
        else:
            answer = item
    assert answer is not None
    return deltas, answer
