"""A tripwire while the answer streams (the partial answer kept and marked), a steer checked
at the step that takes it, and a child's result checked on its way up."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import tether_spawn
import tether_subagent_tools
from tether.contracts import GuardSubject, GuardVerdict
from tether.models import FunctionModel, ModelDelta, ModelRequest, ModelResponse, ToolCall
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


def runtime(tmp_path: Path, store: SQLiteStore, *rules: Rule, **more: object) -> Runtime:
    plugins: dict[str, object] = {"rules": Offers(*rules), **more}
    profile = write_profile(
        tmp_path,
        PROFILE.format(
            plugins=", ".join(f'"{name}"' for name in plugins),
            names=", ".join(f'"{r.name}"' for r in rules),
        ),
    )
    return Runtime(make_kernel(profile, plugins), store)


def refuse(word: str):
    def decide(subject: GuardSubject) -> GuardVerdict:
        return (
            GuardVerdict.stop(f"said {word}") if word in subject.content else GuardVerdict.allow()
        )

    return decide


async def test_a_streaming_guardrail_cuts_the_answer_and_keeps_what_went_out(tmp_path, store):
    rule = Rule("live", {"output"}, refuse("FORBIDDEN"), streaming=True)
    sent_after: list[str] = []

    async def streaming(request: ModelRequest):
        for piece in ("The answer ", "is ", "FORBIDDEN", " and more"):
            yield ModelDelta("text", piece)
            sent_after.append(piece)
        yield ModelResponse(text="The answer is FORBIDDEN and more")

    heard: list[str] = []
    agent = await runtime(tmp_path, store, rule).compose(model=FunctionModel(streaming))
    agent.listen_deltas(lambda delta: heard.append(delta.text))
    async with agent:
        assert await agent.run("go") == "error"
    assert "".join(heard) == "The answer is FORBIDDEN"
    assert " and more" not in sent_after  # the stream was cut at the piece that tripped
    log = [s.event for s in await store.events(agent.session_id)]
    (kept,) = [e for e in log if isinstance(e, AssistantMessage)]
    assert kept.partial
    assert kept.content == "The answer is FORBIDDEN"
    trip = log[-2]
    assert isinstance(trip, GuardEvent)
    assert (trip.kind, trip.action, trip.reason) == ("output", "stop", "said FORBIDDEN")
    assert log[-1].error == (
        'guardrail "live" stopped the turn on the answer: said FORBIDDEN [GUARDRAIL_TRIPPED]'
    )
    assert [s.partial for s in rule.seen][:3] == [True, True, True]


async def test_a_steer_is_checked_at_the_step_that_takes_it(tmp_path, store):
    rule = Rule(
        "mask",
        {"input"},
        lambda s: (
            GuardVerdict.replace(s.content.replace("4111", "****"))
            if "4111" in s.content
            else GuardVerdict.allow()
        ),
    )
    gate = anyio.Event()
    seen: list[list[str]] = []

    async def answer(request: ModelRequest) -> ModelResponse | str:
        seen.append([m.content for m in request.messages if m.role == "user"])
        if len(seen) == 1:
            await gate.wait()
            return ModelResponse(tool_calls=(ToolCall(id="c1", name="nothing", arguments={}),))
        return "ok"

    agent = await runtime(tmp_path, store, rule).compose(model=FunctionModel(answer))
    async with agent:
        await agent.followup("start")
        await anyio.wait_all_tasks_blocked()
        steer_id = await agent.steer("card 4111 please")
        gate.set()
        await agent.when_idle()
    assert seen[-1][-1] == "card **** please"
    log = [s.event for s in await store.events(agent.session_id)]
    claim = next(e for e in log if isinstance(e, UserMessage) and e.message_id == steer_id)
    assert claim.content == "card **** please"
    (record,) = [e for e in log if isinstance(e, GuardEvent)]
    assert record.target == steer_id


async def test_a_childs_result_is_checked_on_its_way_up(tmp_path, store):
    rule = Rule(
        "results",
        {"child_result"},
        lambda s: (
            GuardVerdict.replace("[withheld]") if "secret" in s.content else GuardVerdict.allow()
        ),
    )

    def answer(request: ModelRequest) -> ModelResponse | str:
        last = request.messages[-1]
        if any("the task" in m.content for m in request.messages if m.role == "user"):
            return "the secret is 42"  # the child
        if last.role == "tool":
            return f"parent read: {last.content}"
        call = ToolCall(
            id="d1", name="subagent", arguments={"description": "ask", "prompt": "the task"}
        )
        return ModelResponse(tool_calls=(call,))

    rt = runtime(
        tmp_path,
        store,
        rule,
        spawn=tether_spawn,
        subagent=tether_subagent_tools.SubagentToolsPlugin,
    )
    agent = await rt.compose(model=FunctionModel(answer))
    async with agent:
        assert await agent.run("go") == "completed"
    (subject,) = rule.seen
    assert (subject.kind, subject.route, subject.tool) == ("child_result", "local", None)
    log = [s.event for s in await store.events(agent.session_id)]
    (result,) = [e for e in log if isinstance(e, ToolResult)]
    assert "the secret is 42" not in result.content
    assert "[withheld]" in result.content
    kinds = [e.type for e in log]
    assert kinds.index("guard") < kinds.index("tool/result")
