"""The skill tool: catalog message, load_skill, /name, and the prompt that only grows."""

from __future__ import annotations

import itertools

import pytest

import tether
import tether_skill_tool
from tests.remake import remade
from tether.agents import ToolFilter
from tether.models import FunctionModel, ModelResponse, ScriptedModel, ToolCall
from tether.runtime import compose_agent
from tether.skills import DirectoryResources, InvocationPolicy
from tether.store import ContextMessage, DescriptorEvent, MemoryStore
from tether_skill_tool._catalog import render_catalog

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["skill-tool"]
[agent.main]
model = "scripted:none.toml"
"""


def skill(name, description="Does a thing.", content="Do the thing.", **policy):
    return {
        "name": name,
        "description": description,
        "content": content,
        "invocation": InvocationPolicy(**policy),
        "resource_base": DirectoryResources(path=f"/skills/{name}"),
    }


@pytest.fixture
def runtime(tether_runtime):
    return tether_runtime(PROFILE, {"skill-tool": tether_skill_tool.SkillToolPlugin})


def calls(*names):
    return ModelResponse(
        tool_calls=tuple(
            ToolCall(id=f"c{n}", name="load_skill", arguments={"name": name})
            for n, name in enumerate(names)
        ),
        finish_reason="tool_calls",
    )


async def run(runtime, *responses, prompts=("go",), agent_kwargs=None):
    queue = list(responses)

    def answer(request):
        return queue.pop(0) if queue else "done"

    model = FunctionModel(answer)
    agent = await compose_agent(runtime, MemoryStore(), model=model, **(agent_kwargs or {}))
    async with agent:
        for prompt in prompts:
            await agent.run(prompt)
    return agent, model


async def test_a_stable_durable_catalog_is_appended_at_the_first_step(runtime):
    runtime.skills.register(skill("review", "Review <safely> & well"))
    runtime.skills.register(skill("beta", "Long description " * 40))
    runtime.skills.register(skill("hidden", user_invocable=True, model_invocable=False))
    _agent, model = await run(runtime)
    first = model.requests[0]
    catalog = first.messages[-1].content
    assert catalog == render_catalog(
        (
            ("beta", ("Long description " * 40).strip()[:497] + "..."),
            ("review", "Review <safely> & well"),
        ),
        first=True,
    )
    assert "- `review`: Review &lt;safely&gt; &amp; well" in catalog
    assert "hidden" not in catalog
    assert all("available_skills" not in block for block in first.system)


async def test_no_catalog_when_no_skill_is_model_invocable(runtime):
    runtime.skills.register(skill("only-user", model_invocable=False))
    _agent, model = await run(runtime)
    assert all("<available_skills>" not in m.content for m in model.requests[0].messages)


async def test_load_skill_returns_the_rendered_content_as_a_tool_result(runtime):
    runtime.skills.register(skill("review", content="Step one.\nStep two."))
    agent, _model = await run(runtime, calls("review"))
    result = next(m for m in agent.messages if m.role == "tool")
    assert result.content == (
        '<skill_content name="review">\n<skill_resources>\n'
        "Base directory for this skill: /skills/review\n"
        "Resolve relative paths mentioned by this skill against the base directory before "
        "using them. Load referenced resources only as needed.\n</skill_resources>\n\n"
        "<skill_instructions>\nStep one.\nStep two.\n</skill_instructions>\n</skill_content>"
    )
    assert not result.is_error


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("Not_A_Name", 'error: invalid skill name "Not_A_Name"'),
        ("missing", 'error: skill "missing" is unknown or no longer available'),
        ("user-only", 'error: skill "user-only" is not available for model invocation'),
    ],
)
async def test_load_skill_errors(runtime, name, error):
    runtime.skills.register(skill("user-only", model_invocable=False))
    agent, _ = await run(runtime, calls(name))
    result = next(m for m in agent.messages if m.role == "tool")
    assert (result.content, result.is_error) == (error, True)


async def test_model_policy_is_checked_before_the_body_is_read(runtime):
    loads: list[str] = []

    class Counting:
        name = "counting"

        async def list(self, *, cwd):
            return [
                tether.skills.SkillCandidate(
                    name="secret",
                    description="d",
                    source="custom",
                    provider="counting",
                    rank=1,
                    invocation=InvocationPolicy(model_invocable=False),
                )
            ]

        async def get(self, candidate, *, cwd):
            loads.append(candidate.name)
            return None

    runtime.skills.register_provider(lambda control: Counting(), name="counting")
    _agent, _ = await run(runtime, calls("secret"))
    assert loads == []


async def test_a_replacement_catalog_and_a_tombstone_are_appended_as_skills_change(runtime):
    first = runtime.skills.register(skill("alpha"))
    model_calls = []

    def answer(request):
        model_calls.append(request)
        return "ok"

    agent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(answer))
    async with agent:
        await agent.run("one")
        second = runtime.skills.register(skill("beta"))
        await agent.run("two")
        first.dispose()
        second.dispose()
        await agent.run("three")
    catalogs = [m.content for m in agent.messages if m.content.startswith("<system-reminder>")]
    assert catalogs == [
        render_catalog((("alpha", "Does a thing."),), first=True),
        render_catalog((("alpha", "Does a thing."), ("beta", "Does a thing.")), first=False),
        render_catalog((), first=False),
    ]


async def test_a_continued_session_resumes_from_its_latest_catalog(runtime):
    runtime.skills.register(skill("alpha"))
    store = MemoryStore()
    agent = await compose_agent(runtime, store, model=FunctionModel(lambda r: "ok"))
    async with agent:
        await agent.run("one")
    again = await compose_agent(
        runtime, store, model=FunctionModel(lambda r: "ok"), session_id=agent.session_id
    )
    async with again:
        await again.run("two")
    catalogs = [m for m in again.messages if m.content.startswith("<system-reminder>")]
    assert len(catalogs) == 1


async def test_no_catalog_when_the_tool_is_restricted_away(runtime):
    runtime.skills.register(skill("alpha"))
    model = FunctionModel(lambda r: "ok")
    agent = await compose_agent(runtime, MemoryStore(), model=model)
    agent = remade(agent, tools=agent.tools.restrict(ToolFilter(deny=frozenset({"load_skill"}))))
    async with agent:
        await agent.run("hi")
    assert all("<available_skills>" not in m.content for m in agent.messages)


async def test_a_slash_name_from_a_person_appends_a_user_invocable_skill(runtime):
    runtime.skills.register(skill("deploy", content="Deploy carefully.", model_invocable=False))
    runtime.skills.register(skill("no-user", content="Secret.", user_invocable=False))
    _agent, model = await run(
        runtime, prompts=("please /deploy now and /no-user and /unknown and a/b 1/2",)
    )
    contents = [m.content for m in model.requests[0].messages]
    assert any("<skill_instructions>\nDeploy carefully.\n" in c for c in contents)
    assert not any("Secret." in c for c in contents)


async def test_a_slash_name_in_a_followup_from_another_agent_is_prose(runtime):
    from tether.store import MessageSource

    runtime.skills.register(skill("deploy", content="Deploy carefully."))
    agent = await compose_agent(runtime, MemoryStore(), model=FunctionModel(lambda r: "ok"))
    async with agent:
        await agent.run("/deploy", source=MessageSource(kind="subagent"))
    assert not any("Deploy carefully." in m.content for m in agent.messages)


async def test_skills_loading_mid_session_keep_the_prompt_append_only(runtime):
    runtime.skills.register(skill("alpha", content="Alpha body."))
    responses = iter(
        [calls("alpha"), "first answer", calls("beta"), "second answer", "third answer"]
    )
    model = FunctionModel(lambda request: next(responses))
    agent = await compose_agent(runtime, MemoryStore(), model=model)
    async with agent:
        await agent.run("one")
        runtime.skills.register(skill("beta", content="Beta body."))
        await agent.run("two /alpha")
        await agent.run("three")
    requests = model.requests
    for before, after in itertools.pairwise(requests):
        assert after.system == before.system
        assert after.tools == before.tools
        assert after.messages[: len(before.messages)] == before.messages
    assert any("Beta body." in m.content for m in requests[-1].messages)


async def test_the_scripted_quickstart_style_load(runtime, tmp_path):
    runtime.skills.register(skill("citing-notes", content="Quote the note."))
    model = ScriptedModel.from_data(
        {
            "steps": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "citing-notes"}}]},
                {"expect": "Quote the note.", "text": "Loaded."},
            ]
        }
    )
    agent = await compose_agent(runtime, MemoryStore(), model=model)
    async with agent:
        assert await agent.run("go") == "completed"
    model.assert_consumed()


async def test_a_kernels_parts_are_not_kept_after_the_kernel_is_gone(tether_runtime):
    import gc
    import weakref

    made: list[weakref.ref[object]] = []
    for _ in range(3):
        runtime = tether_runtime(PROFILE, {"skill-tool": tether_skill_tool.SkillToolPlugin})
        instance = runtime.kernel.plugins[0].obj
        assert isinstance(instance, tether_skill_tool.SkillToolPlugin)
        made.append(weakref.ref(instance))
        agent, _ = await run(runtime, calls("alpha"))
        assert agent.tools.get("load_skill") is instance.tool  # the instance's own tool
        del runtime, agent, instance
    gc.collect()
    assert [ref() for ref in made] == [None, None, None]


async def test_each_catalog_is_stored_with_a_descriptor_of_what_it_listed(runtime):
    runtime.skills.register(skill("alpha"))
    store = MemoryStore()
    agent = await compose_agent(runtime, store, model=FunctionModel(lambda r: "ok"))
    async with agent:
        await agent.run("one")
        runtime.skills.register(skill("beta", "Beta <b>"))
        await agent.run("two")
    log = [stored.event for stored in await store.events(agent.session_id)]
    descriptors = [e for e in log if isinstance(e, DescriptorEvent) and e.kind == "skill-catalog"]
    assert [d.data for d in descriptors] == [
        {"entries": [["alpha", "Does a thing."]]},
        {"entries": [["alpha", "Does a thing."], ["beta", "Beta <b>"]]},
    ]
    # Each is stored right after the message it describes, in the step's one commit.
    for descriptor in descriptors:
        before = log[log.index(descriptor) - 1]
        assert isinstance(before, ContextMessage)
        assert before.origin == "skill-catalog"


async def test_a_restored_agent_reads_what_was_shown_from_the_descriptor(tether_runtime):
    """Another process (a fresh runtime and plugin instance) restores the session: it trusts
    the descriptor, not the prose. A descriptor saying "beta" was shown, under a message
    that no one could parse, makes the restored agent show a replacement only when the
    registry's catalog differs from beta."""
    store = MemoryStore()
    first = tether_runtime(PROFILE, {"skill-tool": tether_skill_tool.SkillToolPlugin})
    first.skills.register(skill("alpha"))
    agent = await compose_agent(first, store, model=FunctionModel(lambda r: "ok"))
    async with agent:
        await agent.run("one")
    session = agent.session_id

    def restored(*names):
        runtime = tether_runtime(PROFILE, {"skill-tool": tether_skill_tool.SkillToolPlugin})
        for name in names:
            runtime.skills.register(skill(name))
        model = FunctionModel(lambda r: "ok")
        return compose_agent(runtime, store, model=model, session_id=session), model

    # The same catalog: nothing new is shown.
    made, model = restored("alpha")
    again = await made
    async with again:
        await again.run("two")
    assert not any("available_skills" in m.content for m in model.requests[0].messages[-1:])
    catalogs = [m for m in model.requests[0].messages if "<available_skills>" in m.content]
    assert len(catalogs) == 1

    # What the descriptor says is what counts: rewrite the stored record to say beta.
    await store.append(
        session,
        [DescriptorEvent(kind="skill-catalog", data={"entries": [["beta", "Does a thing."]]})],
    )
    made, model = restored("beta")
    third = await made
    async with third:
        await third.run("three")
    assert not any("<available_skills>" in m.content for m in model.requests[0].messages[-2:]), (
        "beta was recorded as shown: no replacement"
    )
    made, model = restored("alpha")
    fourth = await made
    async with fourth:
        await fourth.run("four")
    replacement = render_catalog((("alpha", "Does a thing."),), first=False)
    assert model.requests[0].messages[-1].content == replacement


async def test_the_catalog_is_shown_again_after_a_compaction(runtime):
    """A compaction replaces the message that showed the catalog: the next step shows it
    again, in the same process and in another one (the restored agent counts compactions)."""
    runtime.skills.register(skill("review", "Review well"))

    def answer(request):
        return "a summary" if request.purpose == "compaction" else "done " * 20

    model = FunctionModel(answer)
    store = MemoryStore()
    agent = await compose_agent(runtime, store, model=model)
    async with agent:
        for n in range(4):
            await agent.run(f"question {n}")
        assert await agent.compact() is not None
        assert agent.budget.compactions == 1
        await agent.run("after")
    catalog = render_catalog((("review", "Review well"),), first=True)
    turns = [r for r in model.requests if r.purpose == "turn"]
    assert sum(m.content == catalog for m in turns[0].messages) == 1
    last = turns[-1].messages
    assert catalog in [m.content for m in last]  # shown again after the summary
    assert last[0].content.startswith("<conversation_summary>")
    # Nothing new while nothing changed: one catalog per view.
    assert sum(m.content == catalog for m in last) == 1


async def test_a_preview_changes_nothing_and_leaving_drops_what_the_step_kept(runtime):
    runtime.skills.register(skill("alpha"))
    model = FunctionModel(lambda r: "ok")
    agent = await compose_agent(runtime, MemoryStore(), model=model)
    instance = runtime.kernel.plugins[0].obj
    assert isinstance(instance, tether_skill_tool.SkillToolPlugin)
    step = instance.steps[0].run
    catalog = render_catalog((("alpha", "Does a thing."),), first=True)
    async with agent:
        _request, pending = await agent.loop.preview("x")
        assert [m.content for m in pending] == ["x", catalog]
        await agent.run("hi")  # the preview did not count as shown: the turn shows it
        assert model.requests[0].messages[-1].content == catalog
        assert step._shown  # pyright: ignore[reportPrivateUsage]  (white-box: kept while open)
        _request, pending = await agent.loop.preview("x")
        assert [m.content for m in pending] == ["x"]
    assert not step._shown  # pyright: ignore[reportPrivateUsage]  (white-box: dropped on leave)
