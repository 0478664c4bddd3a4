"""A parent's guardrails check every child below it (a local child three levels down), unless
the profile exempts the child's agent; a child's result is checked on its way up."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tether_spawn
import tether_subagent_tools
from tether.contracts import GuardSubject, GuardVerdict
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import GuardEvent, SQLiteStore
from tether.testing import make_kernel, tree_problems, write_profile

from .conftest import Offers, Rule

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["spawn", "subagent", "rules"]
guardrails = ["watch", "mask"]
{more}
[agent.main]
model = "scripted:none.toml"
{exempt}
"""


def level_of(request: ModelRequest) -> int:
    found = [re.search(r"level (\d)", m.content) for m in request.messages if m.role == "user"]
    return max((int(m.group(1)) for m in found if m), default=0)


def answer(request: ModelRequest) -> ModelResponse | str:
    """Each level delegates to the next until level 3, which answers with an address; each
    level above passes on what it read."""
    last = request.messages[-1]
    level = level_of(request)
    if last.role == "tool":
        return f"level {level} read: {last.content}"
    if level == 3:
        return "found bob@example.com"
    call = ToolCall(
        id=f"d{level}",
        name="subagent",
        arguments={"description": "go deeper", "prompt": f"level {level + 1}"},
    )
    return ModelResponse(tool_calls=(call,))


def mask(subject: GuardSubject) -> GuardVerdict:
    text = subject.content.replace("bob@example.com", "[email]")
    return GuardVerdict.allow() if text == subject.content else GuardVerdict.replace(text)


async def run_tree(tmp_path: Path, exempt: str = "") -> tuple[Rule, Rule, str, SQLiteStore]:
    watch = Rule("watch", {"input"}, lambda s: GuardVerdict.allow())
    masking = Rule("mask", {"output"}, mask)
    plugins = {
        "spawn": tether_spawn,
        "subagent": tether_subagent_tools.SubagentToolsPlugin,
        "rules": Offers(watch, masking),
    }
    profile = write_profile(
        tmp_path, PROFILE.format(more="[plugin.subagent]\nmax_depth = 5\n", exempt=exempt)
    )
    store = SQLiteStore(tmp_path / "sessions.db")
    runtime = Runtime(make_kernel(profile, plugins), store)
    agent = await runtime.compose(model=FunctionModel(answer))
    async with agent:
        assert await agent.run("level 0") == "completed"
    return watch, masking, agent.session_id, store


async def test_a_child_three_levels_down_is_checked_by_the_roots_guardrails(tmp_path):
    watch, masking, root, store = await run_tree(tmp_path)
    try:
        assert sorted({s.depth for s in watch.seen}) == [0, 1, 2, 3]
        assert [s.content for s in watch.seen if s.depth == 3] == ["level 3"]
        # The address never reached a parent: the child three levels down said it, and its
        # own guardrail (passed down) replaced it before it was stored.
        answer_text = next(s for s in masking.seen if s.depth == 3).content
        assert answer_text == "found bob@example.com"
        events = [e.event for e in await store.events(root)]
        final = [e for e in events if e.type == "assistant/message"][-1]
        assert "bob@example.com" not in final.content
        assert "[email]" in final.content
        # Each child's delegation record names what checks it, for every later restore.
        children = await store.sessions(parent=root)
        (child,) = children
        setup = [e.event for e in await store.events(child.id, limit=4)]
        delegation = next(e for e in setup if e.type == "descriptor" and e.kind == "delegation")
        assert delegation.data["guardrails"] == ["watch", "mask"]
        deepest = child.id
        for _ in range(2):
            (below,) = await store.sessions(parent=deepest)
            deepest = below.id
        assert (await store.header(deepest)).delegation_depth == 3
        deep = [e.event for e in await store.events(deepest)]
        (replaced,) = [e for e in deep if isinstance(e, GuardEvent)]
        assert (replaced.guardrail, replaced.kind, replaced.action) == ("mask", "output", "replace")
        assert [e.content for e in deep if e.type == "assistant/message"] == ["found [email]"]
        assert await tree_problems(store, root) == {}
    finally:
        await store.aclose()


async def test_an_exempt_childs_agent_is_not_checked_by_what_is_passed_down(tmp_path):
    watch, masking, root, store = await run_tree(tmp_path, exempt="guardrails_exempt = true")
    try:
        # The root is checked (an exemption is for children); no child below it is.
        assert sorted({s.depth for s in watch.seen}) == [0]
        assert {s.depth for s in masking.seen} == {0}
        events = [e.event for e in await store.events(root)]
        final = [e for e in events if e.type == "assistant/message"][-1]
        assert "[email]" in final.content  # the root's own answer is still masked
    finally:
        await store.aclose()
