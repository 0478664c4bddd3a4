"""A branch or a rewind killed half-way leaves the old state or the new one, never half: a
real process branches or rewinds a session in a real SQLite file and is killed (SIGKILL)
inside the store's write, every statement but the last run; the store then holds every session
as it was (no half branch, no stray lease), and the same operation runs again, whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.models import FunctionModel
from tether.runtime import Runtime, branch_session, rewind_session
from tether.store import Event, RewindEvent, SessionHeader, SQLiteStore
from tether.store.replay import fold
from tether.testing import make_kernel, tree_problems, write_profile

from .conftest import Worker

pytestmark = pytest.mark.anyio

BRANCH_WORKER = Path(__file__).with_name("branch_worker.py")
PROFILE = """
[agent.main]
model = "scripted:none.toml"
"""


@pytest.fixture
def spawn_branch():
    started: list[Worker] = []

    def start(*args: object) -> Worker:
        worker = Worker(*args, script=BRANCH_WORKER)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()


async def build(tmp_path: Path) -> tuple[Path, Path, str]:
    """A profile, a store and a session of four ended turns in it."""
    profile = write_profile(tmp_path, PROFILE)
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    try:
        runtime = Runtime(make_kernel(profile), store)
        model = FunctionModel(lambda request: f"answer to {request.messages[-1].content}")
        agent = await runtime.compose(model=model)
        await runtime.run_session(agent, ["one", "two", "three", "four"])
        return profile, path, agent.session_id
    finally:
        await store.aclose()


async def state(path: Path) -> dict[str, tuple[SessionHeader, tuple[Event, ...]]]:
    store = SQLiteStore(path)
    try:
        return {
            header.id: (header, tuple(s.event for s in await store.events(header.id)))
            for header in await store.sessions()
        }
    finally:
        await store.aclose()


async def test_a_branch_killed_midway_leaves_no_half_branch(tmp_path, spawn_branch):
    profile, path, original = await build(tmp_path)
    before = await state(path)

    worker = spawn_branch("branch", profile, path, original, 2)
    assert worker.line() == "READY"
    assert worker.line() == "MIDWAY"  # the header, the lease and the prefix written, uncommitted
    worker.kill()

    assert await state(path) == before  # no branch, the original as it was
    store = SQLiteStore(path)
    try:  # the store is whole and unlocked: the branch is made again, whole
        header = await branch_session(Runtime(make_kernel(profile), store), original, at_turn=2)
        own = [s.event.type for s in await store.events(header.id, after=header.seed_length)]
        # Its lineage, its workspace, and the prompts of turns 3 and 4, accepted before the
        # cut and dropped: they were the original's.
        assert own == ["descriptor", "descriptor", "inbox/discarded", "inbox/discarded"]
        assert await tree_problems(store, header.id) == {}
    finally:
        await store.aclose()


async def test_a_rewind_killed_midway_leaves_the_session_as_it_was(tmp_path, spawn_branch):
    profile, path, original = await build(tmp_path)
    before = await state(path)

    worker = spawn_branch("rewind", profile, path, original, 2)
    assert worker.line() == "READY"
    assert worker.line() == "MIDWAY"  # the lease taken, the rewind event not written
    worker.kill()

    assert await state(path) == before
    store = SQLiteStore(path)
    try:  # the dead worker's lease is no obstacle: the rewind runs again, whole
        runtime = Runtime(make_kernel(profile), store)
        event = await rewind_session(runtime, original, 2)
        assert isinstance(event, RewindEvent)
        log = [s.event for s in await store.events(original)]
        assert log[-1] == event
        assert fold(log).history == fold(log[: event.keep]).history
        assert await store.holder(original) is None
    finally:
        await store.aclose()


@pytest.mark.parametrize("mode", ["branch-whole", "rewind-whole"])
async def test_a_worker_left_to_finish_leaves_the_new_state(tmp_path, spawn_branch, mode):
    profile, path, original = await build(tmp_path)
    before = await state(path)
    worker = spawn_branch(mode, profile, path, original, 1)
    assert worker.line() == "READY"
    done = worker.line()
    assert done.startswith("done ")
    after = await state(path)
    if mode == "branch-whole":
        branch = done.split()[1]
        assert set(after) == {*before, branch}
        header, events = after[branch]
        assert events[: header.seed_length] == before[original][1][: header.seed_length]
    else:
        assert after[original][1][:-1] == before[original][1]
        assert isinstance(after[original][1][-1], RewindEvent)
