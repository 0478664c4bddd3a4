"""Forks and restores after a compaction (docs/compaction.md, "The event, restore and forks").

A fork copies its parent's log through the last completed turn and folds it: when that log
compacted, the child starts from the parent's compacted view (the summary first, nothing from
before the compaction boundary), with the parent's base prompt and tools byte for byte. A
session killed with SIGKILL right after a ``compaction`` event was stored resumes with exactly
the view :func:`tether.store.replay.fold` gives.

A fork started in the very turn whose first step compacted starts from that compaction too: a
compaction at a turn's first step is stored before the turn opens (between turns), and the seed
includes it. A child that compacts during its task still reports its answer (the output is found
by counting answers, not by a position in a history a compaction shortened).

Real SQLite, the fork provider through the ``subagent`` tool, FunctionModel brains. The crash
test runs this module as a script (``python -m tests.subagents.test_compaction_forks first|second
...``) in a real subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import tether_fork
import tether_spawn
import tether_subagent_tools
from tether.agents import Agent
from tether.models import (
    ContextWindow,
    FunctionModel,
    Message,
    ModelRequest,
    messages_tokens,
    schema_tokens,
)
from tether.runtime import Runtime, compose_agent
from tether.store import (
    AssistantMessage,
    CompactionEvent,
    Event,
    InboxAccepted,
    SessionHeader,
    SQLiteStore,
    TurnEnded,
    UserMessage,
)
from tether.store.replay import fold
from tether.subagents.notices import DELEGATION_NOTE
from tether.testing import make_kernel, scaled, tree_problems, write_profile

from ..processes import kill_at_ready, plugin_env
from .conftest import Answer, delegate

pytestmark = pytest.mark.anyio

WINDOW = 2_000
ANSWER = "word " * 80  # about 100 tokens: a compaction every few turns
PROFILE = """
[tether]
plugins = ["spawn", "fork", "subagent"]

[plugin.subagent]
provider = "fork"
background = "{background}"

[agent.main]
model = "scripted:none.toml"
context_window = {window}
"""
PLUGINS: dict[str, object] = {
    "spawn": tether_spawn,
    "fork": tether_fork,
    "subagent": tether_subagent_tools.SubagentToolsPlugin,
}
#: A bound on every wait here, in seconds: generous, for a busy 2-core machine.
TIMEOUT = scaled(60.0)
ROOT = Path(__file__).parents[2]
MODULE = "tests.subagents.test_compaction_forks"


def summary(request: ModelRequest) -> str:
    return f"Summary of {len(request.messages) - 1} messages."


def child_answer(request: ModelRequest) -> str:
    return summary(request) if request.purpose == "compaction" else "child answer"


def parent_answer(request: ModelRequest) -> Any:
    """Answers questions at length, and forks on ``fork it``."""
    if request.purpose == "compaction":
        return summary(request)
    last = request.messages[-1]
    if last.role == "tool" and last.name == "subagent":
        return f"parent saw: {last.content}"
    if last.content == "fork it":
        return delegate("child task")
    return ANSWER


#: The label of every child here (``delegate``'s description): a child's requests carry it.
CHILD_LABEL = "do the task"


class Brain:
    """A FunctionModel body that answers the parent with ``parent`` and its forks with
    ``child``. A fork is told by its session label, not by the delegation note in its
    messages: a child that compacts may no longer have the note in its view."""

    def __init__(self, parent: Answer, child: Answer) -> None:
        self.parent = parent
        self.child = child
        self.model = FunctionModel(self)

    def __call__(self, request: ModelRequest) -> Any:
        return (self.child if request.session_label == CHILD_LABEL else self.parent)(request)

    @property
    def child_requests(self) -> list[ModelRequest]:
        return [r for r in self.model.requests if r.session_label == CHILD_LABEL]

    @property
    def parent_requests(self) -> list[ModelRequest]:
        return [r for r in self.model.requests if r.session_label != CHILD_LABEL]


def kernel_at(folder: Path, background: str = "one-shot") -> Any:
    profile = PROFILE.format(background=background, window=WINDOW)
    return make_kernel(write_profile(folder, profile), PLUGINS)


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


async def log_of(store: SQLiteStore, session_id: str) -> list[Event]:
    return [stored.event for stored in await store.events(session_id)]


def compactions(log: list[Event]) -> list[CompactionEvent]:
    return [e for e in log if isinstance(e, CompactionEvent)]


def summary_of(event: CompactionEvent) -> Message:
    """The message ``event``'s summary opens the history with (the fold of the event alone)."""
    first = fold([event]).history[0]
    assert first.content.startswith("<conversation_summary>")
    assert event.summary in first.content
    return first


async def run_until_compacted(agent: Agent, store: SQLiteStore) -> CompactionEvent:
    """Ask questions until the session has compacted once; that compaction."""
    for n in range(60):
        assert await agent.run(f"question {n}") == "completed"
        found = compactions(await log_of(store, agent.session_id))
        if found:
            return found[0]
    raise AssertionError("the session never compacted")


def dumped(messages: Any) -> list[str]:
    return [m.model_dump_json() for m in messages]


@dataclass(frozen=True)
class Forked:
    """A fork and its parent: the parent's compaction, its log just before the delegating
    turn and after it, the child's header and log, and every request the model received."""

    event: CompactionEvent
    before_fork: list[Event]
    parent_log: list[Event]
    header: SessionHeader
    child_log: list[Event]
    brain: Brain
    answer: str
    """What the parent said last (``parent saw: <the child's result>``)."""


@pytest.fixture
async def forked(tmp_path, store) -> Forked:
    """A parent that compacted in an earlier turn, then forked (``fork it``)."""
    brain = Brain(parent_answer, child_answer)
    parent = await compose_agent(kernel_at(tmp_path), store, model=brain.model)
    with anyio.fail_after(TIMEOUT):
        async with parent:
            event = await run_until_compacted(parent, store)
            before_fork = await log_of(store, parent.session_id)
            assert await parent.run("fork it") == "completed"
    parent_log = await log_of(store, parent.session_id)
    assert compactions(parent_log) == [event]  # the delegating turn did not compact again
    (header,) = await store.sessions(parent=parent.session_id)
    child_log = await log_of(store, header.id)
    answer = parent.messages[-1].content
    return Forked(event, before_fork, parent_log, header, child_log, brain, answer)


async def test_a_fork_after_a_compaction_copies_the_compaction_in_its_seed(forked):
    seed = forked.child_log[: forked.header.seed_length]
    assert forked.event in seed
    assert seed == [e for e in forked.before_fork if not isinstance(e, InboxAccepted)]
    assert not compactions(forked.child_log[forked.header.seed_length :])  # none of its own
    assert forked.answer == "parent saw: child answer"


async def test_a_fork_after_a_compaction_starts_from_the_parents_compacted_view(forked):
    first = forked.brain.child_requests[0]
    assert first.purpose == "turn"
    view = fold(forked.before_fork).history
    assert view[0] == summary_of(forked.event)
    assert dumped(first.messages[: len(view)]) == dumped(view)
    assert first.messages[len(view)].content.startswith(DELEGATION_NOTE)
    assert first.messages[-1].content == "child task"
    # Nothing from before the compaction boundary that the compaction did not keep.
    boundary = forked.parent_log.index(forked.event)
    kept = {m.content for m in forked.event.kept}
    asked = {e.content for e in forked.parent_log[:boundary] if isinstance(e, UserMessage)}
    replaced = asked - kept
    assert "question 0" in replaced
    assert not replaced & {m.content for m in first.messages}


async def test_a_fork_after_a_compaction_keeps_the_parents_base_prompt_and_tools(forked):
    first = forked.brain.child_requests[0]
    delegating = next(
        r for r in forked.brain.parent_requests if r.messages[-1].content == "fork it"
    )
    assert json.dumps(first.system) == json.dumps(delegating.system)
    assert dumped(first.tools) == dumped(delegating.tools)
    # The parent's request up to its running turn is the child's prefix, byte for byte.
    assert dumped(first.messages[: len(delegating.messages) - 1]) == dumped(
        delegating.messages[:-1]
    )


def fork_when_compacted(background: bool) -> Any:
    """Answers questions at length, and forks in the first step after a compaction."""

    def answer(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return summary(request)
        last = request.messages[-1]
        if last.role == "tool" and last.name == "subagent":
            return f"parent saw: {last.content}"
        compacted = request.messages[0].content.startswith("<conversation_summary>")
        if compacted and last.content.startswith("question"):
            return delegate("child task", background=background)
        return ANSWER

    return answer


@dataclass(frozen=True)
class ForkedInTurn:
    """A fork started in the turn whose first step compacted its parent."""

    event: CompactionEvent
    """The parent's compaction."""
    header: SessionHeader
    child_log: list[Event]
    brain: Brain
    result: str
    """What the parent got as the child's result."""


async def fork_in_the_compacting_turn(
    tmp_path: Path, store: SQLiteStore, *, background: bool = False
) -> ForkedInTurn:
    """A parent whose turn compacts at its first step and then forks in that same turn (the
    child runs in the foreground, or in the background as a continuable task)."""
    brain = Brain(fork_when_compacted(background), child_answer)
    kernel = kernel_at(tmp_path, "continuable" if background else "one-shot")
    with anyio.fail_after(TIMEOUT):
        async with Runtime.open(kernel, store) as runtime:
            parent = await runtime.compose(model=brain.model)
            async with parent:
                for n in range(60):
                    assert await parent.run(f"question {n}") == "completed"
                    if any(m.role == "tool" and m.name == "subagent" for m in parent.messages):
                        break
                await runtime.settle(parent)
    parent_log = await log_of(store, parent.session_id)
    (event,) = compactions(parent_log)
    (header,) = await store.sessions(parent=parent.session_id)
    if background:
        (result,) = [
            e.content
            for e in parent_log
            if isinstance(e, UserMessage) and e.content.startswith("<task_result")
        ]
        result = result.split(">", 1)[1].removesuffix("</task_result>")
    else:
        (result,) = [
            m.content for m in parent.messages if m.role == "tool" and m.name == "subagent"
        ]
    child_log = await log_of(store, header.id)
    return ForkedInTurn(event, header, child_log, brain, result)


async def test_a_fork_in_the_turn_that_compacted_keeps_within_its_window(tmp_path, store):
    forked = await fork_in_the_compacting_turn(tmp_path, store)
    # The compaction at the running turn's first step was stored before the turn opened, so
    # the seed holds it: the child starts from the parent's view and does not compact again.
    header, child_log, brain = forked.header, forked.child_log, forked.brain
    assert compactions(child_log[: header.seed_length]) == [forked.event]
    assert not compactions(child_log[header.seed_length :])
    budget = ContextWindow(WINDOW, None, "agent").budget()
    assert [r.purpose for r in brain.child_requests] == ["turn"]
    for request in brain.child_requests:
        tokens = schema_tokens(request.system, request.tools) + messages_tokens(request.messages)
        assert tokens <= budget
    ends = [e for e in child_log[header.seed_length :] if isinstance(e, TurnEnded)]
    assert [e.stop_reason for e in ends] == ["completed"]
    assert [e.content for e in child_log if isinstance(e, AssistantMessage)][-1] == "child answer"


@pytest.mark.parametrize("background", [False, True], ids=["one-shot", "continuable-task"])
async def test_a_fork_started_in_the_compacting_turn_reports_its_answer(
    tmp_path, store, background
):
    forked = await fork_in_the_compacting_turn(tmp_path, store, background=background)
    assert forked.result == "child answer"


async def test_a_fork_in_the_turn_that_compacted_starts_from_the_parents_summary(tmp_path, store):
    forked = await fork_in_the_compacting_turn(tmp_path, store)
    assert not compactions(forked.child_log[forked.header.seed_length :])  # no second summary
    assert forked.brain.child_requests[0].messages[0] == summary_of(forked.event)


# ------------------------------------------------------------------ SIGKILL after a compaction


def _kernel_for(db: Path) -> Any:
    return kernel_at(db.parent / "profile")


async def first(db: Path, seen: Path) -> None:
    """Ask questions until the session compacts; in the request right after the compaction
    (its event stored), write the request's messages to ``seen``, print ``READY <session>``
    and hang there until killed."""
    session: list[str] = []

    async def answer(request: ModelRequest) -> str:
        if request.purpose == "compaction":
            return summary(request)
        if request.messages[0].content.startswith("<conversation_summary>"):
            seen.write_text(json.dumps(dumped(request.messages)))
            print("READY", session[0], flush=True)
            await anyio.sleep(3600)  # killed here
        return ANSWER

    store = SQLiteStore(db)
    agent = await compose_agent(_kernel_for(db), store, model=FunctionModel(answer))
    session.append(agent.session_id)
    async with agent:
        for n in range(60):
            await agent.run(f"question {n}")
    raise SystemExit("the session never compacted")


async def second(db: Path, session_id: str, seen: Path) -> None:
    """Resume the session, run one more question, and write what its requests carried (and
    their purpose) to ``seen``."""
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        requests.append(request)
        return summary(request) if request.purpose == "compaction" else "resumed answer"

    store = SQLiteStore(db)
    try:
        agent = await compose_agent(
            _kernel_for(db), store, model=FunctionModel(answer), session_id=session_id
        )
        with anyio.fail_after(TIMEOUT):
            async with agent:
                assert await agent.run("question after") == "completed"
    finally:
        await store.aclose()
    seen.write_text(json.dumps([[r.purpose, dumped(r.messages)] for r in requests]))


def _messages(dumps: list[str]) -> list[Message]:
    return [Message.model_validate_json(text) for text in dumps]


def _read_log(db: Path, session_id: str) -> list[Event]:
    async def read() -> list[Event]:
        store = SQLiteStore(db)
        try:
            return await log_of(store, session_id)
        finally:
            await store.aclose()

    return anyio.run(read)


def _problems(db: Path, session_id: str) -> dict[str, list[str]]:
    async def check() -> dict[str, list[str]]:
        store = SQLiteStore(db)
        try:
            return await tree_problems(store, session_id)
        finally:
            await store.aclose()

    return anyio.run(check)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_session_killed_right_after_a_compaction_resumes_with_the_folded_view(tmp_path):
    db = tmp_path / "sessions.db"
    hung = tmp_path / "hung.json"
    errors = tmp_path / "first.err"
    command = [sys.executable, "-m", MODULE, "first", str(db), str(hung)]
    (session_id,) = kill_at_ready(command, TIMEOUT, errors, cwd=ROOT)

    # The compaction is the last thing the killed process stored.
    log = _read_log(db, session_id)
    event = log[-1]
    assert isinstance(event, CompactionEvent)
    view = fold(log).history
    assert view[0] == summary_of(event)
    # The request it was killed in carried exactly that view, then the question whose turn
    # was opening: the compaction is stored before the turn's start and claim, which wait for
    # the step's answer, so the log holds no part of that turn.
    carried = _messages(json.loads(hung.read_text()))
    assert carried[: len(view)] == view
    (asked,) = carried[len(view) :]
    assert asked.content.startswith("question")

    resumed = tmp_path / "resumed.json"
    done = subprocess.run(
        [sys.executable, "-m", MODULE, "second", str(db), session_id, str(resumed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=plugin_env(),
    )
    assert done.returncode == 0, done.stderr
    ((purpose, sent),) = json.loads(resumed.read_text())
    assert purpose == "turn"  # the view fits: no second compaction
    assert _messages(sent) == [*view, Message(role="user", content="question after")]

    after = _read_log(db, session_id)
    assert after[: len(log)] == log
    # No turn was left open to close: the next turn simply ran. (An inline run's question is
    # lost whole with its process, as before any compaction; a followup's would run again.)
    ends = [e for e in after[len(log) :] if isinstance(e, TurnEnded)]
    assert [e.stop_reason for e in ends] == ["completed"]
    assert _problems(db, session_id) == {}


def main(argv: list[str]) -> None:
    """The subprocess side of the crash test (see :func:`first` and :func:`second`)."""
    mode, db, *rest = argv
    if mode == "first":
        anyio.run(first, Path(db), Path(rest[0]))
    elif mode == "second":
        anyio.run(second, Path(db), rest[0], Path(rest[1]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
