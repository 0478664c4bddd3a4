"""The local-child kit: one provider skeleton (``LocalChildProvider``) that spawn, fork and the
declared subagents' provider are built on; a subclass names itself and says what a child starts
from, and its one-shot and continuable children start from the same."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tether.models import FunctionModel
from tether.specialists import SpecialistProvider
from tether.store import ContextMessage, Event, MemoryStore
from tether.subagents import (
    ContinuablePlan,
    SubagentCapabilities,
    SubagentRuntime,
    SubagentStartRequest,
    declared_capabilities,
)
from tether.subagents.local import LocalChildProvider
from tether_fork import ForkProvider
from tether_spawn import SpawnProvider

from .conftest import echo_child, make_parent

pytestmark = pytest.mark.anyio

#: What a child of :class:`Briefed` starts with before its task.
BRIEF = "Background for every child: the release ships on Thursday."


class Briefed(LocalChildProvider):
    """A provider of the kit whose children start from a brief of its own."""

    name = "briefed"
    capabilities = SubagentCapabilities(output_schema=True, depth_limit=True, continuable=True)

    async def seed(self, request: SubagentStartRequest) -> Sequence[Event]:
        return [ContextMessage(role="user", content=BRIEF, origin="briefing")]


def test_a_local_child_provider_without_a_name_says_how_to_give_it_one():
    class Nameless(LocalChildProvider):
        pass

    with pytest.raises(TypeError) as caught:
        Nameless()
    assert str(caught.value) == (
        'Nameless sets no provider name: give the class a name = "NAME" attribute (a subclass '
        "of LocalChildProvider names itself)"
    )


def test_spawn_fork_and_the_specialists_are_one_skeleton_declaring_what_they_differ_in():
    spawn, fork, specialist = SpawnProvider(), ForkProvider(), SpecialistProvider()
    assert all(isinstance(p, LocalChildProvider) for p in (spawn, fork, specialist))
    assert (spawn.inherits_parent_context, spawn.keep_tool_list) == (False, False)
    assert (fork.inherits_parent_context, fork.keep_tool_list) == (True, True)
    everything = {"output_schema", "depth_limit", "tool_filter", "persona", "continuable"}
    assert declared_capabilities(spawn) == declared_capabilities(fork) == everything
    assert declared_capabilities(specialist) == {"output_schema", "depth_limit", "continuable"}


async def test_a_subclass_seed_starts_its_one_shot_child(kernel):
    parent = await make_parent(kernel, FunctionModel(echo_child))
    runtime = SubagentRuntime()
    runtime.register_provider(Briefed())
    async with parent:
        run = await runtime.start("briefed", SubagentStartRequest(prompt="go", parent=parent))
        result = await run.result()
        await run.dispose()
    assert result.output == "child answer to go"
    header = await parent.store.header(run.id)
    assert (header.seed_length, header.delegation_depth) == (1, 1)
    (first, *_) = await parent.store.events(run.id)
    assert first.event == ContextMessage(role="user", content=BRIEF, origin="briefing")


async def test_a_subclass_plans_its_continuable_child_with_the_same_seed_and_tool_list(kernel):
    parent = await make_parent(kernel, FunctionModel(echo_child), MemoryStore())
    request = SubagentStartRequest(prompt="go", parent=parent)
    plan = await Briefed().prepare_continuable(request)
    assert plan == ContinuablePlan(
        seed=[ContextMessage(role="user", content=BRIEF, origin="briefing")], keep_tool_list=False
    )
    assert (await ForkProvider().prepare_continuable(request)).keep_tool_list is True
