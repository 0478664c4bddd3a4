"""What a run resolves with: the child's last real answer, its stop reason, structured output."""

from __future__ import annotations

import json

import pytest

from tether.errors import ErrorCode, ModelError
from tether.models import FunctionModel, Message, ModelResponse, ToolCall, Usage
from tether.subagents import SubagentResult, SubagentRuntime, SubagentStartRequest
from tether.subagents.local import final_output, parse_structured
from tether_spawn import SpawnProvider

from .conftest import is_child, last, make_parent

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


async def delegate_once(kernel, child_answer, **request):
    """Start one spawn child of a fresh parent and return (result, the model's requests)."""

    def answer(req):
        return child_answer(req) if is_child(req) else "parent"

    model = FunctionModel(answer)
    parent = await make_parent(kernel, model)
    runtime = SubagentRuntime()
    runtime.register_provider(SpawnProvider())
    async with parent:
        run = await runtime.start("spawn", SubagentStartRequest(parent=parent, **request))
        try:
            result = await run.result()
        finally:
            await run.dispose()
    return result, [r for r in model.requests if is_child(r)]


def test_selects_the_last_non_empty_message_past_a_later_empty_usage_only_message():
    messages = [
        Message(role="assistant", content="first"),
        Message(role="user", content="more"),
        Message(role="assistant", content="the answer"),
        Message(role="assistant", content="  "),
    ]
    assert final_output(messages) == "the answer"


def test_returns_nothing_when_the_child_produced_no_message():
    assert final_output([Message(role="user", content="task")]) == ""


async def test_the_output_skips_a_final_usage_only_message(kernel):
    def child(request):
        if request.messages[-1].role == "user":
            return ModelResponse(
                text="the answer",
                tool_calls=(ToolCall(id="c1", name="nope"),),
                finish_reason="tool_calls",
            )
        return ModelResponse(text="", usage=Usage(output_tokens=3))

    result, _ = await delegate_once(kernel, child, prompt="task")
    assert result == SubagentResult(output="the answer", stop_reason="completed")


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason"),
    [("length", "max-tokens"), ("refusal", "refusal"), ("error", "error")],
)
async def test_a_child_failure_resolves_with_its_stop_reason(kernel, finish_reason, stop_reason):
    def child(request):
        return ModelResponse(text="half an ans", finish_reason=finish_reason)

    result, _ = await delegate_once(kernel, child, prompt="task")
    assert result.stop_reason == stop_reason
    assert result.output == "half an ans"


async def test_a_failed_model_request_resolves_as_error_instead_of_raising(kernel):
    def child(request):
        raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "provider down")

    result, _ = await delegate_once(kernel, child, prompt="task")
    assert result.stop_reason == "error"
    assert result.output == ""


# ------------------------------------------------------------------ structured output


async def test_valid_json_becomes_the_structured_result(kernel):
    result, requests = await delegate_once(
        kernel, lambda r: '{"answer": "42"}', prompt="task", output_schema=SCHEMA
    )
    assert result.stop_reason == "completed"
    assert result.structured == {"answer": "42"}
    assert json.dumps(SCHEMA) in requests[0].messages[0].content  # the schema is in the note


async def test_a_fenced_json_block_is_accepted(kernel):
    result, _ = await delegate_once(
        kernel, lambda r: '```json\n{"answer": "fenced"}\n```', prompt="task", output_schema=SCHEMA
    )
    assert result.structured == {"answer": "fenced"}


async def test_an_invalid_answer_goes_back_with_its_problems_twice_then_fails(kernel):
    result, requests = await delegate_once(
        kernel, lambda r: '{"answer": 3}', prompt="task", output_schema=SCHEMA
    )
    assert len(requests) == 3
    corrections = [last(r) for r in requests[1:]]
    assert all("answer: 3 is not of type 'string'" in c for c in corrections)
    assert all(c.startswith("Your final answer must be JSON valid") for c in corrections)
    assert result.stop_reason == "error"
    assert result.structured is None
    assert result.output == '{"answer": 3}'
    assert "did not match the output schema" in (result.diagnostic or "")


async def test_a_corrected_answer_completes(kernel):
    answers = iter(["not json at all", '{"answer": "fixed"}'])
    result, requests = await delegate_once(
        kernel, lambda r: next(answers), prompt="task", output_schema=SCHEMA
    )
    assert "the answer is not JSON" in last(requests[1])
    assert result.stop_reason == "completed"
    assert result.structured == {"answer": "fixed"}


def test_parse_structured_reports_every_problem_with_its_path():
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
        "required": ["n", "s"],
    }
    value, problems = parse_structured('{"n": "x"}', schema)
    assert value == {"n": "x"}
    assert problems == ["n: 'x' is not of type 'integer'", "(root): 's' is a required property"]
