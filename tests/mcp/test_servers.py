"""The mcp plugin against real MCP servers, through real profiles: tools of several servers in one
step, what their results look like to the model, filters and approvals, the filesystem and git
servers, a delegated child narrowed to one server, and a server whose tool list changes."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.remake import remade
from tether.agents import PermissionQuestion
from tether.errors import AgentError, ErrorCode
from tether.models import FunctionModel, ModelRequest, ScriptedModel
from tether.runtime import Runtime
from tether_mcp_client import SERVERS, connections

from .conftest import (
    call,
    call_as,
    calls,
    changing,
    load,
    results_by_id,
    says,
    script,
    stdio,
    tool_messages,
    tool_names,
    wait_until,
    write_profile,
)

pytestmark = pytest.mark.anyio


REFERENCE = "everything__get-resource-reference"


def results_by_tool(request: ModelRequest) -> dict[str, str]:
    """The tool results a request carried, by tool name."""
    return {m.name or "": m.content for m in request.messages if m.role == "tool"}


# ---------------------------------------------------------------------------- several servers


async def test_one_step_calls_tools_of_two_servers_and_both_results_reach_the_model(
    tmp_path: Path, everything: list[str], time_argv: list[str]
):
    profile = write_profile(tmp_path, [stdio("time", time_argv), stdio("everything", everything)])
    kernel, store = load(profile)
    model = script(
        calls(
            call("time__get_current_time", timezone="UTC"),
            call("everything__get-sum", a=2, b=3),
        ),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        tools = agent.tools
        # Read-only-annotated tools are safe (they run side by side) and idempotent (run
        # again after a crash); the others are not.
        for name in ("time__get_current_time", "time__convert_time", "everything__get-sum"):
            found = tools.get(name)
            assert found is not None, name
            assert found.safe, name
            assert found.idempotent, name
        toggle = tools.get("everything__toggle-simulated-logging")
        assert toggle is not None
        assert not toggle.safe
        assert await runtime.run_session(agent, ["what time is it, and 2 + 3?"]) == "completed"
    first, second = model.requests
    assert {"time__get_current_time", "everything__get-sum"} <= set(tool_names(first))
    results = results_by_tool(second)
    assert set(results) == {"time__get_current_time", "everything__get-sum"}
    now = json.loads(results["time__get_current_time"])
    assert now["timezone"] == "UTC"
    assert now["datetime"].endswith("+00:00")
    assert results["everything__get-sum"] == "The sum of 2 and 3 is 5."
    assert not any(m.is_error for m in tool_messages(agent))
    assert sorted(m.name or "" for m in tool_messages(agent)) == sorted(results)


# ---------------------------------------------------------------------------- result shapes


async def test_images_resources_links_and_structured_content_reach_the_model_as_text(
    tmp_path: Path, everything: list[str]
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    model = script(
        calls(
            call_as("image", "everything__get-tiny-image"),
            call_as("text", REFERENCE, resourceType="Text", resourceId=1),
            call_as("blob", REFERENCE, resourceType="Blob", resourceId=2),
            call_as("links", "everything__get-resource-links", count=2),
            call_as("structured", "everything__get-structured-content", location="New York"),
        ),
        says("seen"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["show me everything"])
    results = results_by_id(agent)
    assert not any(m.is_error for m in results.values())
    # Read-only tools: the five ran side by side, so they are found by call id.
    image, text, blob, links, structured = (
        results[key].content for key in ("image", "text", "blob", "links", "structured")
    )

    # An image is one line of the text: its type and size, never its base64 data.
    assert image.startswith("Here's the image you requested:\n")
    note = re.search(r"^\[image: image/png, ([\d,]+) bytes\b[^\]\n]*\]$", image, re.MULTILINE)
    assert note is not None, image
    assert int(note[1].replace(",", "")) > 100
    assert "iVBORw0KGgo" not in image  # the PNG's base64 signature

    # An embedded text resource is quoted whole, inside a block naming its URI and type.
    assert re.search(
        r'<resource uri="demo://resource/dynamic/text/1" type="text/plain">\n'
        r"Resource 1: This is a plaintext resource created at .+\n</resource>",
        text,
    )
    # A binary one is a note with its URI, type and decoded size.
    found = re.search(
        r"\[resource demo://resource/dynamic/blob/2: text/plain, (\d+) bytes: not shown", blob
    )
    assert found is not None
    assert int(found[1]) > 20
    assert "UmVzb3VyY2Ug" not in blob  # its base64 text

    assert links.splitlines()[1:] == [
        "[resource link: Blob Resource 1 <demo://resource/dynamic/blob/1>, text/plain]",
        "[resource link: Text Resource 2 <demo://resource/dynamic/text/2>, text/plain]",
    ]

    # The server sends its structured content as JSON text too: kept, and said once.
    weather = json.loads(structured)
    assert set(weather) == {"temperature", "conditions", "humidity"}
    assert "structured content:" not in structured


@pytest.mark.parametrize("accepts_images", [True, False])
async def test_an_image_reaches_a_model_that_takes_images_and_a_note_reaches_the_others(
    tmp_path: Path, everything: list[str], accepts_images: bool
):
    kernel, store = load(write_profile(tmp_path, [stdio("everything", everything)]))
    played = ScriptedModel([calls(call("everything__get-tiny-image")), says("a tiny image")])
    model = FunctionModel(played.request, name="scripted:test", accepts_images=accepts_images)
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["show me the image"])
    (seen,) = [m for m in model.requests[-1].messages if m.role == "tool"]
    placeholder = re.search(r"^\[image: image/png, ([\d,]+) bytes\]$", seen.content, re.M)
    assert placeholder is not None, seen.content
    if accepts_images:
        (image,) = seen.images
        assert image.mime_type == "image/png"
        decoded = base64.b64decode(image.data)
        assert decoded.startswith(b"\x89PNG")
        assert len(decoded) == int(placeholder[1].replace(",", ""))
    else:
        assert seen.images == ()
        assert seen.content.endswith("\n[1 image not shown: this model reads text only]")
    # The log keeps the image either way: a model that takes images sees it on resume.
    (logged,) = [m for m in agent.messages if m.role == "tool"]
    assert len(logged.images) == 1


async def test_structured_content_no_text_repeats_is_appended_and_an_error_result_is_an_error(
    tmp_path: Path,
):
    kernel, store = load(write_profile(tmp_path, [stdio("changing", changing())]))
    model = script(
        calls(call("changing__report", city="Oslo"), call("changing__refuse", reason="no way")),
        says("noted"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["weather?"])
    report, refusal = tool_messages(agent)
    assert not report.is_error
    text, appended = report.content.split("\nstructured content:\n")
    assert text == "weather for Oslo follows"
    assert json.loads(appended) == {"city": "Oslo", "temperature": 21, "sky": "clear"}
    assert refusal.is_error
    assert refusal.content == "error: Error executing tool refuse: no way"  # the server's words


async def test_a_string_result_of_a_python_sdk_server_is_not_repeated_as_structured_content(
    tmp_path: Path,
):
    """The Python SDK answers a tool that returns ``str`` with the text and, as structured
    content, ``{"result": TEXT}``: the same thing said twice. The model should read it once
    (as it reads a JSON text block that equals the structured content once)."""
    kernel, store = load(write_profile(tmp_path, [stdio("changing", changing())]))
    model = script(calls(call("changing__shout", text="hello")), says("heard"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["shout"])
    (shout,) = tool_messages(agent)
    assert shout.content == "HELLO"


async def test_a_long_result_is_cut_at_max_result_chars_with_a_note(
    tmp_path: Path, filesystem: Callable[..., list[str]]
):
    files = tmp_path / "files"
    files.mkdir()
    long = "".join(f"line {n:04d} of a long file\n" for n in range(200))  # 5,000 characters
    assert len(long) == 5_000
    (files / "long.txt").write_text(long)
    # roots off here and below: the filesystem server takes a client's roots in place of the
    # folders its arguments name (test_capabilities.py tests roots with it).
    entry = stdio("files", filesystem(files), max_result_chars=1000, roots=False)
    kernel, store = load(write_profile(tmp_path, [entry]))
    model = script(calls(call("files__read_text_file", path=str(files / "long.txt"))), says("ok"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["read it"])
    (result,) = tool_messages(agent)
    assert not result.is_error
    shown, note = result.content[:1000], result.content[1000:]
    assert shown == long[:1000]
    found = re.fullmatch(
        r"\n\[cut: the result of files__read_text_file was ([\d,]+) characters; the first "
        r"1,000 are shown \(max_result_chars\)\]",
        note,
    )
    assert found is not None, note
    assert int(found[1].replace(",", "")) >= 5_000


# ---------------------------------------------------------------------------- filesystem


async def test_the_filesystem_server_reads_and_writes_real_files(
    tmp_path: Path, filesystem: Callable[..., list[str]]
):
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.md").write_text("# Notes\nbuy milk\n")
    kernel, store = load(write_profile(tmp_path, [stdio("files", filesystem(files), roots=False)]))
    target = files / "out" / "todo.txt"
    target.parent.mkdir()
    model = script(
        calls(call("files__read_text_file", path=str(files / "notes.md"))),
        calls(call("files__write_file", path=str(target), content="1. buy milk\n")),
        calls(call("files__list_directory", path=str(files))),
        says("done"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["copy my todo"])
    read, write, listing = tool_messages(agent)
    assert not read.is_error
    assert not write.is_error
    assert not listing.is_error
    assert read.content.startswith("# Notes\nbuy milk\n")
    assert target.read_text() == "1. buy milk\n"
    assert "todo.txt" in write.content
    assert "[FILE] notes.md" in listing.content
    assert "[DIR] out" in listing.content


@pytest.mark.parametrize("policy", ["deny", "ask"])
async def test_a_write_that_needs_approval_runs_only_when_the_policy_allows(
    tmp_path: Path, filesystem: Callable[..., list[str]], policy: str
):
    files = tmp_path / "files"
    files.mkdir()
    entry = stdio("files", filesystem(files), needs_approval=["write_file"], roots=False)
    kernel, store = load(write_profile(tmp_path, [entry]))
    target = files / "secret.txt"
    model = script(
        calls(call("files__write_file", path=str(target), content="written")),
        says("finished"),
    )
    questions: list[PermissionQuestion] = []

    async def host(question: PermissionQuestion) -> str:
        questions.append(question)
        return "allow"

    async with Runtime.open(kernel, store, permission_host=host) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        write = agent.tools.get("files__write_file")
        read = agent.tools.get("files__read_text_file")
        assert write is not None
        assert write.needs_approval
        assert read is not None
        assert not read.needs_approval
        agent = remade(agent, approval="deny" if policy == "deny" else "ask")
        await runtime.run_session(agent, ["write the secret"])
    (result,) = tool_messages(agent)
    if policy == "deny":
        assert not target.exists()
        assert result.is_error
        assert result.content.startswith(
            'error: tool "files__write_file" needs approval, and this agent may not ask for it'
        )
        assert results_by_tool(model.requests[1])["files__write_file"] == result.content
        assert questions == []
    else:
        assert target.read_text() == "written"
        assert not result.is_error
        (question,) = questions
        assert question.title.startswith("files__write_file(")


async def test_include_and_exclude_choose_the_tools_of_each_entry(
    tmp_path: Path, filesystem: Callable[..., list[str]]
):
    argv = filesystem(tmp_path)
    reader = stdio("reader", argv, include=["list_directory", "read_text_file"])
    writer = stdio("writer", argv, exclude=["read_file", "read_media_file", "move_file"])
    kernel, store = load(write_profile(tmp_path, [reader, writer]))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=script())
        # Two entries (two names) are two servers, each started once, even with one command:
        # each one's errors and change notices name it.
        first, second = connections(runtime)
        assert (first.name, first.starts, second.name, second.starts) == ("reader", 1, "writer", 1)
        assert second.listing is not None
        offered = [tool.name for tool in second.listing]
    names = agent.tools.names()
    # include keeps the server's order, not the setting's.
    assert [n for n in names if n.startswith("reader__")] == [
        "reader__read_text_file",
        "reader__list_directory",
    ]
    assert [n for n in names if n.startswith("writer__")] == [
        f"writer__{tool}"
        for tool in offered
        if tool not in {"read_file", "read_media_file", "move_file"}
    ]
    assert "writer__write_file" in names
    assert "writer__read_file" not in names


async def test_a_misspelled_include_fails_the_compose_with_tool_invalid(
    tmp_path: Path, filesystem: Callable[..., list[str]]
):
    entry = stdio("files", filesystem(tmp_path), include=["read_text_file", "read_txt_file"])
    kernel, store = load(write_profile(tmp_path, [entry]))
    async with Runtime.open(kernel, store) as runtime:
        with pytest.raises(AgentError) as caught:
            await runtime.compose(agent="main", model=script())
    error = caught.value
    assert error.code is ErrorCode.TOOL_INVALID
    assert error.message == (
        'the settings of MCP server "files" name tool(s) it does not offer: read_txt_file'
    )
    assert error.remedy is not None
    assert "read_text_file" in error.remedy
    assert await store.sessions() == []


# ---------------------------------------------------------------------------- git


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


async def test_the_git_server_reports_status_and_log_of_a_real_repository(tmp_path: Path):
    from .servers import git_server

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "Add the readme")
    (repo / "README.md").write_text("hello, world\n")
    (repo / "new.txt").write_text("new\n")
    kernel, store = load(
        write_profile(tmp_path, [stdio("git", git_server(repo))], store="sqlite:sessions.db")
    )
    model = script(
        calls(call("git__git_status", repo_path=str(repo))),
        calls(call("git__git_log", repo_path=str(repo), max_count=5)),
        says("reported"),
    )
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["what changed?"])
    status, log = tool_messages(agent)
    assert not status.is_error
    assert not log.is_error
    assert "modified:   README.md" in status.content
    assert "new.txt" in status.content
    assert "Add the readme" in log.content
    # The session and its tool results are in the SQLite file the profile names.
    (header,) = await store.sessions()
    assert header.id == agent.session_id
    await store.aclose()
    assert (tmp_path / "sessions.db").is_file()


# ---------------------------------------------------------------------------- children


async def test_a_child_narrowed_to_one_servers_tools_sees_and_calls_only_those(
    tmp_path: Path, everything: list[str], filesystem: Callable[..., list[str]]
):
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("the meeting is on Thursday\n")
    servers = [
        stdio("everything", everything, include=["echo", "get-sum"]),
        stdio(
            "files",
            filesystem(files),
            include=["read_text_file", "list_directory"],
            roots=False,
        ),
    ]
    subagent = (
        '[plugin.subagent]\nprovider = "spawn"\n'
        'tool_filter = { allow = ["files__read_text_file", "files__list_directory"] }\n'
    )
    profile = write_profile(tmp_path, servers, plugins=["mcp", "spawn", "subagent"], extra=subagent)
    kernel, store = load(profile)
    task = "read the notes"
    scripted = ScriptedModel(
        [
            calls(call("subagent", description=task, prompt="When is the meeting? See notes.txt")),
            says("Thursday, says my helper"),
        ],
        tasks={
            task: [
                calls(call("files__read_text_file", path=str(files / "notes.txt"))),
                says("Thursday"),
            ]
        },
    )
    model = FunctionModel(scripted.request)
    async with Runtime.open(kernel, store) as runtime:
        parent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(parent, ["when is the meeting?"])
        assert len(connections(runtime)) == 2
    parents = [r for r in model.requests if r.session_label != task]
    children = [r for r in model.requests if r.session_label == task]
    assert set(tool_names(parents[0])) == {
        "everything__echo",
        "everything__get-sum",
        "files__read_text_file",
        "files__list_directory",
        "subagent",
        "task_wait",
        "task_cancel",
        "task_output",
    }
    assert len(children) == 2
    for request in children:
        assert tool_names(request) == ["files__read_text_file", "files__list_directory"]
    child_result = results_by_tool(children[1])["files__read_text_file"]
    assert child_result.startswith("the meeting is on Thursday")
    (delegated,) = tool_messages(parent)
    assert delegated.name == "subagent"
    assert not delegated.is_error
    assert "Thursday" in delegated.content
    scripted.assert_consumed()


# ---------------------------------------------------------------------------- list_changed


async def test_a_changed_tool_list_keeps_composed_agents_lists_and_reminds_them(tmp_path: Path):
    kernel, store = load(write_profile(tmp_path, [stdio("changing", changing())]))
    before = script(
        calls(call("changing__add_tool", name="extra")),
        says("added"),
        says("I see the reminder"),
    )
    after = script(calls(call("changing__extra")), says("it ran"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=before)
        composed = agent.tools.names()
        (connection,) = connections(runtime)
        assert connection.version == 0
        async with agent:
            await agent.run("add a tool")
            # The server announced the change; the listing that follows bumps the version.
            await wait_until(lambda: connection.version == 1, "the tools to be listed again")
            await agent.run("and now?")
        # What the agent was told is its runtime's (the notice holds nothing itself).
        assert list(runtime.state(SERVERS).seen[agent]) == [connection]
        newcomer = await runtime.compose(agent="main", model=after)
        await runtime.run_session(newcomer, ["use the new tool"])

    first, second, third = before.requests
    # Byte-identical tool list for the whole session (the prompt cache keeps hitting).
    assert first.tools == second.tools == third.tools
    dumped = [json.dumps([t.model_dump() for t in r.tools]) for r in before.requests]
    assert len(set(dumped)) == 1
    assert agent.tools.names() == composed
    assert "changing__extra" not in composed
    assert results_by_tool(second)["changing__add_tool"] == "added extra"
    # Told once: on the first step after the new listing (which follows the call's answer by
    # a round trip, so it is this turn's next step or the next turn's first), then kept in the
    # conversation.
    reminders = [
        m for m in third.messages if m.role == "user" and m.content.startswith("<system-reminder>")
    ]
    (reminder,) = reminders
    assert reminder in (second.messages[-1], third.messages[-1])
    assert 'The MCP server "changing" changed its tools during this session.' in reminder.content
    assert "New: changing__extra." in reminder.content
    assert "Removed" not in reminder.content
    assert "Changed:" not in reminder.content

    # An agent composed after the change lists the new tool, and calls it.
    assert "changing__extra" in tool_names(after.requests[0])
    assert newcomer.tools.names() == [*composed, "changing__extra"]
    (ran,) = tool_messages(newcomer)
    assert ran.content == "extra ran"
    assert not ran.is_error
    assert not any("<system-reminder>" in m.content for r in after.requests for m in r.messages)


async def test_a_short_call_timeout_does_not_cut_a_slow_servers_start(tmp_path: Path):
    """``timeout`` bounds each tool call; the start (handshake and first listing) has its own
    ``startup_timeout`` (30 s by default). A server that needs 3 s to start is not refused
    because its calls may take only 2 s."""
    entry = stdio("slow", changing("--slow-start", "3"), timeout=2)
    kernel, store = load(write_profile(tmp_path, [entry]))
    model = script(calls(call("slow__ping")), says("pong it is"))
    async with Runtime.open(kernel, store) as runtime:
        agent = await runtime.compose(agent="main", model=model)
        await runtime.run_session(agent, ["ping"])
    (pong,) = tool_messages(agent)
    assert pong.content == "pong"
    assert not pong.is_error
