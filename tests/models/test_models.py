"""FunctionModel, ScriptedModel and model specs."""

from __future__ import annotations

import json

import pytest

from tether.errors import ErrorCode, ModelError
from tether.models import (
    BUILTIN_MODEL_PROVIDERS,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    resolve_model,
)

pytestmark = pytest.mark.anyio


def request(*contents, agent=None, assistants=0):
    messages = [Message(role="user", content=c) for c in contents]
    messages += [Message(role="assistant", content="a")] * assistants
    return ModelRequest(messages=tuple(messages), agent=agent)


async def test_function_model_accepts_sync_and_async_functions():
    async def answer(request):
        return ModelResponse(text="async")

    assert (await FunctionModel(lambda r: "sync").request(request("x"))).text == "sync"
    assert (await FunctionModel(answer).request(request("x"))).text == "async"


async def test_function_model_rejects_other_return_types():
    with pytest.raises(ModelError, match=r"returned int, not a ModelResponse or str") as info:
        await FunctionModel(lambda r: 3).request(request("x"))  # type: ignore[arg-type, return-value]
    assert info.value.code is ErrorCode.MODEL_REQUEST_FAILED


async def test_function_spec_imports_module_and_function(tmp_path, monkeypatch):
    (tmp_path / "my_models.py").write_text("def shout(request):\n    return 'HI'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model = resolve_model("function:my_models:shout", BUILTIN_MODEL_PROVIDERS)
    assert model.name == "function:my_models:shout"
    assert (await model.request(request("x"))).text == "HI"


async def test_function_spec_that_cannot_be_imported_is_reported():
    with pytest.raises(ModelError) as info:
        resolve_model("function:nowhere_at_all:fn", BUILTIN_MODEL_PROVIDERS)
    assert info.value.code is ErrorCode.MODEL_SPEC_UNKNOWN


async def test_a_spec_without_a_prefix_is_reported():
    with pytest.raises(ModelError, match=r"is not of the form provider:name"):
        resolve_model("gpt-4", BUILTIN_MODEL_PROVIDERS)


async def test_scripted_steps_play_in_order_by_assistant_count():
    model = ScriptedModel.from_data({"steps": [{"text": "one"}, {"text": "two"}]})
    assert (await model.request(request("a"))).text == "one"
    assert (await model.request(request("a", assistants=1))).text == "two"
    model.assert_consumed()


async def test_scripted_unexpected_call_is_an_error():
    model = ScriptedModel.from_data({"steps": [{"text": "one"}]})
    with pytest.raises(ModelError) as info:
        await model.request(request("a", assistants=1))
    assert info.value.code is ErrorCode.SCRIPT_MISMATCH
    assert "unexpected model call: the script has 1 step(s) and this is request 2" in str(
        info.value
    )


async def test_scripted_unconsumed_steps_are_an_error():
    model = ScriptedModel.from_data({"steps": [{"text": "one"}, {"text": "two"}]})
    await model.request(request("a"))
    with pytest.raises(ModelError, match=r"1 scripted step\(s\) were never played"):
        model.assert_consumed()


async def test_scripted_steps_can_be_keyed_by_agent():
    model = ScriptedModel.from_data(
        {"steps": [{"text": "default"}], "agents": {"helper": {"steps": [{"text": "helper"}]}}}
    )
    assert (await model.request(request("a", agent="helper"))).text == "helper"
    assert (await model.request(request("a", agent="main"))).text == "default"
    model.assert_consumed()


async def test_scripted_expect_checks_the_last_user_or_tool_message():
    model = ScriptedModel.from_data({"steps": [{"expect": "weather", "text": "sunny"}]})
    assert (await model.request(request("what is the weather"))).text == "sunny"
    with pytest.raises(ModelError, match=r"expects 'weather'"):
        await ScriptedModel.from_data({"steps": [{"expect": "weather"}]}).request(request("hi"))


async def test_scripted_tool_calls_get_ids_and_finish_reason():
    model = ScriptedModel.from_data(
        {"steps": [{"tool_calls": [{"name": "read", "arguments": {"path": "x"}}]}]}
    )
    response = await model.request(request("a"))
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls[0].id == "call_1_1"
    assert response.tool_calls[0].arguments == {"path": "x"}


async def test_an_invalid_script_names_the_key():
    with pytest.raises(ModelError) as info:
        ScriptedModel.from_data({"steps": [{"txt": "typo"}]})
    assert info.value.code is ErrorCode.SCRIPT_INVALID
    assert "steps[0].txt" in str(info.value)


async def test_scripted_spec_reads_toml_and_json_relative_to_base(tmp_path):
    (tmp_path / "s.toml").write_text('[[steps]]\ntext = "from toml"\n')
    (tmp_path / "s.json").write_text(json.dumps({"steps": [{"text": "from json"}]}))
    for name, text in (("s.toml", "from toml"), ("s.json", "from json")):
        model = resolve_model(f"scripted:{name}", BUILTIN_MODEL_PROVIDERS, base=tmp_path)
        assert (await model.request(request("a"))).text == text


async def test_a_missing_script_file_is_reported(tmp_path):
    with pytest.raises(ModelError, match=r"does not exist") as info:
        resolve_model("scripted:nope.toml", BUILTIN_MODEL_PROVIDERS, base=tmp_path)
    assert info.value.code is ErrorCode.SCRIPT_INVALID


async def test_a_request_past_the_end_leaves_nothing_unplayed():
    model = ScriptedModel.from_data({"steps": [{"text": "one"}, {"text": "two"}]})
    assert model.remaining() == {}  # never asked: nothing to report
    with pytest.raises(ModelError):
        await model.request(request("a", assistants=5))
    assert model.remaining() == {}


async def test_a_function_spec_imports_modules_next_to_the_profile(tmp_path):
    (tmp_path / "nearby_models.py").write_text("def answer(request):\n    return 'near'\n")
    model = resolve_model("function:nearby_models:answer", BUILTIN_MODEL_PROVIDERS, base=tmp_path)
    assert (await model.request(request("x"))).text == "near"
    import sys

    assert str(tmp_path) not in sys.path


async def test_task_steps_are_played_in_call_order_and_reported_when_unplayed():
    model = ScriptedModel.from_data(
        {
            "tasks": {
                "Draft": {"steps": [{"text": "one", "fail_times": 1}, {"text": "two"}]},
                "Never asked": {"steps": [{"text": "x"}]},
            }
        }
    )
    child = ModelRequest(messages=(Message(role="user", content="go"),), session_label="Draft")
    with pytest.raises(ModelError) as info:
        await model.request(child)
    assert info.value.recoverable  # fail_times applies to task steps too
    assert (await model.request(child)).text == "one"
    assert (await model.request(child)).text == "two"
    assert model.remaining() == {"task:Never asked": 1}
    with pytest.raises(ModelError, match=r'1 for task "Never asked" scripted step'):
        model.assert_consumed()


async def test_a_sampling_request_plays_the_samplings_then_echoes_and_takes_no_step():
    model = ScriptedModel.from_data({"steps": [{"text": "one"}], "samplings": [{"text": "s1"}]})
    sampling = ModelRequest(
        messages=(Message(role="user", content="Summarize:  the   notes"),), purpose="sampling"
    )
    assert (await model.request(sampling)).text == "s1"
    echoed = await model.request(sampling)
    assert echoed.text == "Scripted sampling answer to: Summarize: the notes"
    assert echoed.usage.output_tokens > 0
    assert (await model.request(request("a"))).text == "one"  # the script kept its place
    model.assert_consumed()
