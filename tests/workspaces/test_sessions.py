"""Where a session's workspace is, and which children share it: a root session's own folder
under the store's location (or the profile's folder, or the folder it was composed with),
recorded in its log so a restored session finds it again; the root-only copy and forks share
their parent's, spawns and declared subagents get their own unless told to share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.agents import new_header
from tether.errors import ErrorCode, WorkspaceError
from tether.models import FunctionModel
from tether.runtime import Runtime
from tether.store import DescriptorEvent, MemoryStore
from tether.subagents import SubagentStartRequest
from tether.testing import make_kernel, write_profile
from tether.workspaces import (
    WORKSPACE_DESCRIPTOR,
    Workspace,
    child_plan,
    recorded_plan,
    remove_workspaces,
)

from .conftest import call, delegate, parent, two_sided

pytestmark = pytest.mark.anyio


async def start_child(runtime: Runtime, provider: str, **request) -> dict:
    """Start a child of a new root session through ``provider``; what its ``where`` said."""
    model = two_sided(lambda r: "root")
    root = await runtime.compose(agent="main", model=model)
    async with root:
        await root.run("hello")
        child = await runtime.subagents.start(
            provider, SubagentStartRequest(prompt="where?", parent=root, **request)
        )
        try:
            result = await child.result()
        finally:
            await child.dispose()
    said = json.loads(result.output)
    said["parent"] = {
        "root": str(root.workspace.root),
        "owner": root.workspace.owner,
        "id": root.session_id,
    }
    said["child_id"] = child.id
    return said


# ------------------------------------------------------------------ a root session


async def test_a_root_session_works_in_a_folder_of_its_own_next_to_the_store(build, tmp_path):
    runtime = build()
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
    async with agent:
        await agent.run("hello")
        workspace = agent.workspace
    assert workspace.root == tmp_path.resolve() / ".tether" / "workspaces" / agent.session_id
    assert workspace.root.is_dir()
    assert (workspace.kind, workspace.backend, workspace.owner) == (
        "session",
        "local",
        agent.session_id,
    )
    assert workspace.shared_from is None
    assert agent.cwd != workspace.root  # the folder skills are found from stays the process's


async def test_the_workspace_is_recorded_and_a_restored_session_finds_it(build, tmp_path):
    runtime = build()
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
    async with agent:
        await agent.run("hello")
        first = agent.workspace
    records = [
        stored.event
        for stored in await runtime.store.events(agent.session_id)
        if isinstance(stored.event, DescriptorEvent) and stored.event.kind == WORKSPACE_DESCRIPTOR
    ]
    assert [r.data for r in records] == [
        {"kind": "session", "backend": "local", "owner": agent.session_id}
    ]
    # The profile changes its mind: the stored session keeps the workspace it was given.
    later = build('workspace = { kind = "project" }')
    again = await later.compose(session_id=agent.session_id, model=FunctionModel(lambda r: "x"))
    async with again:
        assert again.workspace == first


async def test_kind_project_is_the_profiles_folder(build, tmp_path):
    runtime = build('workspace = { kind = "project" }')
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
    async with agent:
        assert agent.workspace.root == tmp_path.resolve()
        assert agent.workspace.kind == "project"
    assert not (tmp_path / ".tether" / "workspaces").exists()


async def test_a_root_composed_in_a_folder_works_in_that_folder(build, tmp_path):
    work = tmp_path / "client-project"
    work.mkdir()
    agent = await build().compose(agent="main", model=FunctionModel(lambda r: "hi"), cwd=work)
    async with agent:
        assert agent.cwd == work
        assert agent.workspace.root == work.resolve()
        assert agent.workspace.kind == "project"


async def test_the_memory_store_keeps_workspaces_in_a_folder_removed_with_the_runtime(tmp_path):
    profile = write_profile(tmp_path, "[tether]\n[agent.main]\n")
    kernel = make_kernel(profile, {})
    async with Runtime.open(kernel, MemoryStore()) as runtime:
        agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
        async with agent:
            root = agent.workspace.root
            assert root.is_dir()
            assert root.parent == runtime.workspaces.folder()
            assert tmp_path not in root.parents
    assert not root.exists()
    assert not root.parent.exists()


@pytest.mark.parametrize(
    ("table", "key", "remedy"),
    [
        ('{ kind = "shared" }', "[tether] workspace.kind", 'write kind = "session"'),
        ('{ backend = "lokal" }', "[tether] workspace.backend", 'did you mean "local"?'),
    ],
)
def test_an_unknown_kind_or_backend_stops_startup(tmp_path, table, key, remedy):
    profile = write_profile(tmp_path, f"[tether]\nworkspace = {table}\n[agent.main]\n")
    with pytest.raises(WorkspaceError) as info:
        make_kernel(profile, {})
    assert info.value.code is ErrorCode.WORKSPACE_INVALID
    assert info.value.file == profile.resolve()
    assert info.value.key == key
    assert remedy in (info.value.remedy or "")


async def test_the_userns_backend_opens_the_sessions_workspace(build, tmp_path):
    runtime = build('workspace = { backend = "userns" }')
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
    async with agent:
        workspace = agent.workspace
        backend = runtime.workspaces.backend(workspace.backend)
        result = await backend.run(workspace, ["sh", "-c", "pwd > here"], timeout=20)
    assert result.exit_code == 0, result.stderr
    assert workspace.backend == "userns"
    assert (workspace.root / "here").read_text() == "/workspace\n"


async def test_an_unknown_backend_asked_of_the_runtime_lists_the_known_ones(build):
    with pytest.raises(WorkspaceError) as info:
        build().workspaces.backend("docker")
    assert info.value.code is ErrorCode.WORKSPACE_INVALID
    assert '"local", "userns" (isolated)' in (info.value.remedy or "")


# ------------------------------------------------------------------ children


async def test_a_spawned_child_gets_a_workspace_of_its_own(build, tmp_path):
    said = await start_child(build(), "spawn")
    assert said["root"] == str(tmp_path.resolve() / ".tether" / "workspaces" / said["child_id"])
    assert (said["owner"], said["shared_from"]) == (said["child_id"], None)


async def test_a_spawned_child_asked_to_share_works_in_its_parents(build):
    said = await start_child(build(), "spawn", share_workspace=True)
    assert said["root"] == said["parent"]["root"]
    assert (said["owner"], said["shared_from"]) == (said["parent"]["id"],) * 2


async def test_a_fork_shares_its_parents_workspace(build):
    said = await start_child(build(), "fork")
    assert said["root"] == said["parent"]["root"]
    assert said["shared_from"] == said["parent"]["id"]


async def test_a_fork_told_not_to_share_gets_its_own(build):
    said = await start_child(build(), "fork", share_workspace=False)
    assert said["root"] != said["parent"]["root"]
    assert said["owner"] == said["child_id"]


async def test_a_declared_subagent_gets_its_own_unless_its_definition_shares(build):
    own = await start_child(build(), "tether.specialist", agent="helper")
    assert own["root"] != own["parent"]["root"]
    assert own["owner"] == own["child_id"]
    shared = await start_child(
        build(helper="workspace = { share = true }"), "tether.specialist", agent="helper"
    )
    assert shared["root"] == shared["parent"]["root"]
    assert shared["shared_from"] == shared["parent"]["id"]


async def test_the_root_only_copy_shares_and_a_plain_spawn_tool_does_not(build):
    for settings, shares in (("root_only = true", True), ("", False)):
        runtime = build(subagent=settings)
        root = await runtime.compose(agent="main", model=two_sided(parent(delegate())))
        async with root:
            await root.run("go")
        said = json.loads(root.messages[-1].content)
        assert (said["root"] == str(root.workspace.root)) is shares, settings


async def test_a_forks_record_names_its_parent_and_the_owner(build):
    runtime = build()
    root = await runtime.compose(agent="main", model=two_sided(lambda r: "root"))
    async with root:
        await root.run("hello")
        first = await runtime.subagents.start(
            "fork", SubagentStartRequest(prompt="where?", parent=root)
        )
        await first.result()
        await first.dispose()
        (child_header,) = await runtime.store.sessions(parent=root.session_id)
        plan = await recorded_plan(runtime.store, child_header.id)
    assert plan is not None
    assert (plan.kind, plan.owner, plan.shared_from) == (
        "session",
        root.session_id,
        root.session_id,
    )
    assert plan.root is None  # found again from its owner, as the owner finds it


def test_a_child_of_a_sharing_child_keeps_the_first_owner(tmp_path):
    first = Workspace(root=tmp_path, backend="local", owner="ses_root")
    child = child_plan(first, "ses_a", share=True, parent_id="ses_root")
    shared = Workspace(
        root=tmp_path, backend="local", owner=child.owner, shared_from=child.shared_from
    )
    grandchild = child_plan(shared, "ses_b", share=True, parent_id="ses_a")
    assert (grandchild.owner, grandchild.shared_from) == ("ses_root", "ses_a")
    own = child_plan(shared, "ses_c", share=False, parent_id="ses_a")
    assert (own.kind, own.owner, own.shared_from) == ("session", "ses_c", None)


# ------------------------------------------------------------------ removal


async def test_remove_workspaces_removes_a_sessions_own_and_never_a_shared_parents(build):
    runtime = build()
    said_own = await start_child(runtime, "spawn")
    said_shared = await start_child(runtime, "fork")
    own_root, parent_root = Path(said_own["root"]), Path(said_shared["parent"]["root"])
    assert own_root.is_dir()
    assert parent_root.is_dir()
    removed = await remove_workspaces(runtime, [said_own["child_id"], said_shared["child_id"]])
    assert removed == [own_root]
    assert not own_root.exists()
    assert parent_root.is_dir()  # the fork shared it: its parent's, not the fork's
    assert await remove_workspaces(runtime, [said_own["child_id"]]) == []  # idempotent
    removed = await remove_workspaces(runtime, [said_shared["parent"]["id"], "ses_gone"])
    assert removed == [parent_root]


async def test_remove_workspaces_leaves_a_project_workspace(build, tmp_path):
    runtime = build('workspace = { kind = "project" }')
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"))
    async with agent:
        await agent.run("hello")
    assert await remove_workspaces(runtime, [agent.session_id]) == []
    assert tmp_path.is_dir()
    assert (tmp_path / "tether.toml").is_file()


async def test_a_session_id_that_is_a_path_cannot_name_a_workspace(build):
    runtime = build()
    await runtime.store.create(new_header(agent="main", session_id="../escape"))
    agent = await runtime.compose(
        agent="main", model=FunctionModel(lambda r: "hi"), session_id="../escape"
    )
    with pytest.raises(WorkspaceError) as info:
        async with agent:
            pass
    assert info.value.code is ErrorCode.WORKSPACE_INVALID


def test_call_helper_builds_a_tool_call():
    assert call("where").tool_calls[0].name == "where"


async def test_an_agent_on_a_store_of_its_own_keeps_its_workspace_with_that_store(tmp_path):
    profile = write_profile(tmp_path, "[tether]\n[agent.main]\n")
    runtime = Runtime(make_kernel(profile, {}))  # no store of its own
    store = MemoryStore()
    agent = await runtime.compose(agent="main", model=FunctionModel(lambda r: "hi"), store=store)
    async with agent:
        root = agent.workspace.root
    assert root.parent == runtime.workspaces.folder(store)
    assert tmp_path not in root.parents  # a memory store's sessions leave nothing in the project
