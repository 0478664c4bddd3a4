"""A deleted session's workspace goes with it, after the store's transaction (the records read
before it); a child sharing its parent's workspace, a detached child's, and anything outside
the store's workspaces folder are never removed."""

from __future__ import annotations

import pytest

from tether.agents import new_header
from tether.models import FunctionModel
from tether.runtime import Runtime
from tether.runtime._retention import delete_session, plan_prune, prune
from tether.store import SQLiteStore
from tether.testing import make_kernel, write_profile
from tether.workspaces import remove_workspaces

pytestmark = pytest.mark.anyio

PROFILE = """
[agent.main]
model = "function:echo"
"""


@pytest.fixture
async def runtime(tmp_path):
    store = SQLiteStore(tmp_path / ".tether" / "sessions.db")
    try:
        yield Runtime(make_kernel(write_profile(tmp_path, PROFILE)), store)
    finally:
        await store.aclose()


async def session(runtime: Runtime, **header) -> str:
    """A session of ``main`` that ran one turn (its workspace opened and recorded)."""
    if header:
        assert runtime.store is not None
        created = await runtime.store.create(new_header(agent="main", **header))
        agent = await runtime.compose(
            agent="main", model=FunctionModel(lambda r: "hi"), session_id=created.id
        )
    else:
        agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
    async with agent:
        await agent.run("hello")
        (agent.workspace.root / "notes.txt").write_text("mine")
    return agent.session_id


async def test_deleting_a_session_removes_its_workspace_and_no_other(runtime):
    a, b = await session(runtime), await session(runtime)
    folder = runtime.workspaces.folder()
    assert {p.name for p in folder.iterdir()} == {a, b}
    removal = await delete_session(runtime, a)
    assert removal.deleted == (a,)
    assert [p.name for p in folder.iterdir()] == [b]
    assert (folder / b / "notes.txt").read_text() == "mine"


async def test_deleting_a_tree_removes_every_deleted_sessions_workspace(runtime):
    root = await session(runtime)
    child = await session(runtime, parent_session=root, origin="subagent")
    kept = await session(runtime, parent_session=root, origin="subagent", detached=True)
    folder = runtime.workspaces.folder()
    removal = await delete_session(runtime, root)
    assert removal.deleted == (root,)
    assert set(removal.closed) == {child}
    assert {p.name for p in folder.iterdir()} == {child, kept}  # closed and kept, readable
    removal = await delete_session(runtime, kept, tree=True)
    assert {p.name for p in folder.iterdir()} == {child}


async def test_prune_removes_the_workspaces_of_what_it_deleted(runtime):
    old = await session(runtime)
    assert runtime.store is not None
    plan = await plan_prune(runtime.store, older_than=0, closed_only=False)
    outcome = await prune(runtime, plan)
    assert old in outcome.deleted
    assert not (runtime.workspaces.folder() / old).exists()


@pytest.mark.parametrize("hostile", ["..", ".", "", "../outside", "a/../../outside", "/tmp"])
async def test_an_id_that_is_not_a_plain_name_removes_nothing(runtime, tmp_path, hostile):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    folder = runtime.workspaces.folder()
    folder.mkdir(parents=True, exist_ok=True)
    assert await remove_workspaces(runtime, [hostile]) == []
    assert (outside / "precious.txt").read_text() == "keep"
    assert folder.is_dir()
