"""Every reset keeps the context (docs/compaction.md): after a compaction in the middle of a
turn, a compaction between turns, ``tether sessions compact``, and a restore in a new runtime
(after a compaction or not), the next request holds the base prompt, the tools, the skills
catalog, the pinned instructions and the loaded skills (:func:`assert_context_kept`).

Real SQLite files, the real skill-tool plugin (and skills-fs through the CLI), and
``function:`` models.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tether
import tether_skill_tool
from tether.agents import AgentLimits, DynamicInstruction, Tool
from tether.cli import cli
from tether.models import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, ToolCall
from tether.runtime import compose_agent
from tether.skills import DirectoryResources, InvocationPolicy
from tether.store import CompactionEvent, SQLiteStore

from .reset_context import Context, assert_context_kept, first_after

pytestmark = pytest.mark.anyio

WINDOW = 3_000
#: A lookup result of about 300 tokens: a few of them fill the window.
RESULT = "data " * 240
PROFILE = """
[tether]
plugins = ["skill-tool", "extras"]
[agent.main]
model = "scripted:none.toml"
"""
SKILL_BODY = "Review every line twice."


class Extras:
    """A tool and two pinned instructions: one resolved once a session, one every turn."""

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        return [Tool("lookup", "Look something up.", lambda arguments, context: RESULT)]

    @tether.hookimpl
    def tether_instructions(self) -> list[DynamicInstruction]:
        return [
            DynamicInstruction("persona", lambda ctx: "be brief", when="session"),
            DynamicInstruction("clock", lambda ctx: f"turn {ctx.turn}", when="turn"),
        ]


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


@pytest.fixture
def new_runtime(tether_runtime):
    """A fresh runtime (another process's, as far as plugin state goes) with one skill."""

    def make():
        runtime = tether_runtime(
            PROFILE, {"skill-tool": tether_skill_tool.SkillToolPlugin, "extras": Extras()}
        )
        runtime.skills.register(
            {
                "name": "review",
                "description": "Review code carefully.",
                "content": SKILL_BODY,
                "invocation": InvocationPolicy(),
                "resource_base": DirectoryResources(path="/skills/review"),
            }
        )
        return runtime

    return make


_ids = itertools.count()


def call(tool: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=(ToolCall(id=f"{tool}-{next(_ids)}", name=tool, arguments=arguments),),
        finish_reason="tool_calls",
    )


#: The lookups repeat on purpose (they only fill the window): no repeated-call limit.
FILLING = AgentLimits(context_window=WINDOW, max_repeated_calls=0)


class Plays:
    """A function model's answers in order (``"done"`` once they run out); every summary
    request is answered with a short summary."""

    def __init__(self, *answers: str | ModelResponse) -> None:
        self.answers = list(answers)

    def __call__(self, request: ModelRequest) -> str | ModelResponse:
        if request.purpose == "compaction":
            return "The user had a skill loaded and asked for lookups."
        return self.answers.pop(0) if self.answers else "done"


def expected(request: ModelRequest, turn: int) -> Context:
    return Context(
        system=request.system,
        tools=frozenset({"lookup", "load_skill"}),
        catalog=("review",),
        instructions={"persona": "be brief", "clock": f"turn {turn}"},
        skills=("review",),
    )


def after_compaction(model: FunctionModel) -> ModelRequest:
    """The first request of a turn sent after the (first) summary request."""
    requests = list(model.requests)
    index = next(i for i, r in enumerate(requests) if r.purpose == "compaction")
    return first_after(requests, index)


async def test_a_compaction_in_the_middle_of_a_turn_keeps_the_context(new_runtime, store):
    """The turn's third step compacts: its request still has the catalog (the real-model run
    had it only one step later, after the tool results)."""
    model = FunctionModel(
        Plays(call("load_skill", name="review"), "loaded", *[call("lookup") for _ in range(8)])
    )
    agent = await compose_agent(new_runtime(), store, model=model, limits=FILLING)
    async with agent:
        assert await agent.run("load the review skill") == "completed"
        assert await agent.run("look things up") == "completed"
    assert agent.budget.compactions >= 1
    request = after_compaction(model)
    assert request.messages[-1].role == "tool"  # in the middle of the turn: after a result
    assert_context_kept(request, expected(request, 2))
    first_turn = model.requests[0]
    assert request.system == first_turn.system
    assert request.tools == first_turn.tools


async def test_a_scripted_run_through_a_compaction_in_the_middle_of_a_turn_plays_through(
    new_runtime, store
):
    """The scripted model's ``expect`` reads the last user or tool message: a catalog shown
    again after the tool results (one step late) made the run fail with SCRIPT_MISMATCH."""
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "review"}}]},
        {"expect": SKILL_BODY, "text": "loaded"},
    ]
    for n in range(8):
        steps.append({"tool_calls": [{"name": "lookup", "id": f"look{n}"}]})
        steps[-1]["expect"] = "look things up" if n == 0 else "data"
    steps.append({"expect": "data", "text": "done"})
    model = ScriptedModel.from_data({"steps": steps})
    agent = await compose_agent(new_runtime(), store, model=model, limits=FILLING)
    async with agent:
        assert await agent.run("load the review skill") == "completed"
        assert await agent.run("look things up") == "completed", agent.loop.last_error
    assert agent.budget.compactions >= 1
    model.assert_consumed()


async def test_a_compaction_at_the_first_step_of_a_turn_keeps_the_context(new_runtime, store):
    """The history outgrows the window between turns: the next turn's first step compacts."""
    model = FunctionModel(Plays(call("load_skill", name="review"), "loaded"))
    agent = await compose_agent(
        new_runtime(), store, model=model, limits=AgentLimits(context_window=WINDOW)
    )
    async with agent:
        assert await agent.run("load the review skill") == "completed"
        turn = 2
        while agent.budget.compactions == 0:
            assert await agent.run(f"remember this: {RESULT}") == "completed"
            turn += 1
    request = after_compaction(model)
    assert request.messages[-1].content.startswith("remember this")
    assert_context_kept(request, expected(request, turn - 1))


async def test_a_manual_compaction_between_turns_keeps_the_context(new_runtime, store):
    model = FunctionModel(Plays(call("load_skill", name="review"), "loaded"))
    agent = await compose_agent(new_runtime(), store, model=model)
    async with agent:
        for prompt in ("load the review skill", "one", "two", "three"):
            assert await agent.run(prompt) == "completed"
        assert await agent.compact() is not None
        assert await agent.run("after") == "completed"
    request = after_compaction(model)
    assert_context_kept(request, expected(request, 5))


@pytest.mark.parametrize("compacted", [True, False], ids=["compacted", "not-compacted"])
async def test_a_restore_in_a_new_runtime_keeps_the_context(new_runtime, store, compacted):
    model = FunctionModel(Plays(call("load_skill", name="review"), "loaded"))
    agent = await compose_agent(new_runtime(), store, model=model)
    async with agent:
        for prompt in ("load the review skill", "one", "two"):
            assert await agent.run(prompt) == "completed"
        if compacted:
            assert await agent.compact() is not None
    again = FunctionModel(Plays())
    restored = await compose_agent(new_runtime(), store, model=again, session_id=agent.session_id)
    async with restored:
        assert restored.budget.compactions == (1 if compacted else 0)
        assert await restored.run("after the restore") == "completed"
    (request,) = again.requests
    assert_context_kept(request, expected(request, 4))


# ------------------------------------------------------------------- tether sessions compact

CLI_PROFILE = """\
[tether]
plugins = ["skills-fs", "skill-tool", "extras"]
plugin_dirs = ["plugins"]
store = "sqlite:sessions.db"

[plugin.skills-fs]
roots = ["skills"]
project = false
user = false

[agent.main]
model = "function:reset_model:model"
"""
CLI_MODEL = """\
import json, os
from tether.models import ModelResponse, ToolCall

def model(request):
    with open(os.environ["RESET_REQUESTS"], "a") as log:
        log.write(request.model_dump_json() + "\\n")
    if request.purpose == "compaction":
        return "The user loaded the review skill."
    asked = [m.content for m in request.messages if m.role == "user" and m.content[:1] != "<"]
    if asked[-1:] == ["load review"] and request.messages[-1].role != "tool":
        call = ToolCall(id="load", name="load_skill", arguments={"name": "review"})
        return ModelResponse(tool_calls=(call,), finish_reason="tool_calls")
    return "noted"
"""
CLI_PLUGIN = """\
import tether
from tether.agents import DynamicInstruction, Tool

@tether.hookimpl
def tether_tools():
    return [Tool("lookup", "Look something up.", lambda arguments, context: "found")]

@tether.hookimpl
def tether_instructions():
    return [
        DynamicInstruction("persona", lambda ctx: "be brief", when="session"),
        DynamicInstruction("clock", lambda ctx: f"turn {ctx.turn}", when="turn"),
    ]
"""


def test_tether_sessions_compact_keeps_the_context(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RESET_REQUESTS", str(tmp_path / "requests.jsonl"))
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "tether.toml").write_text(CLI_PROFILE)
    (tmp_path / "reset_model.py").write_text(CLI_MODEL)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "extras.py").write_text(CLI_PLUGIN)
    skill = tmp_path / "skills" / "review"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: review\ndescription: Review code carefully.\n---\n{SKILL_BODY}\n"
    )
    runner = CliRunner()
    result = runner.invoke(cli, ["run", "load review", "one", "two"])
    assert result.exit_code == 0, result.output
    (session_id,) = re.findall(r"^session (ses_\w+)$", result.stdout, re.M)
    result = runner.invoke(cli, ["sessions", "compact", session_id])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["run", "--session", session_id, "after"])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "requests.jsonl").read_text().splitlines()
    requests = [ModelRequest.model_validate(json.loads(line)) for line in lines]
    assert sum(r.purpose == "compaction" for r in requests) == 1
    request = requests[-1]
    assert request.messages[0].content.startswith("<conversation_summary>")
    assert_context_kept(request, expected(request, 4))


async def test_the_invariant_is_checked_on_every_stored_compaction(new_runtime, store):
    """What a compaction stores restates the pinned instructions and the loaded skill (the
    catalog is the skill tool's to show again, and the request above shows it)."""
    model = FunctionModel(
        Plays(call("load_skill", name="review"), "loaded", *[call("lookup") for _ in range(8)])
    )
    agent = await compose_agent(new_runtime(), store, model=model, limits=FILLING)
    async with agent:
        await agent.run("load the review skill")
        await agent.run("look things up")
    events = [s.event for s in await store.events(agent.session_id)]
    stored = [e for e in events if isinstance(e, CompactionEvent)]
    assert stored
    for event in stored:
        kept = [m.content for m in event.kept]
        assert any(c.startswith('<skill_content name="review">') for c in kept)
        assert '<instruction slug="persona">\nbe brief\n</instruction>' in kept
