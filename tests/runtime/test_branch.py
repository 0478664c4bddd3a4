"""Branching a session at a turn and rewinding one (``tether.runtime.branch_session`` and
``rewind_session``): real SQLite stores, function models that record every request.

A branch's first request is byte for byte the original's request at that point; a rewound
session's next request is the prefix again, and its fold is a fresh session's with the same
prefix; the logs stay append-only and keep their promises (``tree_problems``)."""

from __future__ import annotations

import time

import pytest

from tether.errors import ErrorCode, StoreError, SubagentError
from tether.models import FunctionModel, ModelRequest
from tether.runtime import (
    BRANCH_DESCRIPTOR,
    Runtime,
    branch_session,
    completed_turns,
    rewind_session,
)
from tether.store import (
    ContextMessage,
    DescriptorEvent,
    Event,
    InboxAccepted,
    MemoryStore,
    RewindEvent,
    SessionHeader,
    SQLiteStore,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from tether.store.replay import SessionFold, fold
from tether.testing import tree_problems

pytestmark = pytest.mark.anyio

PROFILE = """
[agent.main]
model = "scripted:none.toml"
"""


def answering() -> FunctionModel:
    """Answers each prompt by name, so the same history always gets the same answer."""

    def answer(request: ModelRequest) -> str:
        return f"answer to {request.messages[-1].content}"

    return FunctionModel(answer)


def serialized(request: ModelRequest) -> str:
    return request.model_dump_json()


@pytest.fixture
def kernel(tether_kernel):
    return tether_kernel(PROFILE)


@pytest.fixture(params=["sqlite", "memory"])
async def store(tmp_path, request):
    # SQLite finds the cut and copies the prefix in SQL; any other store reads and writes
    # the events: both must agree.
    store = SQLiteStore(tmp_path / "s.db") if request.param == "sqlite" else MemoryStore()
    try:
        yield store
    finally:
        await store.aclose()


async def run(runtime: Runtime, prompts: list[str], session_id: str | None = None):
    model = answering()
    agent = await runtime.compose(model=model, session_id=session_id, label="work")
    assert await runtime.run_session(agent, prompts) == "completed"
    return agent.session_id, model


async def log_of(store, session_id: str) -> list[Event]:
    return [stored.event for stored in await store.events(session_id)]


def what_the_model_sees(folded: SessionFold) -> tuple[object, ...]:
    """Every part of a fold the next request is made from (not the turn count or the log's
    length: turn numbers are never reused and the rewound log is longer; of the setup, its
    records' kinds: the workspace record names its own session)."""
    return (
        folded.history,
        folded.instructions,
        folded.unclaimed,
        folded.open_turn,
        sorted(folded.setup),
        folded.last_compaction,
        folded.earlier_answers,
        folded.delegation_note,
        folded.budget,
        folded.caller,
        folded.counted,
    )


async def test_a_branch_sends_the_originals_request_byte_for_byte(kernel, store):
    runtime = Runtime(kernel, store)
    original, first = await run(runtime, ["one", "two", "three", "four"])
    before = await log_of(store, original)

    header = await branch_session(runtime, original, at_turn=2)

    assert header.id != original
    assert header.parent_session is None
    assert header.origin == "user"
    assert header.label == "work"
    assert header.agent == "main"
    branch_log = await log_of(store, header.id)
    # The prefix is the original's, event for event, up to the end of turn 2.
    assert header.seed_length == completed_turns(before)[2]
    assert branch_log[: header.seed_length] == before[: header.seed_length]
    assert isinstance(branch_log[header.seed_length - 1], TurnEnded)
    lineage = branch_log[header.seed_length]
    assert isinstance(lineage, DescriptorEvent)
    assert lineage.kind == BRANCH_DESCRIPTOR
    assert lineage.data == {"from": original, "at_turn": 2, "keep": header.seed_length}
    assert await store.holder(header.id) is None  # nobody drives it yet
    assert await log_of(store, original) == before  # the original is not touched

    _, second = await run(runtime, ["three"], session_id=header.id)
    # The original's turns 3 and 4 were accepted before the cut: the branch does not run them.
    assert [e.content for e in await log_of(store, header.id) if isinstance(e, UserMessage)] == [
        "one",
        "two",
        "three",
    ]
    assert len(second.requests) == 1
    # Turn 3 of the original and the branch's first turn: the same request, byte for byte.
    assert serialized(second.requests[0]) == serialized(first.requests[2])
    assert await tree_problems(store, header.id) == {}
    assert await tree_problems(store, original) == {}


async def test_a_branch_without_a_turn_copies_every_ended_turn_and_turn_0_none(kernel, store):
    runtime = Runtime(kernel, store)
    original, first = await run(runtime, ["one", "two"])

    whole = await branch_session(runtime, original)
    assert whole.seed_length == len(await log_of(store, original))
    _, model = await run(runtime, ["three"], session_id=whole.id)
    assert [m.content for m in model.requests[0].messages] == [
        "one",
        "answer to one",
        "two",
        "answer to two",
        "three",
    ]

    empty = await branch_session(runtime, original, at_turn=0)
    _, fresh = await run(runtime, ["one"], session_id=empty.id)
    assert serialized(fresh.requests[0]) == serialized(first.requests[0])


async def test_a_branch_of_a_turn_the_history_does_not_hold_is_refused(kernel, store):
    runtime = Runtime(kernel, store)
    original, _ = await run(runtime, ["one", "two"])
    with pytest.raises(StoreError) as caught:
        await branch_session(runtime, original, at_turn=7)
    assert caught.value.code is ErrorCode.TURN_NOT_FOUND
    assert "no ended turn 7" in str(caught.value)
    assert "0-2" in str(caught.value)
    assert len(await store.sessions()) == 1  # nothing created


async def test_a_rewound_session_sends_the_prefix_again_and_folds_as_a_fresh_one(kernel, store):
    runtime = Runtime(kernel, store)
    original, first = await run(runtime, ["one", "two", "three", "four"])

    event = await rewind_session(runtime, original, 2)

    assert event == RewindEvent(to_turn=2, keep=completed_turns(await log_of(store, original))[2])
    log = await log_of(store, original)
    assert log[-1] == event  # appended: nothing deleted
    assert sum(isinstance(e, TurnEnded) for e in log) == 4
    assert await store.holder(original) is None  # the lease went back

    _, again = await run(runtime, ["three"], session_id=original)
    assert serialized(again.requests[0]) == serialized(first.requests[2])
    log = await log_of(store, original)
    # Turn numbers are never reused: the turn after the rewind is turn 5.
    assert [e.turn for e in log if isinstance(e, TurnStarted)] == [1, 2, 3, 4, 5]
    assert await tree_problems(store, original) == {}

    fresh, _ = await run(runtime, ["one", "two", "three"])
    rewound = fold(log)
    assert what_the_model_sees(rewound) == what_the_model_sees(fold(await log_of(store, fresh)))
    assert rewound.turns == 5


async def test_a_second_rewind_and_a_rewind_to_the_start(kernel, store):
    runtime = Runtime(kernel, store)
    original, first = await run(runtime, ["one", "two", "three"])
    await rewind_session(runtime, original, 1)
    await run(runtime, ["two bis"], session_id=original)  # turn 4

    # Turn 2 and 3 were undone: not in the history any more.
    for gone in (2, 3):
        with pytest.raises(StoreError) as caught:
            await rewind_session(runtime, original, gone)
        assert caught.value.code is ErrorCode.TURN_NOT_FOUND
    assert sorted(completed_turns(await log_of(store, original))) == [0, 1, 4]
    assert await rewind_session(runtime, original, 4) is None  # the last turn: nothing to undo

    await rewind_session(runtime, original, 0)
    _, again = await run(runtime, ["one"], session_id=original)
    assert serialized(again.requests[0]) == serialized(first.requests[0])
    assert await tree_problems(store, original) == {}


async def test_a_compaction_after_the_cut_is_undone_and_one_before_it_kept(kernel, store):
    runtime = Runtime(kernel, store)
    model = FunctionModel(
        lambda request: (
            "summary"
            if request.purpose == "compaction"
            else f"answer to {request.messages[-1].content}"
        )
    )
    agent = await runtime.compose(model=model)
    original = agent.session_id
    await runtime.run_session(agent, ["one", "two", "/compact", "three", "/compact", "four"])
    log = await log_of(store, original)
    folded = fold(log)
    assert len(folded.compactions) == 2

    await rewind_session(runtime, original, 3)  # after the first compaction, before the second
    rewound = fold(await log_of(store, original))
    assert rewound.compactions == folded.compactions[:1]
    assert rewound.last_compaction == log[folded.compactions[0]]
    assert [m.content for m in rewound.history][-2:] == ["three", "answer to three"]

    await rewind_session(runtime, original, 1)  # before both
    rewound = fold(await log_of(store, original))
    assert rewound.compactions == []
    assert rewound.last_compaction is None
    assert [m.content for m in rewound.history] == ["one", "answer to one"]
    assert await tree_problems(store, original) == {}


async def test_rewind_is_refused_while_the_session_is_driven(kernel, store, tmp_path):
    runtime = Runtime(kernel, store)
    original, _ = await run(runtime, ["one", "two"])
    agent = await runtime.compose(model=answering(), session_id=original)
    async with runtime.hold(agent):
        with pytest.raises(StoreError) as here:
            await rewind_session(runtime, original, 1)
        assert here.value.code is ErrorCode.SESSION_BUSY
        assert "open in this process" in str(here.value)
        if not isinstance(store, SQLiteStore):
            return  # another process's view of the same store needs a file
        other = SQLiteStore(tmp_path / "s.db")  # another driver's view of the file
        try:
            with pytest.raises(StoreError) as there:
                await rewind_session(Runtime(kernel, other), original, 1)
            assert there.value.code is ErrorCode.SESSION_BUSY
        finally:
            await other.aclose()
    assert not any(isinstance(e, RewindEvent) for e in await log_of(store, original))


async def test_a_turn_a_crash_left_open_is_not_rewound_over(kernel, store):
    header = SessionHeader(id="cut", created_at=time.time())
    await store.create(
        header,
        [
            TurnStarted(turn=1, message_id="m1"),
            UserMessage(message_id="m1", content="one"),
            TurnEnded(turn=1, stop_reason="completed"),
            TurnStarted(turn=2, message_id="m2"),
            UserMessage(message_id="m2", content="two"),
        ],
    )
    await store.release("cut")
    with pytest.raises(StoreError) as caught:
        await rewind_session(Runtime(kernel, store), "cut", 1)
    assert caught.value.code is ErrorCode.SESSION_BUSY
    assert "turn 2 open" in str(caught.value)
    # A branch copies the ended turns only.
    branch = await branch_session(Runtime(kernel, store), "cut")
    assert branch.seed_length == 3


async def test_a_subagent_or_a_closed_session_is_refused(kernel, store):
    runtime = Runtime(kernel, store)
    original, _ = await run(runtime, ["one", "two"])
    child = SessionHeader(
        id="child", created_at=time.time(), parent_session=original, origin="subagent"
    )
    await store.create(child, [TurnStarted(turn=1), TurnEnded(turn=1, stop_reason="completed")])
    await store.release("child")
    for attempt in (branch_session(runtime, "child"), rewind_session(runtime, "child", 0)):
        with pytest.raises(SubagentError) as caught:
            await attempt
        assert caught.value.code is ErrorCode.UNAUTHORIZED
    await store.close_session(original, at=time.time())
    with pytest.raises(StoreError) as closed:
        await rewind_session(runtime, original, 1)
    assert closed.value.code is ErrorCode.SESSION_CLOSED
    branch = await branch_session(runtime, original, at_turn=1)  # a closed one branches
    assert branch.closed_at is None


def test_the_fold_undoes_skills_and_inbox_but_not_budgets_or_turn_numbers():
    skill = '<skill_content name="pdf">\nuse pdftk\n</skill_content>'
    budget_before = DescriptorEvent(kind="budget", data={"spent": 1})
    budget_after = DescriptorEvent(kind="budget", data={"spent": 5})
    prefix: list[Event] = [
        TurnStarted(turn=1, message_id="m1"),
        UserMessage(message_id="m1", content="one"),
        TurnEnded(turn=1, stop_reason="completed"),
        budget_before,
    ]
    log: list[Event] = [
        *prefix,
        InboxAccepted(message_id="m2", content="two"),
        TurnStarted(turn=2, message_id="m2"),
        UserMessage(message_id="m2", content="two"),
        ContextMessage(role="user", content=skill, origin="skill"),
        TurnEnded(turn=2, stop_reason="completed"),
        budget_after,
        InboxAccepted(message_id="m3", content="queued for later"),
        RewindEvent(to_turn=1, keep=3),
    ]
    before = fold(log[:-1])
    assert skill in [m.content for m in before.history]
    assert [p.message_id for p in before.unclaimed] == ["m3"]

    after = fold(log)
    assert skill not in [m.content for m in after.history]  # the skill is unloaded
    assert after.history == fold(prefix).history
    assert after.unclaimed == []  # what waited goes with the undone turns
    assert after.budget == budget_after  # what was spent stays spent
    assert after.turns == 2  # the next turn is 3
    assert after.completed == len(log)  # a fork copies the rewind too


SKILL_PROFILE = """
[tether]
plugins = ["skill-tool"]
[agent.main]
model = "scripted:none.toml"
"""


async def test_a_skill_loaded_after_the_cut_is_unloaded_and_the_catalog_shown_again(
    tether_kernel, store
):
    import itertools

    import tether_skill_tool
    from tether.models import ModelResponse, ToolCall
    from tether.skills import DirectoryResources, InvocationPolicy

    kernel = tether_kernel(SKILL_PROFILE, {"skill-tool": tether_skill_tool.SkillToolPlugin})
    runtime = Runtime(kernel, store)
    runtime.skills.register(
        {
            "name": "review",
            "description": "Reviews code.",
            "content": "Read every line twice.",
            "invocation": InvocationPolicy(),
            "resource_base": DirectoryResources(path="/skills/review"),
        }
    )
    ids = itertools.count()

    def model() -> FunctionModel:
        def answer(request: ModelRequest) -> ModelResponse | str:
            last = request.messages[-1]
            if last.role == "user" and last.content == "load it":
                call = ToolCall(id=f"c{next(ids)}", name="load_skill", arguments={"name": "review"})
                return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
            return f"answer to {last.content[:20]}"

        return FunctionModel(answer)

    first = model()
    agent = await runtime.compose(model=first)
    original = agent.session_id
    await runtime.run_session(agent, ["hello", "load it"])
    loaded = [m.content for m in fold(await log_of(store, original)).history]
    assert any("Read every line twice." in text for text in loaded)

    await rewind_session(runtime, original, 1)
    history = [m.content for m in fold(await log_of(store, original)).history]
    assert not any("Read every line twice." in text for text in history)  # unloaded
    again = model()
    agent = await runtime.compose(model=again, session_id=original)
    await runtime.run_session(agent, ["load it"])
    assert serialized(again.requests[0]) == serialized(first.requests[1])

    await rewind_session(runtime, original, 0)  # before the catalog was first shown
    start = model()
    agent = await runtime.compose(model=start, session_id=original)
    await runtime.run_session(agent, ["hello"])
    assert any("<available_skills>" in m.content for m in start.requests[0].messages)
    assert serialized(start.requests[0]) == serialized(first.requests[0])
    assert await tree_problems(store, original) == {}
