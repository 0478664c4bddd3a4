"""Tools that need approval: the policy, the permission host, delegated children."""

from __future__ import annotations

import pytest

import tether
import tether_spawn
import tether_subagent_tools
from tether.agents import PermissionQuestion, Tool
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import MemoryStore
from tether.subagents import DELEGATION_NOTE
from tether.testing import make_runtime, write_profile

pytestmark = pytest.mark.anyio


class Risky:
    """An inline plugin with one tool that needs approval; it counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

        def delete(arguments, context):
            self.runs += 1
            return f"deleted {arguments['path']}"

        self.tool = Tool(
            "delete",
            "Delete a file.",
            delete,
            {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            needs_approval=True,
        )

    @tether.hookimpl
    def tether_tools(self):
        return [self.tool]


@pytest.fixture
def risky():
    return Risky()


@pytest.fixture
def runtime(tmp_path, risky):
    path = write_profile(
        tmp_path,
        '[tether]\nplugins = ["risky", "spawn", "subagent"]\n'
        "[plugin.subagent]\nrun_in_background = false\n[agent.main]\n",
    )
    return make_runtime(
        path, {"risky": risky, "spawn": tether_spawn, "subagent": tether_subagent_tools}
    )


def calls_delete(request: ModelRequest) -> ModelResponse | str:
    last = request.messages[-1]
    if last.role == "tool":
        return f"tool said: {last.content}"
    return ModelResponse(
        tool_calls=(ToolCall(id="c1", name="delete", arguments={"path": "notes.md"}),),
        finish_reason="tool_calls",
    )


async def run(runtime, approval=None):
    agent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(calls_delete))
    if approval is not None:
        agent.approval = approval
    async with agent:
        await agent.run("clean up")
    return agent.messages[-1].content


async def test_without_a_host_a_tool_that_needs_approval_is_refused(runtime, risky):
    assert await run(runtime) == (
        'tool said: error: tool "delete" needs approval, and there is nobody to ask'
    )
    assert risky.runs == 0


@pytest.mark.parametrize(("answer", "runs"), [("allow", 1), ("reject", 0), (None, 0)])
async def test_the_permission_host_decides(runtime, risky, answer, runs):
    questions: list[PermissionQuestion] = []

    async def host(question: PermissionQuestion) -> str | None:
        questions.append(question)
        return answer

    runtime.permission_host = host
    said = await run(runtime)
    assert risky.runs == runs
    assert said == (
        "tool said: deleted notes.md"
        if runs
        else 'tool said: error: tool "delete" was not approved'
    )
    (question,) = questions
    assert question.asker == 'agent "main"'
    assert question.title == 'delete({"path": "notes.md"})'
    assert [option[2] for option in question.options] == ["allow_once", "reject_once"]


async def test_an_allowing_or_denying_policy_asks_nobody(runtime, risky):
    async def host(question):
        raise AssertionError("asked")

    runtime.permission_host = host
    assert await run(runtime, "allow") == "tool said: deleted notes.md"
    assert await run(runtime, "deny") == (
        'tool said: error: tool "delete" needs approval, and this agent may not ask for it '
        "(its approvals are denied: it was delegated)"
    )
    assert risky.runs == 1


async def test_a_delegated_child_is_pinned_to_deny_even_when_the_host_would_allow(runtime, risky):
    asked: list[PermissionQuestion] = []

    async def host(question):
        asked.append(question)
        return "allow"

    runtime.permission_host = host

    def model(request: ModelRequest) -> ModelResponse | str:
        child = any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)
        last = request.messages[-1]
        if child:
            return calls_delete(request)
        if last.role == "tool":
            return f"parent saw: {last.content}"
        return ModelResponse(
            tool_calls=(
                ToolCall(
                    id="d1", name="subagent", arguments={"description": "clean", "prompt": "go"}
                ),
            ),
            finish_reason="tool_calls",
        )

    agent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(model))
    async with agent:
        await agent.run("delegate the cleanup")
    assert agent.messages[-1].content == (
        'parent saw: tool said: error: tool "delete" needs approval, and this agent may not ask '
        "for it (its approvals are denied: it was delegated)"
    )
    assert risky.runs == 0
    assert asked == []
