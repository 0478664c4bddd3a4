"""tether as an MCP client that offers sampling, elicitation and roots: against
server-everything (its tools that need them are listed only when the client declares them) and
against ``asking_server.py`` (a Python SDK server whose tools ask for each), through real
profiles, a real store and the agents' own models (function models)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tether.agents import Elicitation, PermissionQuestion
from tether.models import (
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ScriptStep,
    ToolCall,
)
from tether.runtime import Runtime
from tether.store import DescriptorEvent
from tether_mcp_client import SAMPLING_DESCRIPTOR

from .conftest import call, calls, load, says, stdio, tool_messages, write_profile

pytestmark = pytest.mark.anyio

ASKING = [sys.executable, str(Path(__file__).parent / "asking_server.py")]


def sampling_model(*steps: ScriptStep, answer: str = "a one-line summary") -> FunctionModel:
    """The agent's model: its turns play ``steps``; a sampling request is answered with
    ``answer``. Every request is kept in ``.requests``."""
    scripted = ScriptedModel(list(steps), samplings=[ScriptStep(text=answer)] * 5)
    return FunctionModel(scripted.request, name="scripted:agent")


def write(tmp_path: Path, entry: dict[str, object], approval: str | None = "allow") -> Path:
    """A profile with ``entry`` and the agent ``main`` of approval policy ``approval``."""
    path = write_profile(tmp_path, [entry])
    if approval is not None:
        text = path.read_text().replace(
            "[agent.main]\n", f'[agent.main]\napproval = "{approval}"\n'
        )
        path.write_text(text)
    return path


def sampled(requests: list[ModelRequest]) -> list[ModelRequest]:
    return [request for request in requests if request.purpose == "sampling"]


# ---------------------------------------------------------------------------- sampling


async def test_a_servers_sampling_request_is_answered_by_the_agents_model_and_recorded(
    tmp_path: Path,
):
    kernel, store = load(write(tmp_path, stdio("asking", ASKING, sampling={"max_tokens": 300})))
    model = sampling_model(calls(call("asking__summarize", text="a long text")), says("done"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        assert await runtime.run_session(agent, ["summarize"]) == "completed"
        (result,) = tool_messages(agent)
        assert not result.is_error, result.content
        assert result.content == "model scripted:agent said: a one-line summary"
        (request,) = sampled(model.requests)
        assert request.system == ("You summarize in one line.",)
        assert [m.content for m in request.messages] == ["Summarize: a long text"]
        assert request.tools == ()
        assert request.max_output_tokens == 300  # the server asked 50,000: capped
        events = [s.event for s in await store.events(agent.session_id)]
    (record,) = [
        e for e in events if isinstance(e, DescriptorEvent) and e.kind == SAMPLING_DESCRIPTOR
    ]
    assert record.data["server"] == "asking"
    assert record.data["tool"] == "summarize"
    assert record.data["model"] == "scripted:agent"
    assert record.data["usage"]["output_tokens"] > 0


@pytest.mark.parametrize("answer", ["reject", "no host"])
async def test_sampling_under_an_ask_policy_asks_the_host_and_a_refusal_is_named(
    tmp_path: Path, answer: str
):
    kernel, store = load(write(tmp_path, stdio("asking", ASKING), approval="ask"))
    model = sampling_model(calls(call("asking__summarize", text="secret plans")), says("ok"))
    questions: list[PermissionQuestion] = []

    async def host(question: PermissionQuestion) -> str:
        questions.append(question)
        return "reject"

    async with Runtime.open(
        kernel, store, permission_host=host if answer == "reject" else None
    ) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["summarize"])
    (result,) = tool_messages(agent)
    assert result.is_error
    assert sampled(model.requests) == []
    assert "refused the call" not in result.content
    assert 'the MCP server "asking" could not finish summarize: it asked tether for sampling' in (
        result.content
    )
    if answer == "reject":
        (question,) = questions
        assert question.asker == 'MCP server "asking" during summarize, for agent "main"'
        assert question.title.startswith("sampling/createMessage (up to 50000 tokens): ")
        assert "Summarize: secret plans" in question.title
        assert question.session == agent.session_id
        assert "was not approved" in result.content
    else:
        assert "nobody can answer" in result.content


async def test_a_named_sampling_model_answers_instead_of_the_agents(tmp_path: Path):
    script = tmp_path / "sampler.toml"
    script.write_text('[[samplings]]\ntext = "from the named model"\n')
    entry = stdio("asking", ASKING, sampling={"model": f"scripted:{script}"})
    kernel, store = load(write(tmp_path, entry))
    model = sampling_model(calls(call("asking__summarize", text="x")), says("ok"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["summarize"])
    (result,) = tool_messages(agent)
    assert result.content == f"model scripted:{script} said: from the named model"
    assert sampled(model.requests) == []


async def test_sampling_turned_off_is_not_declared_and_the_error_says_what_tether_lacks(
    tmp_path: Path, everything: list[str]
):
    entries = [
        stdio("asking", ASKING, sampling=False, elicitation=False, roots=False),
        stdio("everything", everything, sampling=False, elicitation=False, roots=False),
    ]
    kernel, store = load(write_profile(tmp_path, entries))
    model = sampling_model(calls(call("asking__summarize", text="x")), says("ok"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        names = set(agent.tools.names())
        for hidden in ("trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"):
            assert f"everything__{hidden}" not in names
        await runtime.run_session(agent, ["summarize"])
    (result,) = tool_messages(agent)
    assert result.is_error
    assert "refused the call" not in result.content
    assert (
        'the MCP server "asking" could not finish summarize: it needs the client capability '
        "sampling, which tether has turned off in its entry"
    ) in result.content


# ---------------------------------------------------------------------------- elicitation


@pytest.mark.parametrize("host_answers", [True, False])
async def test_an_elicitation_asks_the_permission_host_for_the_fields(
    tmp_path: Path, host_answers: bool
):
    kernel, store = load(write(tmp_path, stdio("asking", ASKING)))
    model = sampling_model(calls(call("asking__book", what="the concert")), says("ok"))
    asked: list[Elicitation] = []

    async def host(question: PermissionQuestion) -> str:
        assert question.elicitation is not None
        asked.append(question.elicitation)
        question.elicitation.content.update(seats=2, window=True)
        return "accept"

    async with Runtime.open(kernel, store, permission_host=host if host_answers else None) as rt:
        agent = await rt.compose(agent="main", model=model)
        await rt.run_session(agent, ["book"])
    (result,) = tool_messages(agent)
    assert not result.is_error, result.content
    if host_answers:
        assert result.content == 'accept: {"seats": 2, "window": true}'
        (elicitation,) = asked
        assert elicitation.message == "How many seats for the concert?"
        assert elicitation.mode == "form"
        assert set(elicitation.schema["properties"]) == {"seats", "window"}
        assert elicitation.schema["required"] == ["seats"]
    else:  # nobody can answer: declined, and the server goes on
        assert result.content == "decline: null"


# ---------------------------------------------------------------------------- roots


async def test_roots_are_the_agents_folder_then_the_entrys_paths(tmp_path: Path):
    work = tmp_path / "work"
    shared = tmp_path / "shared"
    work.mkdir()
    shared.mkdir()
    kernel, store = load(write(tmp_path, stdio("asking", ASKING, roots={"paths": ["shared"]})))
    model = sampling_model(calls(call("asking__where")), says("ok"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model, cwd=work)
        await runtime.run_session(agent, ["where"])
    (result,) = tool_messages(agent)
    assert result.content.splitlines() == [work.resolve().as_uri(), shared.resolve().as_uri()]


async def test_the_filesystem_server_works_in_the_roots_tether_gives_it(
    tmp_path: Path, filesystem: Callable[..., list[str]]
):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("from the root\n")
    outside = tmp_path / "outside.md"
    outside.write_text("not yours\n")
    # No folder in its arguments: the filesystem server serves the client's roots (the
    # process's folder, then roots.paths), which it reads once started.
    entry = stdio("files", filesystem(), roots={"paths": [str(work)]})
    kernel, store = load(write(tmp_path, entry))
    reads = [
        ToolCall(
            id="inside", name="files__read_text_file", arguments={"path": str(work / "notes.md")}
        ),
        ToolCall(id="outside", name="files__read_text_file", arguments={"path": str(outside)}),
    ]
    asked = 0
    ready = False

    async def model_function(request: ModelRequest) -> ModelResponse:
        # The server asks for the roots after its handshake, concurrently with the first call:
        # list its allowed folders until the roots have arrived, as a model would, then read.
        nonlocal asked, ready
        last = request.messages[-1]
        ready = ready or (asked > 0 and str(work.resolve()) in last.content)
        if not ready:
            assert asked < 100, f"the server never listed {work}: {last.content}"
            if asked:
                await anyio.sleep(0.05)
            asked += 1
            listing = ToolCall(id=f"list-{asked}", name="files__list_allowed_directories")
            return ModelResponse(tool_calls=(listing,), finish_reason="tool_calls")
        if reads:
            return ModelResponse(tool_calls=(reads.pop(0),), finish_reason="tool_calls")
        return ModelResponse(text="ok")

    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=FunctionModel(model_function))
        await runtime.run_session(agent, ["read"])
    inside, refused = tool_messages(agent)[asked:]
    assert inside.content == "from the root\n"
    assert refused.is_error
    assert "outside allowed directories" in refused.content


# ---------------------------------------------------------------------------- server-everything


async def test_server_everything_samples_elicits_and_lists_roots_through_tether(
    tmp_path: Path, everything: list[str]
):
    work = tmp_path / "work"
    work.mkdir()
    kernel, store = load(write(tmp_path, stdio("everything", everything)))
    model = sampling_model(
        calls(call("everything__trigger-sampling-request", prompt="hello", maxTokens=40)),
        calls(call("everything__trigger-elicitation-request")),
        calls(call("everything__get-roots-list")),
        says("ok"),
        answer="sampled hello",
    )
    questions: list[PermissionQuestion] = []

    async def host(question: PermissionQuestion) -> str:
        questions.append(question)
        elicitation = question.elicitation
        assert elicitation is not None
        required = elicitation.schema.get("required", [])
        properties = elicitation.schema["properties"]
        for name in required:
            field = properties[name]
            kind = field.get("type")
            value: object = "Ada"
            if "enum" in field:
                value = field["enum"][0]
            elif kind in ("integer", "number"):
                value = field.get("minimum", 1)
            elif kind == "boolean":
                value = True
            elicitation.content[name] = value
        return "accept"

    async with Runtime.open(kernel, store, permission_host=host) as runtime:
        agent = await runtime.compose(agent="main", model=model, cwd=work)
        names = set(agent.tools.names())
        for shown in ("trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"):
            assert f"everything__{shown}" in names
        await runtime.run_session(agent, ["try everything"])
    sampling, elicitation, roots = tool_messages(agent)
    assert not sampling.is_error, sampling.content
    assert "LLM sampling result" in sampling.content
    answered = json.loads(sampling.content.split("\n", 1)[1])
    assert answered["content"] == {"type": "text", "text": "sampled hello"}
    assert answered["model"] == "scripted:agent"
    (request,) = sampled(model.requests)
    assert request.max_output_tokens == 40
    assert request.system == ("You are a helpful test server.",)
    assert not elicitation.is_error, elicitation.content
    assert "accept" in elicitation.content.lower()
    (question,) = questions
    assert question.asker.startswith('MCP server "everything" during trigger-elicitation-request')
    assert not roots.is_error, roots.content
    assert work.resolve().as_uri() in roots.content
