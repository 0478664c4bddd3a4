"""tether delegating to tether over ACP: a parent profile's child is ``tether acp`` of another
profile, a real process. A follow-up, a cancellation, and a permission question that travels
from a grandchild up to the parent and its answer back down."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import tether_acp
import tether_subagent_tools
from tether.models import FunctionModel, ModelRequest, ModelResponse
from tether.runtime import compose_agent
from tether.store import DescriptorEvent, SQLiteStore, TurnEnded
from tether.subagents import SubagentStartRequest
from tether.testing import make_runtime, scaled, write_profile

pytestmark = pytest.mark.anyio

TETHER = Path(sys.executable).parent / "tether"
PEERS = Path(__file__).parent / "peers"
TIMEOUT = scaled(30.0)


def child_profile(folder: Path, script: str, extra: str = "") -> Path:
    """A tether profile served by ``tether acp``: a scripted agent, a SQLite store."""
    write_profile(folder, script, "script.toml")
    return write_profile(
        folder,
        '[tether]\nstore = "sqlite:.tether/sessions.db"\n'
        + extra
        + '[agent.main]\nmodel = "scripted:script.toml"\n',
    )


def parent_kernel(folder: Path, child: Path, *, background: str = "one-shot", **settings: Any):
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
    profile = write_profile(
        folder,
        f"""
[tether]
plugins = ["acp", "subagent"]
[[plugin.acp.agents]]
name = "tether-child"
command = {json.dumps(str(TETHER))}
args = ["acp", "--profile", {json.dumps(str(child))}]
env = {{ TETHER_DISABLE_PLUGIN_AUTOLOAD = "0" }}
{lines}
[plugin.subagent]
provider = "tether-child"
max_depth = "provider-managed"
background = "{background}"
[agent.main]
""",
    )
    return make_runtime(
        profile, {"acp": tether_acp, "subagent": tether_subagent_tools.SubagentToolsPlugin}
    )


async def child_turns(child: Path) -> list[TurnEnded]:
    store = SQLiteStore(child.parent / ".tether" / "sessions.db")
    try:
        (header,) = [h for h in await store.sessions() if h.parent_session is None]
        return [s.event for s in await store.events(header.id) if isinstance(s.event, TurnEnded)]
    finally:
        await store.aclose()


def quiet_parent(request: ModelRequest) -> ModelResponse | str:
    return "noted"


async def one_shot(runtime: Any, db: Path) -> tuple[Any, Any]:
    """A quiet parent on a SQLite store at ``db`` delegates "go" to the ACP child once:
    the run and its result."""
    store = SQLiteStore(db)
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet_parent))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("go", parent)
                )
                result = await run.result()
                await run.dispose()
    finally:
        await store.aclose()
    return run, result


async def test_a_continuable_tether_child_over_acp_takes_a_follow_up_with_its_history(tmp_path):
    child = child_profile(
        tmp_path / "child",
        """
[[steps]]
expect = "remember the number 7"
text = "Remembered."
[[steps]]
expect = "which number"
text = "The number was 7."
""",
    )
    runtime = parent_kernel(tmp_path / "parent", child, background="continuable")
    store = SQLiteStore(tmp_path / "parent.db")
    manager = runtime.subagents.continuation
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet_parent))
            async with parent:
                started = await runtime.subagents.start_continuable(
                    "tether-child",
                    SubagentStartRequest("Please remember the number 7.", parent, label="memo"),
                )
                await manager.wait_quiet(parent)
                await manager.followup(parent, started.child_id, "Now, which number was it?")
                await manager.wait_quiet(parent)
    finally:
        await store.aclose()
    notices = [m.content for m in parent.messages if m.content.startswith("Background")]
    assert [n.rsplit("\n", 1)[-1] for n in notices] == ["Remembered.", "The number was 7."]
    assert [t.stop_reason for t in await child_turns(child)] == ["completed", "completed"]


async def test_cancelling_a_tether_child_over_acp_aborts_its_turn(tmp_path):
    child = child_profile(
        tmp_path / "child",
        # A first step that is stored (with its turn/start), then a long one.
        """
[[steps]]
tool_calls = [{ name = "look_around" }]

[[steps]]
delay = 60
text = "too late"
""",
    )
    runtime = parent_kernel(tmp_path / "parent", child)
    store = SQLiteStore(tmp_path / "parent.db")
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet_parent))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("take your time", parent)
                )
                for _ in range(200):  # until the child's turn is open in the other process
                    await anyio.sleep(0.05)
                    if (child.parent / ".tether" / "sessions.db").exists():
                        turns = await _open_turns(child)
                        if turns:
                            break
                started = time.monotonic()
                await run.dispose()
                elapsed = time.monotonic() - started
                result = await run.result()
    finally:
        await store.aclose()
    assert result.stop_reason == "aborted"
    assert elapsed < 5.0  # the child answered session/cancel; no process had to be killed
    assert [t.stop_reason for t in await child_turns(child)] == ["aborted"]


async def _open_turns(child: Path) -> int:
    store = SQLiteStore(child.parent / ".tether" / "sessions.db")
    try:
        headers = [h for h in await store.sessions() if h.parent_session is None]
        if not headers:
            return 0
        events = [s.event for s in await store.events(headers[0].id)]
        return sum(e.type == "turn/start" for e in events)  # type: ignore[union-attr]
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("policy", "answer"),
    [
        ({"permission": "allow_once", "allow_kinds": ["edit"]}, "selected: allow"),
        ({}, "selected: reject"),
    ],
)
async def test_a_grandchilds_permission_question_reaches_the_parent_and_back(
    tmp_path, policy, answer
):
    """parent tether -> (ACP) child tether -> (ACP) permission peer with permission = "ask".
    The peer's question goes to the child tether's host (its ACP client: the parent), whose
    policy for its child answers it; the answer travels back down."""
    peer = json.dumps([str(PEERS / "permission.py")])
    child = child_profile(
        tmp_path / "child",
        """
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "ask it", prompt = "ask edit" } }]
[[steps]]
expect = "selected:"
text = "the grandchild said so"
""",
        extra=(
            'plugins = ["acp", "subagent"]\n'
            "[[plugin.acp.agents]]\n"
            'name = "asker"\n'
            f"command = {json.dumps(sys.executable)}\n"
            f"args = {peer}\n"
            'permission = "ask"\n'
            '[plugin.subagent]\nprovider = "asker"\nmax_depth = "provider-managed"\n'
        ),
    )
    runtime = parent_kernel(tmp_path / "parent", child, **policy)
    store = SQLiteStore(tmp_path / "parent.db")
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet_parent))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("go ask", parent)
                )
                result = await run.result()
                await run.dispose()
            events = [s.event for s in await store.events(run.id)]
    finally:
        await store.aclose()
    assert result.output == "the grandchild said so"
    (decision,) = [
        e for e in events if isinstance(e, DescriptorEvent) and e.kind == "acp/permission"
    ]
    assert decision.data["kind"] == "edit"
    assert decision.data["decision"] == ("allowed" if "allow" in answer else "denied")
    # The child tether announced the grandchild's call as a tool call of its session before
    # asking about it by that id, and closed it with the answer.
    calls = {
        e.data["id"]: e.data
        for e in events
        if isinstance(e, DescriptorEvent) and e.kind == "acp/tool_call"
    }
    announced = calls[decision.data["tool_call_id"]]
    assert announced["status"] == ("completed" if "allow" in answer else "failed")
    assert announced["kind"] == "edit"
    # The grandchild (in the child tether's store) got the answer back.
    child_store = SQLiteStore(child.parent / ".tether" / "sessions.db")
    try:
        (grandchild,) = [h for h in await child_store.sessions() if h.parent_session]
        texts = [
            s.event.content
            for s in await child_store.events(grandchild.id)
            if s.event.type == "assistant/message"  # type: ignore[union-attr]
        ]
    finally:
        await child_store.aclose()
    assert texts == [answer]


async def test_a_tether_childs_messages_of_one_turn_stay_apart(tmp_path):
    child = child_profile(
        tmp_path / "child",
        """
[[steps]]
text = "Let me look."
tool_calls = [{ name = "lookup", arguments = {} }]
[[steps]]
text = "Found it."
""",
    )
    runtime = parent_kernel(tmp_path / "parent", child)
    _, result = await one_shot(runtime, tmp_path / "parent.db")
    # Each message streams with its own id, so the parent does not glue them together.
    assert result.output == "Let me look.\n\nFound it."
