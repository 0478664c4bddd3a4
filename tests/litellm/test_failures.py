"""Failures through LiteLLM as tether's :class:`ModelError`: what is worth a retry (with the wait
the server asked for) and what is not, each sent once (LiteLLM's retries and the OpenAI
client's under it are off: the turn loop retries)."""

from __future__ import annotations

import pytest

from tether.errors import ErrorCode, ModelError
from tether.models import ModelRequest
from tether_litellm import LiteLLMModel

from .conftest import LITELLM_WARNINGS, Answer, chunk, sse, streamed

pytestmark = [pytest.mark.anyio, LITELLM_WARNINGS]


def model(url: str, api_key: str | None = "sk-test") -> LiteLLMModel:
    return LiteLLMModel(
        "litellm:openai/gpt-4.1", "openai/gpt-4.1", api_base=url, api_key=api_key, timeout=30
    )


async def failure(url: str, api_key: str | None = "sk-test") -> ModelError:
    with pytest.raises(ModelError) as info:
        await model(url, api_key).request(ModelRequest())
    return info.value


async def test_a_rate_limit_is_recoverable_with_the_wait_it_asked_for_and_sent_once(server):
    server.queue("rate_limited_429.json", 429, headers={"retry-after": "3"})
    error = await failure(server.url)
    assert error.code is ErrorCode.MODEL_REQUEST_FAILED
    assert (error.recoverable, error.retry_after) == (True, 3.0)
    assert error.message == (
        f"litellm:openai/gpt-4.1: HTTP 429 from {server.url}: OpenAIException - Rate limit "
        "reached for requests"
    )
    assert len(server.requests) == 1  # no retry of LiteLLM's own


async def test_a_server_error_is_recoverable_with_a_wait_in_milliseconds(server):
    server.queue_body({"error": {"message": "upstream is down", "type": "server_error"}}, 503)
    server.answers[-1].headers["retry-after-ms"] = "1500"
    error = await failure(server.url)
    assert (error.recoverable, error.retry_after) == (True, 1.5)
    assert "HTTP 503" in error.message
    assert "upstream is down" in error.message
    assert len(server.requests) == 1


async def test_a_context_window_error_is_not_retried_and_says_how_to_compact(server):
    server.queue("openai_context_overflow_400.json", 400)
    error = await failure(server.url)
    assert error.code is ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert error.recoverable is False
    assert "maximum context length is 128000 tokens" in error.message
    assert error.remedy is not None
    assert "compaction" in error.remedy
    assert error.body is not None


async def test_a_rejected_key_is_not_retried_and_says_what_to_check(server):
    server.queue("openai_401.json", 401)
    error = await failure(server.url)
    assert (error.code, error.recoverable) == (ErrorCode.MODEL_REQUEST_FAILED, False)
    assert f"HTTP 401 from {server.url}: OpenAIException - Incorrect API key" in error.message
    assert error.remedy is not None
    assert "credentials" in error.remedy
    assert len(server.requests) == 1


async def test_no_key_at_all_is_a_configuration_error_not_a_retried_500(server):
    """The OpenAI client refuses to send without a key; LiteLLM reports it as a 500."""
    error = await failure(server.url, api_key=None)
    assert (error.code, error.recoverable) == (ErrorCode.MODEL_CONFIG_MISSING, False)
    assert "OPENAI_API_KEY" in error.message
    assert server.requests == []


async def test_a_port_nobody_listens_on_is_recoverable_and_named():
    error = await failure("http://127.0.0.1:9/v1")
    assert error.recoverable is True
    assert error.message.startswith("litellm:openai/gpt-4.1: cannot reach http://127.0.0.1:9/v1")


async def test_a_page_that_is_not_a_chat_completion_is_not_retried(server):
    server.answers.append(Answer(200, b"<html><body>Sign in</body></html>"))
    error = await failure(server.url)
    assert (error.code, error.recoverable) == (ErrorCode.MODEL_REQUEST_FAILED, False)
    assert f"the answer from {server.url} is not a chat completion" in error.message


async def test_a_stream_cut_before_its_end_is_recoverable(server):
    server.answers.append(Answer(body=sse(chunk({"role": "assistant", "content": "Hel"}))))
    with pytest.raises(ModelError) as info:
        await streamed(model(server.url), ModelRequest())
    assert info.value.recoverable is True
    assert "stream" in info.value.message


async def test_an_error_inside_a_stream_is_recoverable(server):
    server.answers.append(
        Answer(
            body=sse(
                chunk({"role": "assistant", "content": "Hel"}),
                {"error": {"message": "overloaded", "type": "server_error"}},
            )
        )
    )
    with pytest.raises(ModelError) as info:
        await streamed(model(server.url), ModelRequest())
    assert info.value.recoverable is True
    assert "overloaded" in info.value.message


async def test_a_rate_limit_before_a_stream_starts_is_the_same_as_a_whole_answers(server):
    server.queue("rate_limited_429.json", 429, headers={"retry-after": "2"})
    with pytest.raises(ModelError) as info:
        await streamed(model(server.url), ModelRequest())
    assert (info.value.recoverable, info.value.retry_after) == (True, 2.0)
    assert len(server.requests) == 1


async def test_a_timeout_is_recoverable(server):
    server.hang()
    slow = LiteLLMModel(
        "litellm:openai/gpt-4.1", "openai/gpt-4.1", api_base=server.url, api_key="k", timeout=0.5
    )
    with pytest.raises(ModelError) as info:
        await slow.request(ModelRequest())
    assert info.value.recoverable is True
    assert f"no answer from {server.url} in time" in info.value.message
