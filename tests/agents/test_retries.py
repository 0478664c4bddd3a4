"""Retrying a recoverable model failure: exponential backoff with jitter inside a time budget,
a server's ``retry_after`` honoured, and a cancelled turn never left waiting."""

from __future__ import annotations

import time

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.agents import AgentLimits
from tether.agents._step import retry_pause
from tether.errors import ErrorCode, ModelError
from tether.models import FunctionModel, ModelResponse
from tether.testing import scaled

pytestmark = pytest.mark.anyio


def transient(retry_after: float | None = None, *, recoverable: bool = True) -> ModelError:
    return ModelError(
        ErrorCode.MODEL_REQUEST_FAILED,
        "HTTP 429 too many requests",
        recoverable=recoverable,
        retry_after=retry_after,
    )


def failing(times: int, error: ModelError, calls: list[float]) -> FunctionModel:
    """A model that raises ``error`` ``times`` times, then answers "ok"; records call times."""

    def answer(request):
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise error
        return ModelResponse(text="ok")

    return FunctionModel(answer)


async def end_error(store, agent) -> str:
    return (await store.events(agent.session_id))[-1].event.error


@given(attempt=st.integers(0, 20), backoff=st.floats(0.001, 5), cap=st.floats(0.01, 100))
def test_pauses_grow_exponentially_with_jitter_up_to_the_cap(attempt, backoff, cap):
    limits = AgentLimits(
        retry_backoff=backoff, retry_max_wait=cap, model_retries=99, retry_budget=1e9
    )
    full = min(backoff * 2**attempt, cap)
    pause = retry_pause(limits, attempt, 0.0, transient())
    assert full / 2 <= pause <= full


def test_a_pause_never_exceeds_what_is_left_of_the_budget():
    limits = AgentLimits(retry_backoff=10, retry_budget=12)
    assert retry_pause(limits, 0, 11.5, transient()) == pytest.approx(0.5)


def test_the_servers_retry_after_is_waited_at_least():
    limits = AgentLimits(retry_backoff=0.01)
    assert retry_pause(limits, 0, 0.0, transient(retry_after=7)) == 7


async def test_a_retry_waits_at_least_the_servers_retry_after(make_agent):
    calls: list[float] = []
    model = failing(1, transient(retry_after=0.3), calls)
    agent = await make_agent(model, limits=AgentLimits(retry_backoff=0.001))
    async with agent:
        assert await agent.run("go") == "completed"
    assert len(calls) == 2
    assert calls[1] - calls[0] >= 0.3


async def test_a_retry_after_beyond_the_budget_gives_up_at_once_saying_so(make_agent, store):
    calls: list[float] = []
    model = failing(5, transient(retry_after=120), calls)
    agent = await make_agent(model, limits=AgentLimits(retry_backoff=0.001, retry_budget=60))
    started = time.monotonic()
    async with agent:
        assert await agent.run("go") == "error"
    assert time.monotonic() - started < scaled(5)
    assert len(calls) == 1
    error = await end_error(store, agent)
    assert "HTTP 429 too many requests" in error
    assert "the server asked to wait 120 s before retrying" in error
    assert "60 s left of the retry budget" in error


async def test_retries_stop_when_the_budget_is_spent(make_agent, store):
    calls: list[float] = []
    model = failing(10_000, transient(), calls)
    limits = AgentLimits(
        retry_backoff=0.02, retry_max_wait=0.05, retry_budget=0.3, model_retries=99
    )
    agent = await make_agent(model, limits=limits)
    started = time.monotonic()
    async with agent:
        assert await agent.run("go") == "error"
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < scaled(5)
    assert 3 <= len(calls) < 99
    assert "retry budget" in await end_error(store, agent)


async def test_an_unrecoverable_error_is_not_retried(make_agent, store):
    calls: list[float] = []
    model = failing(5, transient(recoverable=False), calls)
    agent = await make_agent(model, limits=AgentLimits(retry_backoff=0.001))
    async with agent:
        assert await agent.run("go") == "error"
    assert len(calls) == 1
    assert await end_error(store, agent) == str(transient(recoverable=False))


async def test_cancelling_the_turn_during_a_backoff_pause_aborts_it_promptly(make_agent, store):
    failed = anyio.Event()

    def answer(request):
        failed.set()
        raise transient(retry_after=50)

    agent = await make_agent(FunctionModel(answer), limits=AgentLimits(retry_budget=60))
    async with agent:
        await agent.followup("go")
        await failed.wait()
        await anyio.wait_all_tasks_blocked()  # the turn now sleeps for its 50 s pause
        started = time.monotonic()
        await agent.cancel()
        await agent.when_idle()
        assert time.monotonic() - started < scaled(5)
    assert agent.loop.last_stop_reason == "aborted"
    assert (await store.events(agent.session_id))[-1].event.stop_reason == "aborted"
