"""The ACP subagent provider against real ACP agents in real processes (tests/acp/peers).

Every child is a process started and stopped by the test; a child's mirror session lives in a
real SQLite store.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import tether_acp
import tether_subagent_tools
from tether.errors import CapabilityError, ErrorCode
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime, compose_agent
from tether.store import DescriptorEvent, SQLiteStore, TurnEnded
from tether.subagents import SubagentStartRequest
from tether.testing import make_runtime, scaled, write_profile

pytestmark = pytest.mark.anyio

PEERS = Path(__file__).parent / "peers"


def agent_table(name: str, peer: str, *args: str, **settings: Any) -> str:
    lines = [
        "[[plugin.acp.agents]]",
        f'name = "{name}"',
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([str(PEERS / peer), *args])}",
    ]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def build(tmp_path: Path, *agents: str, subagent: str = "") -> Any:
    profile = (
        '[tether]\nplugins = ["acp", "subagent"]\n[plugin.acp]\n'
        + "".join(agents)
        + "[plugin.subagent]\n"
        + (subagent or 'provider = "echo"\nmax_depth = "provider-managed"\n')
        + "[agent.main]\n"
    )
    path = write_profile(tmp_path, profile)
    return make_runtime(
        path, {"acp": tether_acp, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )


@pytest.fixture
async def store(tmp_path):
    sqlite = SQLiteStore(tmp_path / "sessions.db")
    yield sqlite
    await sqlite.aclose()


def delegating(prompt: str, *, background: bool = False, tool: str = "subagent"):
    """A parent that delegates ``prompt`` once, then reports what the tool returned."""

    def answer(request: ModelRequest) -> ModelResponse | str:
        last = request.messages[-1]
        if last.role == "tool":
            return f"parent saw: {last.content}"
        if any(m.role == "tool" for m in request.messages):
            return "noted"  # a task's result (or the [Tasks] note) after the delegation
        arguments = {"description": "ask the agent", "prompt": prompt}
        arguments["run_in_background"] = background  # type: ignore[assignment]
        return ModelResponse(
            tool_calls=(ToolCall(id="d1", name=tool, arguments=arguments),),
            finish_reason="tool_calls",
        )

    return FunctionModel(answer)


def results(agent) -> list[str]:
    """The bodies of the ``<task_result>`` messages ``agent`` read, in order."""
    found = [
        re.fullmatch(r"<task_result [^>]*>(.*)</task_result>", m.content, re.S)
        for m in agent.messages
    ]
    return [m[1] for m in found if m]


def task_of(receipt: str) -> str:
    """The task id a receipt names (``Started task ID. ...``)."""
    return receipt.split()[2].rstrip(".")


def tool_results(agent) -> list[str]:
    return [m.content for m in agent.messages if m.role == "tool"]


async def mirror_events(store, parent) -> tuple[Any, list[Any]]:
    (child,) = await store.sessions(parent=parent.session_id)
    return child, [s.event for s in await store.events(child.id)]


# ------------------------------------------------------------------ one-shot


async def test_a_one_shot_child_answers_through_acp_and_is_mirrored_in_storage(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "echo.py"))
    parent = await compose_agent(runtime, store, model=delegating("hello there"))
    async with parent:
        await parent.run("go")
    assert tool_results(parent) == ["echo: hello there"]  # tether's delegation note stays home
    child, events = await mirror_events(store, parent)
    assert (child.parent_session, child.origin, child.delegation_depth) == (
        parent.session_id,
        "subagent",
        1,
    )
    assert child.label == "ask the agent"
    (session,) = [e for e in events if isinstance(e, DescriptorEvent) and e.kind == "acp/session"]
    assert session.data["agent"] == "echo"
    assert session.data["session_id"].startswith("echo-")
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["completed"]


async def test_a_one_shot_childs_process_ends_when_it_is_disposed(tmp_path, store):
    from tether_acp._model import _WARM  # pyright: ignore[reportPrivateUsage]  (white-box)

    runtime = build(tmp_path, agent_table("echo", "echo.py"))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("hi", parent))
        await run.result()
        model = run.local_agent.model  # type: ignore[union-attr]
        process = model._process
        await run.dispose()
        assert process is not None
        assert process.returncode is not None  # not kept warm: nobody can follow it up
        assert all(warm is not model for warm in runtime.state(_WARM).values())


async def test_tool_calls_are_recorded_and_stop_reasons_mapped(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "tools.py"))
    parent = await compose_agent(runtime, store, model=delegating("read them"))
    async with parent:
        await parent.run("go")
        runtime = runtime.subagents
        results = {}
        for reason in ("max_tokens", "max_turn_requests", "refusal"):
            run = await runtime.start("echo", SubagentStartRequest(f"stop:{reason}", parent))
            results[reason] = await run.result()
            await run.dispose()
    assert tool_results(parent) == ["read the notes"]
    child = (await store.sessions(parent=parent.session_id))[-1]  # the oldest: the tool run
    events = [s.event for s in await store.events(child.id)]
    (call,) = [e for e in events if isinstance(e, DescriptorEvent) and e.kind == "acp/tool_call"]
    assert call.data["title"] == "read notes"
    assert call.data["kind"] == "read"
    assert call.data["status"] == "completed"
    assert call.data["content"] == "notes: remember the milk"
    assert {k: (r.stop_reason, r.output) for k, r in results.items()} == {
        "max_tokens": ("max-tokens", "partial"),
        "max_turn_requests": ("max-tokens", "partial"),
        "refusal": ("refusal", "partial"),
    }


async def test_a_child_that_crashes_mid_turn_ends_with_error_and_a_diagnostic(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "crash.py"))
    parent = await compose_agent(runtime, store, model=delegating("do it"))
    async with parent:
        await parent.run("go")
    (result,) = tool_results(parent)
    assert result.startswith("error: subagent run failed")
    assert "exit status 3" in result
    assert "boom: simulated crash" in result
    _, events = await mirror_events(store, parent)
    assert [e.stop_reason for e in events if isinstance(e, TurnEnded)] == ["error"]


async def test_cancelling_sends_session_cancel_and_the_run_ends_aborted(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "slow.py"))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("take your time", parent))
        with anyio.fail_after(scaled(15)):
            await prompt_in_flight(run)
            started = time.monotonic()
            await run.dispose()
            elapsed = time.monotonic() - started
        result = await run.result()
    assert result.stop_reason == "aborted"
    assert elapsed < 4.5  # answered the cancel; no grace period (cancel_grace, 5 s) spent


async def test_an_agent_that_ignores_cancel_loses_its_process_group(tmp_path, store):
    pids = tmp_path / "pids.json"
    runtime = build(
        tmp_path,
        agent_table(
            "echo",
            "slow.py",
            "--ignore-cancel",
            "--ignore-eof",
            "--ignore-sigterm",
            "--pid-file",
            str(pids),
            "--grandchild",
            cancel_grace=0.5,
        ),
    )
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("stay", parent))
        with anyio.fail_after(scaled(15)):
            await prompt_in_flight(run)
            await run.dispose()
    recorded = json.loads(pids.read_text())
    for pid in [recorded["pid"], *([recorded["grandchild"]] if "grandchild" in recorded else [])]:
        with anyio.fail_after(scaled(5)):
            while alive(pid):
                await anyio.sleep(0.05)


async def prompt_in_flight(run: Any) -> None:
    """Until the child's agent has streamed its first text of the turn (slow.py: "working")."""
    child = run.local_agent
    assert child is not None
    while (client := getattr(child.model, "_client", None)) is None or not client.text():
        await anyio.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------ continuable


async def test_a_continuable_child_takes_follow_ups_on_the_same_acp_session(tmp_path, store):
    runtime = build(
        tmp_path,
        agent_table(
            "echo", "echo.py", "--load-session", "--store", str(tmp_path / "e.json"), keep_warm=0
        ),
        subagent='provider = "echo"\nmax_depth = "provider-managed"\nbackground = "continuable"\n',
    )
    parent = await compose_agent(runtime, store, model=delegating("first", background=True))
    manager = runtime.subagents.continuation
    async with parent:
        await parent.run("go")
        (started,) = tool_results(parent)
        child_id = task_of(started)
        await manager.followup(parent, child_id, "history?")  # while it is live
        await manager.wait_quiet(parent)
        await manager.followup(parent, child_id, "history?")  # cold: a new process loads it
        await manager.wait_quiet(parent)
    assert results(parent)[-1] == "history: 2"
    events = [s.event for s in await store.events(child_id)]
    sessions = {e.data["session_id"] for e in events if getattr(e, "kind", "") == "acp/session"}
    assert len(sessions) == 1  # recorded once, loaded by the second process


async def test_a_settled_childs_session_stays_warm_for_a_follow_up_but_not_past_its_parent(
    tmp_path, store
):
    from tether_acp._model import _WARM  # pyright: ignore[reportPrivateUsage]  (white-box)

    runtime = build(
        tmp_path,
        agent_table("echo", "echo.py"),  # no session/load: only a warm session can continue
        subagent='provider = "echo"\nmax_depth = "provider-managed"\nbackground = "continuable"\n',
    )
    parent = await compose_agent(runtime, store, model=delegating("first", background=True))
    manager = runtime.subagents.continuation
    # The warm sessions are the runtime's (Runtime.state), not the process's.
    warm_models = runtime.state(_WARM)
    async with parent:
        await parent.run("go")
        child_id = task_of(tool_results(parent)[0])
        await manager.wait_quiet(parent)
        ((key, warm),) = warm_models.items()
        assert key[0] == "echo"
        assert Runtime(runtime.kernel, store).state(_WARM) == {}
        process = warm._process  # pyright: ignore[reportPrivateUsage]  (white-box)
        assert process is not None
        await manager.followup(parent, child_id, "history?")
        await manager.wait_quiet(parent)
        assert warm_models[key]._process is process  # the same process took the follow-up  # pyright: ignore[reportPrivateUsage]  (white-box)
    assert results(parent)[-1] == "history: 1"
    assert key not in warm_models
    assert process.returncode is not None  # ended with its parent


async def test_a_continuable_child_of_an_agent_without_session_load_is_not_resumable(
    tmp_path, store
):
    runtime = build(
        tmp_path,
        agent_table("echo", "echo.py", keep_warm=0),  # no warm session to fall back on
        subagent='provider = "echo"\nmax_depth = "provider-managed"\nbackground = "continuable"\n',
    )
    parent = await compose_agent(runtime, store, model=delegating("first", background=True))
    manager = runtime.subagents.continuation
    async with parent:
        await parent.run("go")
        child_id = task_of(tool_results(parent)[0])
        await manager.wait_quiet(parent)
        await manager.followup(parent, child_id, "again")
        await manager.wait_quiet(parent)
    events = [s.event for s in await store.events(child_id)]
    (last_end,) = [e for e in events if isinstance(e, TurnEnded)][-1:]
    assert last_end.stop_reason == "error"
    assert "does not offer session/load" in (last_end.error or "")
    assert "not resumable" in (last_end.error or "")


# ------------------------------------------------------------------ what a child may ask


async def test_files_inside_the_roots_are_served_and_outside_refused(tmp_path, store):
    root = tmp_path / "allowed"
    root.mkdir()
    (root / "notes.txt").write_text("launch on Thursday")
    outside = tmp_path / "elsewhere.txt"
    runtime = build(tmp_path, agent_table("echo", "fs.py", roots=[str(root)]))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        runtime = runtime.subagents
        outputs = []
        for prompt in (
            f"read {root / 'notes.txt'}",
            f"write {root / 'new.txt'} fresh text",
            f"write {outside} sneaky",
            f"read {root / '..' / 'elsewhere.txt'}",
        ):
            run = await runtime.start("echo", SubagentStartRequest(prompt, parent))
            outputs.append((await run.result()).output)
            await run.dispose()
    assert outputs[0] == "launch on Thursday"
    assert outputs[1] == "wrote"
    assert (root / "new.txt").read_text() == "fresh text"
    assert outputs[2].startswith("error:")
    assert outputs[3].startswith("error:")
    assert not outside.exists()


@pytest.mark.parametrize(
    ("settings", "prompt", "host", "selected", "by"),
    [
        ({"permission": "deny"}, "ask edit", None, "reject", "policy"),
        ({}, "ask edit", None, "reject", "nobody could answer"),
        ({}, "ask edit", "allow", "allow", "the host"),
        (
            {"permission": "allow_once", "allow_kinds": ["read"]},
            "ask read",
            None,
            "allow",
            "policy",
        ),
        (
            {"permission": "allow_once", "allow_kinds": ["read"]},
            "ask edit",
            None,
            "reject",
            "policy",
        ),
        ({"permission": "ask"}, "ask edit", None, "reject", "nobody could answer"),
        ({"permission": "ask"}, "ask edit", "allow", "allow", "the host"),
        ({"permission": "ask"}, "ask edit", "reject", "reject", "the host"),
    ],
)
async def test_permission_requests_follow_the_policy(
    tmp_path, store, settings, prompt, host, selected, by
):
    runtime = build(tmp_path, agent_table("echo", "permission.py", **settings))
    questions = []
    if host is not None:

        async def answer(question):
            questions.append(question)
            return host

        tether_acp.set_permission_host(runtime, answer)
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest(prompt, parent))
        result = await run.result()
        await run.dispose()
    assert result.output == f"selected: {selected}"  # a deny picks the reject option
    events = [s.event for s in await store.events(run.id)]
    (note,) = [e for e in events if getattr(e, "kind", "") == "acp/permission"]
    assert note.data["by"].startswith(by)
    if host is not None:
        assert [(q.asker, q.kind) for q in questions] == [('ACP agent "echo"', prompt.split()[1])]


# ------------------------------------------------------------------ load-time negotiation


@pytest.mark.parametrize(
    ("settings", "capability"),
    [
        ("max_depth = 2", "depth_limit"),
        ('max_depth = "provider-managed"\ntool_filter = { deny = ["subagent"] }', "tool_filter"),
        ('max_depth = "provider-managed"\npersona = "a reviewer"', "persona"),
    ],
)
def test_what_acp_cannot_enforce_is_rejected_at_load(tmp_path, settings, capability):
    with pytest.raises(CapabilityError) as caught:
        build(tmp_path, agent_table("echo", "echo.py"), subagent=f'provider = "echo"\n{settings}\n')
    assert caught.value.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert f'subagent provider "echo" does not support the "{capability}" capability' in str(
        caught.value
    )


def test_an_unknown_acp_agent_name_is_a_missing_provider(tmp_path):
    with pytest.raises(CapabilityError) as caught:
        build(
            tmp_path,
            agent_table("echo", "echo.py"),
            subagent='provider = "claude"\nmax_depth = "provider-managed"\n',
        )
    assert caught.value.code is ErrorCode.MISSING_REQUIRED_PLUGIN
    assert "plugins here that offer it: echo" in str(caught.value)


def test_remote_children_appear_in_the_delegation_tree(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tether.cli import cli

    async def delegate() -> tuple[str, str]:
        store = SQLiteStore(tmp_path / "sessions.db")
        try:
            runtime = build(tmp_path, agent_table("echo", "echo.py"))
            parent = await compose_agent(runtime, store, model=delegating("hi"))
            async with parent:
                await parent.run("go")
            (child,) = await store.sessions(parent=parent.session_id)
            return parent.session_id, child.id
        finally:
            await store.aclose()

    parent_id, child_id = anyio.run(delegate)
    profile = tmp_path / "tether.toml"
    text = profile.read_text().replace("[tether]\n", '[tether]\nstore = "sqlite:sessions.db"\n', 1)
    profile.write_text(text)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    tree = CliRunner().invoke(cli, ["sessions", "tree", "--profile", str(profile), parent_id])
    assert tree.exit_code == 0, tree.output
    line = next(line for line in tree.stdout.splitlines() if child_id in line)
    assert "depth=1" in line
    assert "ask the agent" in line


async def test_the_sdks_own_example_agent_serves_a_one_shot_and_a_continuable_child(
    tmp_path, store
):
    runtime = build(
        tmp_path,
        agent_table("sdk", "sdk_echo_agent.py"),
        subagent='provider = "sdk"\nmax_depth = "provider-managed"\nbackground = "continuable"\n',
    )
    parent = await compose_agent(runtime, store, model=delegating("ping", background=True))
    manager = runtime.subagents.continuation
    async with parent:
        run = await runtime.subagents.start("sdk", SubagentStartRequest("one-shot hello", parent))
        one_shot = await run.result()
        await run.dispose()
        await parent.run("go")
        child_id = task_of(tool_results(parent)[0])
        await manager.wait_quiet(parent)
        await manager.followup(parent, child_id, "pong")  # the warm session answers again
        await manager.wait_quiet(parent)
    assert (one_shot.stop_reason, one_shot.output) == ("completed", "one-shot hello")
    assert results(parent) == ["ping", "pong"]


async def test_a_prompt_that_takes_too_long_is_cancelled_and_ends_with_error(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "slow.py", prompt_timeout=1.5))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("take forever", parent))
        with anyio.fail_after(scaled(20)):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "error"
    assert "no answer within 1.5 s; the prompt was cancelled" in (result.diagnostic or "")
    assert result.output == ""


def test_a_plugin_table_without_agents_fails_at_load(tmp_path):
    from tether.errors import PluginError

    with pytest.raises(PluginError) as caught:
        build(tmp_path)
    assert "name at least one agent under [[plugin.acp.agents]]" in str(caught.value)


async def test_a_command_that_cannot_start_is_an_error_with_its_fix(tmp_path, store):
    runtime = build(tmp_path, agent_table("echo", "echo.py", cwd=str(tmp_path / "missing")))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        run = await runtime.subagents.start("echo", SubagentStartRequest("hi", parent))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "error"
    assert 'could not start ACP agent "echo"' in (result.diagnostic or "")
    assert "fix command, args or cwd in its [[plugin.acp.agents]] table" in (
        result.diagnostic or ""
    )


async def test_without_roots_a_child_may_use_its_workspace_and_not_the_project(tmp_path, store):
    (tmp_path / "project.txt").write_text("the project's")
    runtime = build(tmp_path, agent_table("echo", "fs.py"))
    parent = await compose_agent(runtime, store, model=delegating("x"))
    async with parent:
        subagents = runtime.subagents
        outputs = []
        for prompt in (f"read {tmp_path / 'project.txt'}", f"write {tmp_path / 'new.txt'} x"):
            run = await subagents.start("echo", SubagentStartRequest(prompt, parent))
            outputs.append(((await run.result()).output, run.id))
            await run.dispose()
        run = await subagents.start("echo", SubagentStartRequest("placeholder", parent))
        await run.result()
        workspace = runtime.workspaces.folder(store) / run.id
        await run.dispose()
    assert all(output.startswith("error:") for output, _ in outputs), outputs
    assert not (tmp_path / "new.txt").exists()
    assert workspace.is_dir()  # the folder its fs requests were confined to
