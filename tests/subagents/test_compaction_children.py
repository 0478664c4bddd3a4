"""A parent whose children's results would overflow it (docs/compaction.md, docs/subagents.md).

The parent has a 4,000-token window and starts three background tasks (declared subagents)
whose answers are about 6,500 characters each: together far more than the parent may carry.
Every request the parent sends still fits its budget, because it compacts; its turns complete;
the children's whole results stay in the log and in ``task_output``. Each child keeps its own
model's window: one has none (its requests outgrow the parent's window, and it never compacts),
one has a window smaller than the parent's (it compacts by its own).

Real SQLite, the runtime, and one ``function:`` model per agent: the model functions live in
this module, and the profile names them (``function:MODULE:parent``).

A child that compacts keeps its delegation note in view (a compaction restates it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

import tether
import tether_spawn
import tether_subagent_tools
from tether.agents import Tool
from tether.models import (
    ContextWindow,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    messages_tokens,
    schema_tokens,
)
from tether.runtime import Runtime
from tether.store import (
    CompactionEvent,
    Event,
    SQLiteStore,
    ToolResult,
    TurnEnded,
    UserMessage,
)
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_kernel, scaled, write_profile

pytestmark = pytest.mark.anyio

HERE = "tests.subagents.test_compaction_children"
PARENT_WINDOW = 4_000
DIGGER_WINDOW = 2_048
#: How long a child's final answer is, in characters (about 1,600 tokens).
REPORT_CHARS = 6_500
#: Everything here finishes in well under a second; generous for a busy machine.
TIMEOUT = scaled(60.0)

PROFILE = f"""
[tether]
plugins = ["spawn", "subagent"]

[agent.main]
model = "function:{HERE}:parent"
context_window = {PARENT_WINDOW}
subagents = ["researcher", "digger"]

[agent.researcher]
description = "Reads long pages and reports at length."
model = "function:{HERE}:researcher"
plugins = ["pages"]

[agent.digger]
description = "Reads many short pages and reports at length."
model = "function:{HERE}:digger"
plugins = ["pages"]
context_window = {DIGGER_WINDOW}
"""

#: Every request each agent's model received, by agent (reset for each test).
REQUESTS: dict[str, list[ModelRequest]] = {}
#: The pages each child reads before it reports, and their length in characters.
PAGES = {"researcher": (3, 4_000), "digger": (6, 1_500)}


def filler(prefix: str, size: int) -> str:
    """``prefix`` followed by words, ``size`` characters in all."""
    return (prefix + " " + "lorem ipsum dolor sit amet " * (size // 20 + 1))[:size]


def report(topic: str) -> str:
    """A child's final answer on ``topic``: long, and unique to it."""
    return filler(f"REPORT on {topic}:", REPORT_CHARS)


#: The three reports, in the order of the calls that asked for them (r1, r2, d1).
REPORTS = [report("alpha"), report("beta"), report("the archive")]


def _call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _latest(request: ModelRequest) -> Any:
    """The last message that is not the ``[Tasks]`` note a step may add after it."""
    return next(m for m in reversed(request.messages) if not m.content.startswith("[Tasks]"))


def parent(request: ModelRequest) -> Any:
    """Delegates three reports on ``go``; rereads a report with task_output on ``read again
    ID``; otherwise acknowledges what arrived."""
    REQUESTS.setdefault("parent", []).append(request)
    if request.purpose == "compaction":
        return f"Summary: three reports were asked for; {len(request.messages) - 1} messages."
    last = _latest(request)
    if last.role == "user" and last.content == "go":
        calls = (
            _call("researcher", "r1", message="Research alpha."),
            _call("researcher", "r2", message="Research beta."),
            _call("digger", "d1", message="Dig through the archive."),
        )
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")
    if last.role == "user" and last.content.startswith("read again "):
        task_id = last.content.removeprefix("read again ")
        call = _call("task_output", "o1", taskId=task_id)
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
    if last.role == "tool" and last.name == "task_output":
        return "Read the whole report again."
    if last.role == "tool":
        return "Waiting for the reports."
    if "<task_result" in last.content:
        return "Noted the report."
    return "ok"


def _reader(role: str, topic: Callable[[ModelRequest], str]) -> Any:
    """A child that reads its pages one step at a time, then reports on ``topic``."""

    def answer(request: ModelRequest) -> Any:
        REQUESTS.setdefault(role, []).append(request)
        if request.purpose == "compaction":
            return f"Summary: {role} is reading pages for its report."
        pages, size = PAGES[role]
        last = request.messages[-1]
        read = 0
        if last.role == "tool" and last.name == "read_page":
            read = int(last.content.split()[1].rstrip(":"))
        if read < pages:
            call = _call("read_page", f"p{read + 1}", n=read + 1, size=size)
            return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
        return report(topic(request))

    return answer


def _research_topic(request: ModelRequest) -> str:
    prompt = next(m.content for m in request.messages if m.content.startswith("Research "))
    return prompt.removeprefix("Research ").rstrip(".")


researcher = _reader("researcher", _research_topic)
digger = _reader("digger", lambda request: "the archive")


class Pages:
    """An inline plugin for the children's layers: ``read_page``, a tool whose long pages fill
    a child's own window (the parent does not have it)."""

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        async def read_page(arguments: dict[str, Any], context: Any) -> str:
            n, size = int(arguments["n"]), int(arguments["size"])
            return filler(f"page {n}:", size)

        parameters = {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "size": {"type": "integer"}},
            "required": ["n", "size"],
        }
        return [Tool("read_page", "Read page n.", read_page, parameters, safe=True)]


PLUGINS: dict[str, object] = {
    "spawn": tether_spawn,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
    "pages": Pages(),
}


@pytest.fixture(autouse=True)
def requests() -> Iterator[dict[str, list[ModelRequest]]]:
    REQUESTS.clear()
    yield REQUESTS
    REQUESTS.clear()


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


def request_tokens(request: ModelRequest) -> int:
    """What the request carries, counted as the agent counts it (a function model reports no
    usage, so the agent estimates the whole request the same way)."""
    return schema_tokens(request.system, request.tools) + messages_tokens(request.messages)


def turns(role: str) -> list[ModelRequest]:
    return [r for r in REQUESTS.get(role, []) if r.purpose == "turn"]


async def log_of(store: SQLiteStore, session_id: str) -> list[Event]:
    return [stored.event for stored in await store.events(session_id)]


def compactions(log: list[Event]) -> list[CompactionEvent]:
    return [e for e in log if isinstance(e, CompactionEvent)]


def task_ids(log: list[Event]) -> list[str]:
    """The task ids of the receipts in ``log``, in the order of the calls that started them
    (``r1``, ``r2``, ``d1``)."""
    receipts = {
        e.tool_call_id: e.content.split()[2].rstrip(".")
        for e in log
        if isinstance(e, ToolResult) and e.content.startswith("Started task")
    }
    return [receipts[call_id] for call_id in ("r1", "r2", "d1")]


@dataclass(frozen=True)
class Delegated:
    """What the scene left: the parent's window, its view and log, the task ids (``r1``,
    ``r2``, ``d1``), what ``task_output`` gave for each, and each child's agent and log."""

    window: ContextWindow
    messages: tuple[Message, ...]
    log: list[Event]
    ids: list[str]
    outputs: list[str]
    children: dict[str, tuple[str | None, list[Event]]]


@pytest.fixture
async def delegated(tmp_path, store) -> Delegated:
    """The parent asks for three reports (two researchers, one digger), settles, then reads
    the first report again with ``task_output``: one more result-sized message."""
    kernel = make_kernel(write_profile(tmp_path, PROFILE), PLUGINS)
    with anyio.fail_after(TIMEOUT):
        async with Runtime.open(kernel, store) as runtime:
            main = await runtime.compose(agent="main")
            async with main:
                window = main.budget.window
                assert window is not None
                assert (window.tokens, window.source) == (PARENT_WINDOW, "agent")
                assert await main.run("go") == "completed"
                await runtime.settle(main)
                ids = task_ids(await log_of(store, main.session_id))
                outputs = [await runtime.subagents.tasks.output(main, i) for i in ids]
                assert await main.run(f"read again {ids[0]}") == "completed"
                await runtime.settle(main)
    children = {
        header.id: (header.agent, await log_of(store, header.id))
        for header in await store.sessions(parent=main.session_id)
    }
    log = await log_of(store, main.session_id)
    return Delegated(window, main.messages, log, ids, outputs, children)


async def test_every_request_of_the_parent_fits_its_window_though_the_results_do_not(
    delegated,
):
    results = [
        e.content
        for e in delegated.log
        if isinstance(e, UserMessage) and e.content.startswith("<task_result")
    ]
    assert sum(len(r) for r in results) // 4 > PARENT_WINDOW
    budget = delegated.window.budget()
    sent = turns("parent")
    assert all(request_tokens(r) <= budget for r in sent), [request_tokens(r) for r in sent]
    summaries = [r for r in REQUESTS["parent"] if r.purpose == "compaction"]
    assert all(request_tokens(r) <= delegated.window.tokens for r in summaries)
    # It compacted to make room: once per summary it asked for, and it ends compacted.
    stored = compactions(delegated.log)
    assert stored
    assert len(summaries) == len(stored)
    assert sent[-1].messages[0].content.startswith("<conversation_summary>")
    # A result too long for what a compaction keeps is cut in the view (never in the log).
    assert any("characters cut by compaction" in m.content for r in sent for m in r.messages)


async def test_the_parents_turns_complete_and_it_reads_a_whole_result_again(delegated):
    ends = [e for e in delegated.log if isinstance(e, TurnEnded)]
    assert len(ends) >= 3
    assert {e.stop_reason for e in ends} == {"completed"}
    assert delegated.messages[-1].content == "Read the whole report again."
    reread = next(m for m in delegated.messages if m.role == "tool" and m.name == "task_output")
    assert reread.content.startswith(REPORTS[0][:200])


async def test_the_childrens_whole_results_stay_in_the_log_and_in_task_output(delegated):
    assert delegated.outputs == REPORTS
    results = [
        e.content
        for e in delegated.log
        if isinstance(e, UserMessage) and e.content.startswith("<task_result")
    ]
    tools = ("researcher", "researcher", "digger")
    assert sorted(results) == sorted(
        f'<task_result id="{task_id}" tool="{tool}" status="completed">{text}</task_result>'
        for task_id, tool, text in zip(delegated.ids, tools, REPORTS, strict=True)
    )


async def test_a_child_without_a_window_never_compacts_though_it_outgrows_the_parents(
    delegated,
):
    logs = [log for agent, log in delegated.children.values() if agent == "researcher"]
    assert len(logs) == 2
    assert not [event for log in logs for event in compactions(log)]
    assert not [r for r in REQUESTS["researcher"] if r.purpose == "compaction"]
    assert max(request_tokens(r) for r in turns("researcher")) > delegated.window.budget()


async def test_a_child_with_a_smaller_window_compacts_by_its_own(delegated):
    (log,) = [log for agent, log in delegated.children.values() if agent == "digger"]
    found = compactions(log)
    assert found
    assert {e.trigger for e in found} == {"auto"}
    budget = ContextWindow(DIGGER_WINDOW, None, "agent").budget()
    assert budget < delegated.window.budget()
    assert all(request_tokens(r) <= budget for r in turns("digger"))
    # It read every page, through its compactions, before it reported.
    assert turns("digger")[-1].messages[-1].content.startswith("page 6:")


async def test_a_child_that_compacts_keeps_its_delegation_note_in_view(delegated):
    after = [r for r in turns("digger") if r.messages[0].content.startswith("<conversation")]
    assert after  # the digger compacted before some of its steps
    for request in after:
        assert any(m.content.startswith(DELEGATION_NOTE) for m in request.messages)
