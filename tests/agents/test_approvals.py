"""Tools that need approval: the policy, the permission host, delegated children."""

from __future__ import annotations

import anyio
import pytest

import tether
import tether_spawn
import tether_subagent_tools
from tests.remake import remade
from tether.agents import PermissionDesk, PermissionQuestion, Tool
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import compose_agent
from tether.store import MemoryStore, ToolResult
from tether.subagents.notices import APPROVAL_NOTES, DELEGATION_NOTE
from tether.testing import make_runtime, scaled, write_profile

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
        path,
        {
            "risky": risky,
            "spawn": tether_spawn,
            "subagent": tether_subagent_tools.SubagentToolsPlugin,
        },
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
        agent = remade(agent, approval=approval)
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
        "(its approval policy is deny)"
    )
    assert risky.runs == 1


def delegating(prompts: tuple[str, ...] = ("clean",), *, background: bool = False):
    """A model whose root delegates one ``subagent`` call per prompt in one step, whose
    children call ``delete``, and whose root then repeats what its last tool said."""

    def model(request: ModelRequest) -> ModelResponse | str:
        child = any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)
        last = request.messages[-1]
        if child:
            return calls_delete(request)
        if last.role == "tool":
            return f"parent saw: {last.content}"
        if any(m.content.startswith("<task_result") for m in request.messages[-2:]):
            return "noted"  # a result (then, maybe, the [Tasks] note)
        calls = tuple(
            ToolCall(
                id=f"d{n}",
                name="subagent",
                arguments={
                    "description": prompt,
                    "prompt": "go",
                    **({"run_in_background": True} if background else {}),
                },
            )
            for n, prompt in enumerate(prompts)
        )
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")

    return FunctionModel(model)


async def test_a_delegated_child_asks_its_roots_host_naming_its_path(runtime, risky):
    asked: list[PermissionQuestion] = []

    async def host(question):
        asked.append(question)
        return "allow"

    runtime.permission_host = host
    agent = await compose_agent(runtime, MemoryStore(), model=delegating())
    async with agent:
        await agent.run("delegate the cleanup")
    assert agent.messages[-1].content == "parent saw: tool said: deleted notes.md"
    assert risky.runs == 1
    (question,) = asked
    assert question.session != agent.session_id  # the child asked, through its root's host
    assert question.path == ("main", "clean")
    assert question.where == "main > clean"
    assert question.who == f'agent "main", session {question.session}, via main > clean'
    assert question.title == 'delete({"path": "notes.md"})'


async def test_a_child_says_what_its_policy_means_in_its_note(runtime, risky):
    notes: list[str] = []

    def model(request: ModelRequest) -> ModelResponse | str:
        note = next((m for m in request.messages if m.content.startswith(DELEGATION_NOTE)), None)
        if note is not None:
            notes.append(note.content)
            return "done"
        if request.messages[-1].role == "tool":
            return "ok"
        return ModelResponse(
            tool_calls=(
                ToolCall(id="d", name="subagent", arguments={"description": "x", "prompt": "go"}),
            ),
            finish_reason="tool_calls",
        )

    for approval in ("ask", "deny"):
        agent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(model))
        agent = remade(agent, approval=approval)
        async with agent:
            await agent.run("delegate")
    assert [note[len(DELEGATION_NOTE) :] for note in notes] == [
        APPROVAL_NOTES["ask"],
        APPROVAL_NOTES["deny"],
    ]


@pytest.mark.parametrize(
    ("parent", "runs", "said"),
    [
        ("deny", 0, "this agent may not ask for it (its approval policy is deny)"),
        ("allow", 1, None),
    ],
)
async def test_a_child_never_gets_more_than_its_parent(runtime, risky, parent, runs, said):
    asked: list[PermissionQuestion] = []

    async def host(question):
        asked.append(question)
        return "allow"

    runtime.permission_host = host
    agent = remade(await compose_agent(runtime, MemoryStore(), model=delegating()), approval=parent)
    async with agent:
        await agent.run("delegate the cleanup")
    assert risky.runs == runs
    assert asked == []  # neither asks: deny refuses, allow runs
    if said is not None:
        assert said in agent.messages[-1].content


async def test_a_desk_routes_each_childs_answer_back_by_request_id(tmp_path, risky):
    """Two background children ask at once; a program answers them later, in the other order,
    by request id: each child gets its own answer. Answers for ids the desk does not hold come
    back (eve's HITL proxy: unknown ids stay the caller's)."""
    path = write_profile(
        tmp_path,
        '[tether]\nplugins = ["risky", "spawn", "subagent"]\n[agent.main]\n',
    )
    runtime = make_runtime(
        path,
        {
            "risky": risky,
            "spawn": tether_spawn,
            "subagent": tether_subagent_tools.SubagentToolsPlugin,
        },
    )
    desk = PermissionDesk()
    runtime.permission_host = desk
    agent = await compose_agent(
        runtime, MemoryStore(), model=delegating(("first", "second"), background=True)
    )
    async with agent:
        await agent.run("delegate the cleanup")
        with anyio.fail_after(scaled(30)):
            while len(desk.pending()) < 2:
                await desk.next()
                await anyio.sleep(0.01)
        first, second = sorted(desk.pending(), key=lambda q: q.path)
        assert [q.path for q in (first, second)] == [("main", "first"), ("main", "second")]
        assert first.request_id != second.request_id
        assert desk.route({second.request_id: "allow", "elsewhere": "allow"}) == {
            "elsewhere": "allow"
        }
        assert desk.route({first.request_id: "reject"}) is None
        assert desk.answer(first.request_id, "allow") is False  # answered already
        await runtime.settle(agent)
        children = {
            stored.event.content
            for header in await agent.store.sessions()
            if header.parent_session == agent.session_id
            for stored in await agent.store.events(header.id)
            if isinstance(stored.event, ToolResult)
        }
    assert risky.runs == 1
    assert children == {
        "deleted notes.md",
        'error: tool "delete" was not approved',
    }
    assert desk.pending() == []


async def test_a_question_whose_asker_stops_waiting_leaves_the_desk():
    desk = PermissionDesk()
    question = PermissionQuestion(session="s", asker="a", title="t", kind=None, options=())
    async with anyio.create_task_group() as group:
        group.start_soon(desk, question)
        with anyio.fail_after(scaled(10)):
            assert await desk.next() is question
        group.cancel_scope.cancel()
    assert desk.pending() == []
    assert desk.answer(question.request_id, "allow") is False
