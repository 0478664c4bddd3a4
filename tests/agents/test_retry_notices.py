"""What a retry tells its listeners, and what the turn says once the retries are over
(issue 38: a dead endpoint looked like a hang, and the error after giving up said "the step
is sent again")."""

from __future__ import annotations

import pytest

from tether.agents import AgentLimits
from tether.agents._step import given_up_remedy, retry_reason
from tether.errors import ErrorCode, ModelError
from tether.models import FunctionModel, ModelDelta, ModelResponse

pytestmark = pytest.mark.anyio

LIMITS = AgentLimits(retry_backoff=0.001, retry_max_wait=0.01)


def unavailable(name: str, remedy: str | None = None) -> ModelError:
    return ModelError(
        ErrorCode.MODEL_REQUEST_FAILED,
        f"{name}: HTTP 503 from http://127.0.0.1:9/v1/chat/completions: Service Unavailable",
        recoverable=True,
        remedy=remedy,
    )


def failing(times: int, remedy: str | None = None) -> FunctionModel:
    calls: list[int] = []

    def answer(request):
        calls.append(1)
        if len(calls) <= times:
            raise unavailable("function:answer", remedy)
        return ModelResponse(text="ok")

    return FunctionModel(answer, name="function:answer")


async def test_each_retry_is_announced_with_why_how_long_and_which(make_agent):
    agent = await make_agent(failing(2), limits=LIMITS)
    heard: list[ModelDelta] = []
    agent.listen_deltas(heard.append)
    async with agent:
        assert await agent.run("go") == "completed"
    retries = [delta for delta in heard if delta.kind == "retry"]
    assert [(d.attempt, d.retries) for d in retries] == [(1, 8), (2, 8)]
    for delta in retries:
        assert 0 < delta.wait <= 0.01
        # The model's name is left out: the display knows which model it runs.
        assert (
            delta.text
            == "HTTP 503 from http://127.0.0.1:9/v1/chat/completions: Service Unavailable"
        )


async def test_the_error_after_the_last_retry_does_not_promise_another(make_agent, store):
    model = failing(99, remedy="check the server; the step is sent again")
    agent = await make_agent(model, limits=AgentLimits(model_retries=2, retry_backoff=0.001))
    async with agent:
        assert await agent.run("go") == "error"
    error = (await store.events(agent.session_id))[-1].event.error
    assert "(gave up after 2 retries)" in error
    assert "sent again" not in error
    assert "check the server [MODEL_REQUEST_FAILED]" in error


def test_a_remedy_that_only_promised_a_retry_becomes_a_check():
    assert given_up_remedy("the step is sent again; if it keeps failing, check the server") == (
        "if it keeps failing, check the server"
    )
    assert given_up_remedy("the step is sent again") == (
        "check the server (tether check --model SPEC asks whether it answers)"
    )
    assert given_up_remedy(None).startswith("check the server")
    assert given_up_remedy("raise [plugin.openai] read_timeout") == (
        "raise [plugin.openai] read_timeout"
    )


def test_a_retry_reason_is_one_short_line():
    error = ModelError(ErrorCode.MODEL_REQUEST_FAILED, "m: boom\n" + "x" * 500, recoverable=True)
    reason = retry_reason(error, "m")
    assert reason.startswith("boom x")
    assert "\n" not in reason
    assert len(reason) == 200
    assert reason.endswith("...")
