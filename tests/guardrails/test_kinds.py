"""Each kind of content, each verdict, in a real turn on a real SQLite store: what the model
sees, what the log keeps, how the turn ends (docs/guardrails.md)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tether import hookimpl
from tether.agents import Tool
from tether.contracts import GuardSubject, GuardVerdict
from tether.errors import ErrorCode, GuardrailError
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import AssistantMessage, GuardEvent, SQLiteStore, ToolResult, UserMessage
from tether.testing import make_kernel, write_profile

from .conftest import Offers, Rule

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = [{plugins}]
guardrails = [{names}]

[agent.main]
model = "scripted:none.toml"
"""


class Tools:
    """An inline plugin with an ``echo`` tool that records its calls."""

    def __init__(self) -> None:
        self.ran: list[dict[str, object]] = []

    def _echo(self, arguments: dict[str, object], ctx: object) -> str:
        self.ran.append(arguments)
        return f"echo: {arguments.get('text')}"

    @hookimpl
    def tether_tools(self) -> list[Tool]:
        return [Tool("echo", "Say it back.", self._echo, {"type": "object"}, safe=True)]


def runtime(
    tmp_path: Path, store: SQLiteStore, *rules: Rule, tools: Tools | None = None
) -> Runtime:
    plugins: dict[str, object] = {"rules": Offers(*rules)}
    if tools is not None:
        plugins["tools"] = tools
    profile = write_profile(
        tmp_path,
        PROFILE.format(
            plugins=", ".join(f'"{name}"' for name in plugins),
            names=", ".join(f'"{r.name}"' for r in rules),
        ),
    )
    return Runtime(make_kernel(profile, plugins), store)


def log_of(events):
    return [s.event for s in events]


async def run(rt: Runtime, model, prompt: str = "hello"):
    agent = await rt.compose(model=model)
    async with agent:
        stop = await agent.run(prompt)
    return agent, stop


def redact(word: str, by: str):
    def decide(subject: GuardSubject) -> GuardVerdict:
        if word in subject.content:
            return GuardVerdict.replace(subject.content.replace(word, by))
        return GuardVerdict.allow()

    return decide


def refuse(word: str):
    def decide(subject: GuardSubject) -> GuardVerdict:
        if word in subject.content:
            return GuardVerdict.stop(f"it says {word}")
        return GuardVerdict.allow()

    return decide


async def test_input_replaced_is_what_the_model_sees_and_the_claim_keeps(tmp_path, store):
    rule = Rule("mask", {"input"}, redact("alice@example.com", "[email]"))
    seen: list[ModelRequest] = []
    model = FunctionModel(lambda r: seen.append(r) or "ok")
    agent, stop = await run(runtime(tmp_path, store, rule), model, "mail alice@example.com")
    assert stop == "completed"
    assert seen[0].messages[-1].content == "mail [email]"
    log = log_of(await store.events(agent.session_id))
    claim = next(e for e in log if isinstance(e, UserMessage))
    assert claim.content == "mail [email]"
    (record,) = [e for e in log if isinstance(e, GuardEvent)]
    assert (record.guardrail, record.kind, record.action) == ("mask", "input", "replace")
    assert record.target == claim.message_id
    assert rule.seen[0].agent == "main"
    assert rule.seen[0].depth == 0


async def test_input_stopped_ends_the_turn_before_any_request(tmp_path, store):
    rule = Rule("nope", {"input"}, refuse("drop table"))
    seen: list[ModelRequest] = []
    model = FunctionModel(lambda r: seen.append(r) or "ok")
    agent, stop = await run(runtime(tmp_path, store, rule), model, "please drop table users")
    assert stop == "error"
    assert seen == []
    log = log_of(await store.events(agent.session_id))
    end = log[-1]
    assert end.type == "turn/end"
    assert end.error == (
        'guardrail "nope" stopped the turn on the message: it says drop table [GUARDRAIL_TRIPPED]'
    )
    assert isinstance(log[-2], GuardEvent)
    assert (log[-2].action, log[-2].reason) == ("stop", "it says drop table")


async def test_a_slow_input_check_runs_alongside_the_first_request(tmp_path, store):
    times: dict[str, float] = {}

    async def slow_allow(subject: GuardSubject) -> GuardVerdict:
        times["check start"] = time.monotonic()
        await anyio.sleep(0.3)
        times["check end"] = time.monotonic()
        return GuardVerdict.allow()

    async def answer(request: ModelRequest) -> str:
        times.setdefault("request start", time.monotonic())
        await anyio.sleep(0.3)
        return "ok"

    rule = Rule("judge", {"input"}, slow_allow)
    agent, stop = await run(runtime(tmp_path, store, rule), FunctionModel(answer))
    assert stop == "completed"
    # Both began before either ended: the check did not hold the request back.
    assert times["request start"] < times["check end"]
    log = log_of(await store.events(agent.session_id))
    assert not any(isinstance(e, GuardEvent) for e in log)


async def test_a_slow_input_check_that_replaces_cancels_the_request_and_asks_again(tmp_path, store):
    async def slow_redact(subject: GuardSubject) -> GuardVerdict:
        await anyio.sleep(0.05)
        return GuardVerdict.replace("a cleaned message")

    asked: list[str] = []
    finished: list[str] = []

    async def answer(request: ModelRequest) -> str:
        asked.append(request.messages[-1].content)
        if len(asked) == 1:
            await anyio.sleep(30)  # cancelled by the check's replacement
        finished.append(request.messages[-1].content)
        return "ok"

    rule = Rule("judge", {"input"}, slow_redact)
    agent, stop = await run(runtime(tmp_path, store, rule), FunctionModel(answer), "raw message")
    assert stop == "completed"
    assert asked == ["raw message", "a cleaned message"]
    assert finished == ["a cleaned message"]
    log = log_of(await store.events(agent.session_id))
    claim = next(e for e in log if isinstance(e, UserMessage))
    assert claim.content == "a cleaned message"
    assert [e.action for e in log if isinstance(e, GuardEvent)] == ["replace"]
    assert agent.messages[0].content == "a cleaned message"


async def test_a_slow_input_check_that_stops_cancels_the_request(tmp_path, store):
    async def slow_stop(subject: GuardSubject) -> GuardVerdict:
        await anyio.sleep(0.05)
        return GuardVerdict.stop("not allowed")

    answered: list[str] = []

    async def answer(request: ModelRequest) -> str:
        await anyio.sleep(30)
        answered.append("late")
        return "ok"

    rule = Rule("judge", {"input"}, slow_stop)
    with anyio.fail_after(10):
        agent, stop = await run(runtime(tmp_path, store, rule), FunctionModel(answer))
    assert stop == "error"
    assert answered == []
    log = log_of(await store.events(agent.session_id))
    assert log[-1].error.endswith("not allowed [GUARDRAIL_TRIPPED]")
    assert not any(isinstance(e, AssistantMessage) for e in log)


async def test_output_replaced_is_stored_and_read_by_the_next_request(tmp_path, store):
    rule = Rule("mask", {"output"}, redact("s3cr3t", "[hidden]"))
    seen: list[ModelRequest] = []
    model = FunctionModel(lambda r: seen.append(r) or "the code is s3cr3t")
    rt = runtime(tmp_path, store, rule)
    agent = await rt.compose(model=model)
    async with agent:
        assert await agent.run("code?") == "completed"
        assert await agent.run("again?") == "completed"
    assert seen[1].messages[1].content == "the code is [hidden]"
    log = log_of(await store.events(agent.session_id))
    answers = [e.content for e in log if isinstance(e, AssistantMessage)]
    assert answers == ["the code is [hidden]", "the code is [hidden]"]
    kinds = [e.type for e in log]
    assert kinds[kinds.index("assistant/message") + 1] == "guard"


async def test_output_stopped_is_not_stored(tmp_path, store):
    rule = Rule("stop", {"output"}, refuse("s3cr3t"))
    agent, stop = await run(runtime(tmp_path, store, rule), FunctionModel(lambda r: "s3cr3t!"))
    assert stop == "error"
    log = log_of(await store.events(agent.session_id))
    assert not any(isinstance(e, AssistantMessage) for e in log)
    assert log[-1].error.startswith('guardrail "stop" stopped the turn on the answer')


def calling(text: str):
    """A model that calls ``echo`` once, then answers with the result it read."""

    def answer(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role == "tool":
            return ModelResponse(text=f"done: {last.content}")
        call = ToolCall(id="c1", name="echo", arguments={"text": text})
        return ModelResponse(tool_calls=(call,))

    return FunctionModel(answer)


async def test_a_replaced_tool_call_does_not_run(tmp_path, store):
    tools = Tools()
    rule = Rule("calls", {"tool_call"}, redact("rm -rf", "x"))
    agent, stop = await run(runtime(tmp_path, store, rule, tools=tools), calling("rm -rf /"))
    assert stop == "completed"
    assert tools.ran == []
    log = log_of(await store.events(agent.session_id))
    (result,) = [e for e in log if isinstance(e, ToolResult)]
    assert result.is_error
    assert result.content == '{"text":"x /"}'
    assert rule.seen[0].tool == "echo"
    assert rule.seen[0].content == '{"text":"rm -rf /"}'


async def test_a_stopped_tool_call_ends_the_turn_unrun(tmp_path, store):
    tools = Tools()
    rule = Rule("calls", {"tool_call"}, refuse("rm -rf"))
    agent, stop = await run(runtime(tmp_path, store, rule, tools=tools), calling("rm -rf /"))
    assert stop == "error"
    assert tools.ran == []
    log = log_of(await store.events(agent.session_id))
    (result,) = [e for e in log if isinstance(e, ToolResult)]
    assert result.is_error  # the open call is closed, as any cut turn's
    assert isinstance(log[-2], GuardEvent)
    assert log[-1].error.startswith('guardrail "calls" stopped the turn on a tool call')


async def test_a_tool_result_replaced_is_what_is_stored_and_read(tmp_path, store):
    tools = Tools()
    rule = Rule("results", {"tool_result"}, redact("4111", "****"))
    agent, stop = await run(runtime(tmp_path, store, rule, tools=tools), calling("card 4111"))
    assert stop == "completed"
    assert tools.ran == [{"text": "card 4111"}]
    log = log_of(await store.events(agent.session_id))
    (result,) = [e for e in log if isinstance(e, ToolResult)]
    assert result.content == "echo: card ****"
    answer = [e for e in log if isinstance(e, AssistantMessage)][-1]
    assert answer.content == "done: echo: card ****"


async def test_a_check_that_raises_stops_the_turn_never_lets_it_through(tmp_path, store):
    def broken(subject: GuardSubject) -> GuardVerdict:
        raise RuntimeError("the service is down")

    rule = Rule("flaky", {"input"}, broken)
    seen: list[ModelRequest] = []
    agent, stop = await run(
        runtime(tmp_path, store, rule), FunctionModel(lambda r: seen.append(r) or "ok")
    )
    assert stop == "error"
    assert seen == []
    log = log_of(await store.events(agent.session_id))
    assert "the check failed: RuntimeError: the service is down" in log[-1].error


async def test_a_guardrail_nobody_offers_fails_when_the_agent_is_composed(tmp_path, store):
    profile = write_profile(tmp_path, PROFILE.format(plugins="", names='"missing"'))
    rt = Runtime(make_kernel(profile), store)
    with pytest.raises(GuardrailError) as failed:
        await rt.compose(model=FunctionModel(lambda r: "ok"))
    assert failed.value.code is ErrorCode.GUARDRAIL_INVALID
    assert '[tether] guardrails names guardrail "missing", which no loaded plugin offers' in str(
        failed.value
    )
    assert "pii" in str(failed.value)
    assert "no-secrets" in str(failed.value)
