"""Answers recorded from a real llama.cpp ``llama-server`` (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M,
``--jinja``) on this machine, played back over real HTTP.

What the real server showed: plain answers come back as ordinary chat completions with
``usage`` and llama.cpp's extra ``timings``; asked to use a tool, this small model never sent a
structured ``tool_calls`` entry (not with ``tool_choice``, not with a system prompt) and wrote
the call as a fenced JSON block in its text instead, with ``finish_reason: "stop"``. Opting the
endpoint into ``tool_calls_in_text = "json"`` turns that text into a structured call.
"""

from __future__ import annotations

import pytest

from tether.models import Message, ModelRequest, ToolSchema
from tether_openai import ChatCompletionsModel

from .conftest import RECORDED

pytestmark = pytest.mark.anyio

MODEL = "/tmp/llama/model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
WEATHER = ToolSchema(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
)
ASK = ModelRequest(
    messages=(
        Message(role="user", content="What is the weather in Paris right now? Use the tool."),
    ),
    tools=(WEATHER,),
)


def model(url: str, **options: object) -> ChatCompletionsModel:
    return ChatCompletionsModel(f"local:{MODEL}", MODEL, base_url=url, **options)  # type: ignore[arg-type]


async def test_a_plain_answer_from_llama_server_is_read_with_its_usage(server):
    server.queue("llama_server_real_text.json")
    m = model(server.url)
    response = await m.request(
        ModelRequest(messages=(Message(role="user", content="Reverse the string s."),))
    )
    await m.aclose()
    assert response.text == "`s[::-1]`"
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (32, 6)


async def test_the_small_models_fenced_json_call_stays_text_unless_the_endpoint_opts_in(server):
    server.queue("llama_server_real_fenced_call.json")
    server.queue("llama_server_real_fenced_call.json")
    off, on = model(server.url), model(server.url, tool_calls_in_text="json")
    plain = await off.request(ASK)
    parsed = await on.request(ASK)
    await off.aclose()
    await on.aclose()
    assert (plain.tool_calls, plain.finish_reason) == ((), "stop")
    assert plain.text.startswith("```json")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert parsed.finish_reason == "tool_calls"
    assert parsed.text == plain.text  # the raw text is kept
    sent = server.bodies()[0]
    assert sent["tool_choice"] == "auto"  # llama-server gets the tools with tool_choice


async def test_check_model_reads_llama_servers_model_list(server):
    server.models = (RECORDED / "llama_server_real_models.json").read_bytes()
    m = model(server.url)
    said = await m.probe()
    await m.aclose()
    assert "1 model(s) listed" in said
    assert "is not among them" not in said  # the model is in the list
