"""A declared subagent's tools that need approval: its questions go up to the root's permission
host naming its path; its own ``approval`` and its caller's bound it (the stricter wins)."""

from __future__ import annotations

import pytest

from tests.agents.test_approvals import Risky
from tests.remake import remade
from tether.agents import PermissionQuestion
from tether.runtime import Runtime
from tether.store import SQLiteStore, ToolResult
from tether.testing import make_kernel

from . import brains
from .conftest import PLUGINS, call, profile

pytestmark = pytest.mark.anyio


async def _run(tmp_path, roles, *, writer_approval: str = "", root_approval: str = "ask"):
    risky = Risky()
    asked: list[PermissionQuestion] = []

    async def host(question: PermissionQuestion) -> str:
        asked.append(question)
        return "allow"

    roles["main"] = lambda r: (
        call("writer", message="Clean up the notes.")
        if len(brains.REQUESTS["main"]) == 1
        else "done"
    )
    roles["writer"] = lambda r: (
        call("delete", path="notes.md") if r.messages[-1].role != "tool" else r.messages[-1].content
    )
    extra = 'plugins = ["risky"]\n'
    path = profile(tmp_path, subagents=("writer",), extra="")
    text = path.read_text().replace(
        "[agent.writer]\n", f"[agent.writer]\n{extra}{writer_approval}\n", 1
    )
    path.write_text(text)
    kernel = make_kernel(path, {**PLUGINS, "risky": risky})
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        async with Runtime.open(kernel, store, permission_host=host) as runtime:
            main = await runtime.compose(agent="main")
            main = remade(main, approval=root_approval)
            async with main:
                await main.run("go")
                await runtime.settle(main)
            (child,) = await store.sessions(parent=main.session_id)
            said = [
                s.event.content
                for s in await store.events(child.id)
                if isinstance(s.event, ToolResult)
            ]
    finally:
        await store.aclose()
    return risky.runs, asked, said, child


async def test_a_specialist_asks_the_roots_host_naming_its_path(tmp_path, roles):
    runs, asked, said, child = await _run(tmp_path, roles)
    assert runs == 1
    assert said == ["deleted notes.md"]
    (question,) = asked
    assert question.session == child.id
    assert question.asker == 'agent "writer"'
    assert question.path == ("main", "writer: Clean up the notes.")


@pytest.mark.parametrize(
    ("writer_approval", "root_approval"),
    [('approval = "deny"', "ask"), ("", "deny")],
    ids=["its-own-deny", "its-callers-deny"],
)
async def test_the_stricter_of_its_own_and_its_callers_policy_wins(
    tmp_path, roles, writer_approval, root_approval
):
    runs, asked, said, _ = await _run(
        tmp_path, roles, writer_approval=writer_approval, root_approval=root_approval
    )
    assert runs == 0
    assert asked == []
    assert said == [
        'error: tool "delete" needs approval, and this agent may not ask for it (its approval '
        "policy is deny)"
    ]


async def test_a_specialist_that_allows_still_asks_under_an_asking_caller(tmp_path, roles):
    runs, asked, _, _ = await _run(tmp_path, roles, writer_approval='approval = "allow"')
    assert runs == 1
    assert len(asked) == 1  # never more than its caller: "allow" under "ask" asks
