"""Context-window budgets and compaction (docs/compaction.md), on real SQLite logs.

A request never goes out over its model's window; ``auto`` compacts at the threshold; a
compaction is one durable event, and what the model sees after it (summary, restated context,
kept tail) is what a restore rebuilds; requests only grow, except exactly one reset per
compaction whose base prompt and tools are byte-identical.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

import tether
from tether.agents import (
    SUMMARY_INSTRUCTION,
    Agent,
    AgentLimits,
    CompactionPolicy,
    CompactionStrategy,
    DynamicInstruction,
    Tool,
    ToolRegistry,
    build_preset,
    new_header,
)
from tether.agents._limits import CompactionMode
from tether.errors import AgentError, ErrorCode, ModelError, ProfileError
from tether.models import (
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ToolCall,
    Usage,
    estimate_tokens,
    window_for,
)
from tether.runtime import compose_agent
from tether.store import CompactionEvent, SQLiteStore
from tether.store.replay import fold

pytestmark = pytest.mark.anyio

WINDOW = 2_000
ANSWER = "word " * 80  # about 100 tokens


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


def answers(request: ModelRequest) -> str:
    if request.purpose == "compaction":
        assert request.messages[-1].content == SUMMARY_INSTRUCTION
        return f"Summary of {len(request.messages) - 1} messages."
    return ANSWER


async def agent_on(
    store, model, *, window: int | None = WINDOW, mode: CompactionMode = "auto", **kw
) -> Agent:
    header = await store.create(new_header(agent="main"))
    agent = Agent(
        header=header,
        store=store,
        model=model,
        limits=AgentLimits(context_window=window),
        compaction=CompactionPolicy(mode=mode),
        new_session=True,
        **kw,
    )
    return agent


async def compactions(store, agent) -> list[CompactionEvent]:
    return [
        s.event
        for s in await store.events(agent.session_id)
        if isinstance(s.event, CompactionEvent)
    ]


def check_view(messages) -> None:
    """A history a model API accepts: every tool result follows the call it answers."""
    called: set[str] = set()
    for message in messages:
        if message.role == "assistant":
            called.update(call.id for call in message.tool_calls)
        elif message.role == "tool":
            assert message.tool_call_id in called


async def test_auto_compaction_keeps_every_request_within_the_window(store):
    model = FunctionModel(answers)
    agent = await agent_on(store, model)
    async with agent:
        for n in range(40):
            assert await agent.run(f"question {n}") == "completed"
    window = agent.budget.window
    assert window is not None
    budget = window.budget()
    turns = [r for r in model.requests if r.purpose == "turn"]
    assert len(turns) == 40
    probe = await agent_on(store, FunctionModel(answers))
    for request in turns:
        probe.budget.history[:] = request.messages
        probe.budget._tally = None  # pyright: ignore[reportPrivateUsage]
        assert probe.budget.context_tokens() <= budget
    stored = await compactions(store, agent)
    assert len(stored) >= 3
    assert all(event.trigger == "auto" for event in stored)
    # The prompt only grows, except exactly one reset per compaction; base bytes unchanged.
    resets = 0
    for before, after in itertools.pairwise(turns):
        assert (after.system, after.tools) == (before.system, before.tools)
        if after.messages[: len(before.messages)] != before.messages:
            resets += 1
            assert after.messages[0].content.startswith("<conversation_summary>")
    assert resets == len(stored)
    check_view(agent.messages)


async def test_the_view_a_restore_rebuilds_is_the_one_the_agent_had(store):
    agent = await agent_on(store, FunctionModel(answers))
    async with agent:
        for n in range(25):
            await agent.run(f"question {n}")
    assert await compactions(store, agent)
    again = Agent(header=agent.header, store=store, model=FunctionModel(answers))
    await again.restore(repair=False)
    assert again.messages == agent.messages
    assert again.budget.earlier_answers == agent.budget.earlier_answers > 0
    # The log keeps every message: nothing was deleted.
    events = [s.event for s in await store.events(agent.session_id)]
    assert sum(1 for e in events if e.type == "assistant/message") == 25


async def test_a_tool_call_is_never_split_from_its_results(store):
    def calls(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "summary"
        last = request.messages[-1]
        if last.role == "user":
            batch = tuple(
                ToolCall(id=f"c{len(request.messages)}_{i}", name="look", arguments={})
                for i in range(3)
            )
            return ModelResponse(tool_calls=batch, finish_reason="tool_calls")
        return ANSWER

    async def look(arguments, context) -> str:
        return "seen " * 60

    tools = ToolRegistry([Tool("look", "Look.", look, {"type": "object", "properties": {}})])
    agent = await agent_on(store, FunctionModel(calls), tools=tools)
    async with agent:
        for n in range(20):
            assert await agent.run(f"look {n}") == "completed"
    assert len(await compactions(store, agent)) >= 2
    check_view(agent.messages)
    for event in await compactions(store, agent):
        check_view(event.kept)


async def test_dynamic_instructions_and_loaded_skills_survive_a_compaction(store):
    values = iter(range(1000))

    async def clock(context) -> str:
        return f"tick {next(values)}"

    skill = '<skill_content name="pdf">\nHow to read PDFs.\n</skill_content>'

    def script(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "summary"
        if sum(1 for m in request.messages if m.role == "assistant") == 0:
            call = ToolCall(id="s1", name="load_skill", arguments={"name": "pdf"})
            return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
        return ANSWER

    async def load_skill(arguments, context) -> str:
        return skill

    tools = ToolRegistry([Tool("load_skill", "Load.", load_skill, {"type": "object"})])
    agent = await agent_on(
        store,
        FunctionModel(script),
        tools=tools,
        instructions=[DynamicInstruction("clock", clock, when="turn")],
    )
    async with agent:
        for n in range(25):
            await agent.run(f"question {n}")
    assert await compactions(store, agent)
    contents = [m.content for m in agent.messages]
    assert skill in contents  # restated, though its tool call was replaced
    latest = f'<instruction slug="clock">\ntick {agent.turns - 1}\n</instruction>'
    assert latest in contents


async def test_manual_mode_never_sends_an_oversized_request_and_compacts_on_demand(store):
    model = FunctionModel(answers)
    agent = await agent_on(store, model, mode="manual")
    async with agent:
        stops = [await agent.run(f"question {n}") for n in range(20)]
        assert "error" in stops
        assert "CONTEXT_WINDOW_EXCEEDED" in (agent.loop.last_error or "")
        assert not await compactions(store, agent)
        sent = len(model.requests)
        event = await agent.compact()
        assert event is not None
        assert event.trigger == "manual"
        assert len(model.requests) == sent + 1  # the summary request
        assert await agent.run("after") == "completed"
    window = agent.budget.window
    assert window is not None
    probe = await agent_on(store, FunctionModel(answers))
    for request in model.requests:
        probe.budget.history[:] = request.messages
        probe.budget._tally = None  # pyright: ignore[reportPrivateUsage]
        assert probe.budget.context_tokens() <= window.tokens


async def test_with_compaction_off_compact_is_refused_and_overflow_is_an_error(store):
    agent = await agent_on(store, FunctionModel(answers), mode="off")
    async with agent:
        with pytest.raises(AgentError) as refused:
            await agent.compact()
        assert refused.value.code == ErrorCode.COMPACTION_FAILED
        stops = [await agent.run(f"question {n}") for n in range(20)]
    assert stops[-1] == "error"
    assert "compaction is off" in (agent.loop.last_error or "")


async def test_a_provider_that_refuses_a_long_request_gets_a_compacted_one(store):
    refused: list[int] = []

    def strict(request: ModelRequest) -> str:
        if request.purpose == "compaction":
            return "summary"
        if len(request.messages) > 12:
            refused.append(len(request.messages))
            raise ModelError(ErrorCode.CONTEXT_WINDOW_EXCEEDED, "maximum context length")
        return "ok"

    agent = await agent_on(store, FunctionModel(strict), window=None)
    async with agent:
        for n in range(12):
            assert await agent.run(f"question {n}") == "completed"
    stored = await compactions(store, agent)
    assert stored
    assert {event.trigger for event in stored} == {"overflow"}
    assert len(refused) == len(stored)  # each refusal compacted once, and the retry went through


async def test_a_summary_that_cannot_be_written_leaves_the_history_whole(store):
    def empty(request: ModelRequest) -> str:
        return "" if request.purpose == "compaction" else ANSWER

    agent = await agent_on(store, FunctionModel(empty), mode="manual")
    async with agent:
        for n in range(4):
            await agent.run(f"question {n}")
        before = agent.messages
        with pytest.raises(AgentError) as failed:
            await agent.compact()
    assert failed.value.code == ErrorCode.COMPACTION_FAILED
    assert agent.messages == before
    assert not await compactions(store, agent)


async def test_windows_come_from_the_agent_the_model_or_the_table():
    assert window_for("deepseek:deepseek-chat", None, None).tokens == 128_000  # type: ignore[union-attr]
    gpt = window_for("openai-compatible:gpt-4o-mini@http://x/v1", None, None)
    assert gpt is not None
    assert (gpt.tokens, gpt.source) == (128_000, "table")
    assert window_for("scripted:script.toml", None, None) is None
    told = FunctionModel(answers)
    told.context_window = 9_000  # type: ignore[attr-defined]
    assert window_for("function:x:y", told, None).source == "model"  # type: ignore[union-attr]
    mine = window_for("deepseek:deepseek-chat", told, 64_000)
    assert mine is not None
    assert (mine.tokens, mine.output, mine.source) == (64_000, 8_192, "agent")


async def test_fold_counts_the_last_usage_and_forgets_it_at_a_compaction(store):
    agent = await agent_on(store, FunctionModel(answers))
    async with agent:
        for n in range(25):
            await agent.run(f"question {n}")
    log = [s.event for s in await store.events(agent.session_id)]
    folded = fold(log)
    assert folded.compactions
    assert folded.last_compaction == (await compactions(store, agent))[-1]
    assert folded.counted is None  # a function model reports no usage


class Digest:
    """A plugin that writes summaries itself (no model call)."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    @tether.hookimpl
    def tether_compaction_strategies(self):
        async def summarize(task) -> str:
            self.inputs.append(task)
            return f"digest of {len(task.replaced)} messages"

        return [CompactionStrategy("digest", summarize)]


STRATEGY_PROFILE = """
[tether]
plugins = ["digest"]
[agent.main]
model = "scripted:none.toml"
context_window = 2000
compaction = { mode = "auto", threshold = 0.5, strategy = "digest" }
"""


async def test_hook_tether_compaction_strategies_write_the_summary(tether_kernel, store):
    digest = Digest()
    kernel = tether_kernel(STRATEGY_PROFILE, {"digest": digest})
    model = FunctionModel(answers)
    agent = await compose_agent(kernel, store, model=model)
    assert agent.spec.compaction == CompactionPolicy(mode="auto", threshold=0.5, strategy="digest")
    async with agent:
        for n in range(12):
            await agent.run(f"question {n}")
    stored = await compactions(store, agent)
    assert stored
    assert {event.strategy for event in stored} == {"digest"}
    assert stored[0].summary == f"digest of {len(digest.inputs[0].replaced)} messages"
    assert all(r.purpose == "turn" for r in model.requests)  # the model wrote no summary


async def test_an_unknown_strategy_or_a_second_summary_fails_at_compose(tether_kernel):
    kernel = tether_kernel(STRATEGY_PROFILE.replace('plugins = ["digest"]', ""), {})
    with pytest.raises(AgentError) as unknown:
        build_preset(kernel, "main")
    assert unknown.value.code == ErrorCode.COMPACTION_FAILED
    assert 'strategy "digest", which no plugin in its scope offers' in unknown.value.message

    class Impostor:
        @tether.hookimpl
        def tether_compaction_strategies(self):
            async def summarize(task) -> str:
                return ""

            return [CompactionStrategy("summary", summarize)]

    kernel = tether_kernel(STRATEGY_PROFILE, {"digest": Impostor()})
    with pytest.raises(AgentError) as impostor:
        build_preset(kernel, "main")
    assert 'offers a compaction strategy named "summary"' in impostor.value.message


async def test_a_mode_alone_is_a_compaction_setting(tether_kernel):
    kernel = tether_kernel('[agent.main]\nmodel = "scripted:x.toml"\ncompaction = "manual"\n')
    preset = build_preset(kernel, "main")
    assert preset.compaction == CompactionPolicy(mode="manual")
    assert preset.limits is None
    bad = '[agent.main]\nmodel = "scripted:x.toml"\ncompaction = { threshold = 2 }\n'
    with pytest.raises(ProfileError) as invalid:
        tether_kernel(bad)
    assert "compaction" in str(invalid.value)


def gated(gate: anyio.Event, asked: anyio.Event):
    async def answer(request: ModelRequest) -> str:
        if request.purpose == "compaction":
            asked.set()
            await gate.wait()
            return "summary"
        return ANSWER

    return FunctionModel(answer)


async def test_what_is_stored_while_the_summary_is_written_stays_in_view(store):
    gate, asked = anyio.Event(), anyio.Event()
    agent = await agent_on(store, gated(gate, asked))
    async with agent, anyio.create_task_group() as group:

        async def questions() -> None:
            for n in range(30):
                assert await agent.run(f"question {n}") == "completed"

        group.start_soon(questions)
        await asked.wait()  # a turn's first step is compacting; its claim is not stored yet
        await agent.steer("a steer that stores what the turn held")
        await agent.inject("an injected fact")
        gate.set()
    log = [s.event for s in await store.events(agent.session_id)]
    assert list(fold(log).history) == list(agent.messages)
    claims = [e.content for e in log if e.type == "user/message"]
    assert claims.count("an injected fact") == 1
    assert all(claims.count(f"question {n}") == 1 for n in range(30))


async def test_a_message_injected_while_an_idle_agent_compacts_is_kept(store):
    gate, asked = anyio.Event(), anyio.Event()
    agent = await agent_on(store, gated(gate, asked), mode="manual")
    async with agent:
        for n in range(6):
            await agent.run(f"question {n}")  # manual: no summary is asked for meanwhile
        async with anyio.create_task_group() as group:
            group.start_soon(agent.compact)
            await asked.wait()
            await agent.inject("injected while compacting")
            # A turn asked for meanwhile runs after the compaction, and run() waits for it.
            group.start_soon(agent.run, "asked while compacting")
            while not agent.inbox.pending:  # accepted, waiting for the compaction to end
                await anyio.sleep(0.01)
            gate.set()
        assert agent.messages[-1].content == ANSWER  # the turn ran before run() returned
    contents = [m.content for m in agent.messages]
    assert "injected while compacting" in contents
    assert "asked while compacting" in contents
    log = [s.event for s in await store.events(agent.session_id)]
    assert list(fold(log).history) == list(agent.messages)


async def test_a_strategy_that_raises_fails_the_compaction_cleanly(store):
    async def broken(task) -> str:
        raise ValueError("no summary today")

    agent = await agent_on(
        store,
        FunctionModel(answers),
        mode="manual",
        compaction_strategy=CompactionStrategy("broken", broken),
    )
    async with agent:
        for n in range(4):
            await agent.run(f"question {n}")
        before = agent.messages
        with pytest.raises(AgentError) as failed:
            await agent.compact()
    assert failed.value.code == ErrorCode.COMPACTION_FAILED
    assert "ValueError: no summary today" in failed.value.message
    assert agent.messages == before


async def test_a_changed_instruction_is_not_restated_and_appended_both(store):
    ticks = iter(range(1000))

    async def clock(context) -> str:
        return f"tick {next(ticks)}"

    agent = await agent_on(
        store,
        FunctionModel(answers),
        instructions=[DynamicInstruction("clock", clock, when="turn")],
    )
    async with agent:
        for n in range(25):
            await agent.run(f"question {n}")
    assert await compactions(store, agent)
    for value in {m.content for m in agent.messages if m.content.startswith("<instruction")}:
        assert sum(m.content == value for m in agent.messages) == 1


# --------------------------------------------------------------- the summary's bound (issue 37)


async def test_a_summary_over_its_bound_is_asked_for_again_then_cut(store):
    """A model that writes 5 MB for a 4,000-token window: asked once more (told the limit),
    then cut; what is stored fits, and every later turn goes on (it was stored whole, and
    every later turn failed with CONTEXT_WINDOW_EXCEEDED)."""
    asked: list[str] = []

    def verbose(request: ModelRequest) -> str:
        if request.purpose == "compaction":
            asked.append(request.messages[-1].content)
            return "summary " * 650_000  # about 5 MB
        return ANSWER

    agent = await agent_on(store, FunctionModel(verbose), window=4_000)
    async with agent:
        for n in range(60):
            assert await agent.run(f"question {n}") == "completed", agent.loop.last_error
    stored = await compactions(store, agent)
    assert len(stored) >= 2
    for event in stored:
        assert estimate_tokens(event.summary) <= 4_000 // 8
        assert event.summary.endswith("tokens]")  # cut, and says so
    assert asked[0] == SUMMARY_INSTRUCTION
    assert asked[1].startswith(SUMMARY_INSTRUCTION)
    assert "write it again, in at most" in asked[1]
    assert len(asked) == 2 * len(stored)  # once more per compaction, never more


async def test_a_summary_asked_for_again_is_kept_whole_when_it_fits(store):
    answers_given = iter(["long " * 10_000, "A short summary."])
    usage = Usage(input_tokens=100, output_tokens=10)

    def twice(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return ModelResponse(text=next(answers_given), usage=usage)
        return ANSWER

    agent = await agent_on(store, FunctionModel(twice), mode="manual")
    async with agent:
        for n in range(4):
            await agent.run(f"question {n}")
        event = await agent.compact()
    assert event is not None
    assert event.summary == "A short summary."
    assert event.usage == usage + usage  # both requests counted


async def test_the_kept_tail_begins_at_a_turns_message(store):
    """Never with an answer whose question was summarized away (each turn here is a tool
    step and an answer: the tail used to begin at either)."""

    def looks(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "summary"
        if request.messages[-1].role == "tool":
            return ANSWER
        call = ToolCall(id=f"c{len(request.messages)}", name="look", arguments={})
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")

    tools = ToolRegistry([Tool("look", "Look.", lambda arguments, context: "seen " * 60)])
    agent = await agent_on(store, FunctionModel(looks), tools=tools)
    async with agent:
        for n in range(40):
            await agent.run(f"question {n}")
    stored = await compactions(store, agent)
    assert len(stored) >= 3
    for event in stored:
        assert event.kept[0].role == "user"
        assert event.kept[0].content.startswith("question ")


async def test_a_turn_too_long_to_keep_whole_keeps_its_question_before_its_last_steps(store):
    """One turn of many tool steps outgrows the window: the tail is its last steps, after a
    copy of the message that asked for them."""
    steps = iter(range(1000))

    def dig(request: ModelRequest) -> Any:
        if request.purpose == "compaction":
            return "summary"
        n = next(steps)
        if n < 12:
            call = ToolCall(id=f"c{n}", name="look", arguments={"step": n})
            return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
        return "dug"

    tools = ToolRegistry([Tool("look", "Look.", lambda arguments, context: ANSWER * 2)])
    agent = await agent_on(store, FunctionModel(dig), tools=tools)
    async with agent:
        assert await agent.run("dig deep") == "completed", agent.loop.last_error
    stored = await compactions(store, agent)
    assert stored
    for event in stored:
        assert [m.content for m in event.kept[:1]] == ["dig deep"]
        assert event.kept[1].role == "assistant"
        check_view(event.kept)


async def test_an_answer_is_never_kept_without_its_question(store):
    """The last answer fits in what is kept, its question (long) with it does not: the
    question is kept before it, cut if need be (the tail used to begin with the answer)."""

    def long_answers(request: ModelRequest) -> str:
        return "summary" if request.purpose == "compaction" else "word " * 360

    agent = await agent_on(store, FunctionModel(long_answers), mode="manual")
    question = "second question " + "detail " * 60
    async with agent:
        await agent.run("first question")
        await agent.run(question)
        event = await agent.compact()
    assert event is not None
    assert event.kept[0].role == "user"
    assert event.kept[0].content[:15] == "second question"
    assert event.kept[1].role == "assistant"
    check_view(event.kept)
