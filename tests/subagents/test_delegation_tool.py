"""The `subagent` tool: foreground and background delegation, and load-time negotiation."""

from __future__ import annotations

import anyio
import pytest

from tether.errors import CapabilityError, ErrorCode, PluginError
from tether.models import ModelRequest, ModelResponse, ToolCall
from tether.store import InboxAccepted, SQLiteStore, TurnEnded, UserMessage
from tether.subagents import SubagentCapabilities, SubagentResult
from tether.testing import scaled
from tether.testing.subagents import LimitedProvider
from tether_subagent_tools._tool import failure_text

from .conftest import (
    Brain,
    EchoTools,
    delegate,
    delegating_parent,
    echo_child,
    make_parent,
    tool_results,
    wait_for,
)

pytestmark = pytest.mark.anyio


def subagent_schema(request: ModelRequest, name: str = "subagent"):
    return next(t for t in request.tools if t.name == name)


async def run_parent(runtime, brain, prompt="go"):
    parent = await make_parent(runtime, brain.model)
    async with parent:
        await parent.run(prompt)
    return parent


# ------------------------------------------------------------------ the tool


async def test_registers_a_subagent_tool_that_delegates_and_returns_the_childs_output(runtime):
    brain = Brain(delegating_parent("child task"), echo_child)
    parent = await run_parent(runtime, brain)
    assert tool_results(parent) == ["child answer to child task"]
    assert parent.messages[-1].content == "parent saw: child answer to child task"
    (child,) = await parent.store.sessions(parent=parent.session_id)
    assert child.label == "do the task"


async def test_exposes_description_prompt_and_run_in_background(runtime):
    brain = Brain(lambda r: "done", echo_child)
    await run_parent(runtime, brain)
    schema = subagent_schema(brain.parent_requests[0])
    assert list(schema.parameters["properties"]) == ["description", "prompt", "run_in_background"]
    assert schema.parameters["required"] == ["description", "prompt"]


async def test_registers_under_a_configurable_tool_name(build_runtime):
    runtime = build_runtime('[plugin.subagent]\ntool_name = "delegate"\n')
    brain = Brain(delegating_parent(tool="delegate"), echo_child)
    parent = await run_parent(runtime, brain)
    assert "delegate" in [t.name for t in brain.parent_requests[0].tools]
    assert "subagent" not in [t.name for t in brain.parent_requests[0].tools]
    assert tool_results(parent) == ["child answer to child task"]


async def test_the_tool_exists_only_while_its_provider_is_registered(runtime):
    provider = runtime.subagents.get("spawn")
    seen: list[list[str]] = []

    def parent_side(request: ModelRequest) -> ModelResponse | str:
        seen.append([t.name for t in request.tools])
        return "ok"

    brain = Brain(parent_side, echo_child)
    parent = await make_parent(runtime, brain.model)
    async with parent:
        await parent.run("with the provider")
        assert runtime.subagents.remove_provider("spawn")
        await parent.run("without it")
        runtime.subagents.register_provider(provider)
        await parent.run("with it again")
    assert ["subagent" in names for names in seen] == [True, False, True]
    # The list the model saw with the provider is the same tuple both times (cache-stable).
    with_tool = [r.tools for r in brain.parent_requests]
    assert with_tool[0] is with_tool[2]


async def test_a_call_to_the_tool_while_its_provider_is_gone_is_an_unknown_tool(runtime):
    runtime.subagents.remove_provider("spawn")
    brain = Brain(delegating_parent("child task"), echo_child)
    parent = await run_parent(runtime, brain)
    (result,) = tool_results(parent)
    assert result.startswith('error: there is no tool "subagent"')
    assert brain.child_requests == []


async def test_omits_run_in_background_when_the_instance_disables_it(build_runtime):
    runtime = build_runtime("[plugin.subagent]\nrun_in_background = false\n")
    brain = Brain(lambda r: "done", echo_child)
    await run_parent(runtime, brain)
    schema = subagent_schema(brain.parent_requests[0])
    assert "run_in_background" not in schema.parameters["properties"]
    assert "run_in_background" not in schema.description


async def test_refuses_a_forced_run_in_background_when_the_instance_disables_it(build_runtime):
    runtime = build_runtime("[plugin.subagent]\nrun_in_background = false\n")
    brain = Brain(delegating_parent(background=True), echo_child)
    parent = await run_parent(runtime, brain)
    (result,) = tool_results(parent)
    assert result.startswith("error: invalid arguments")
    assert brain.child_requests == []


async def test_forwards_output_schema_and_returns_the_structured_json(build_runtime):
    runtime = build_runtime(
        "[plugin.subagent]\noutput_schema = "
        '{ type = "object", properties = { n = { type = "integer" } }, required = ["n"] }\n'
    )
    brain = Brain(delegating_parent(), lambda r: ["Here:", '```json\n{"n": 7}\n```'][1])
    parent = await run_parent(runtime, brain)
    assert tool_results(parent) == ['{"n": 7}']


async def test_disposes_the_child_on_the_success_path(runtime):
    brain = Brain(delegating_parent(), echo_child)
    parent = await make_parent(runtime, brain.model)
    events = []
    runtime.subagents.on_event(events.append)
    async with parent:
        await parent.run("go")
        assert [e.kind for e in events] == ["start", "end"]
        (header,) = await parent.store.sessions(parent=parent.session_id)
        child_events = [s.event for s in await parent.store.events(header.id)]
    assert isinstance(child_events[-1], TurnEnded)
    assert events[-1].stop_reason == "completed"


@pytest.mark.parametrize(
    ("finish_reason", "text"),
    [
        ("length", "subagent run hit its token limit before finishing"),
        ("refusal", "subagent run declined the task"),
        ("error", "subagent run failed"),
    ],
)
async def test_a_failed_child_is_an_error_result_with_its_partial_output(
    runtime, finish_reason, text
):
    brain = Brain(
        delegating_parent(),
        lambda r: ModelResponse(text="half an ans", finish_reason=finish_reason),
    )
    parent = await run_parent(runtime, brain)
    (result,) = tool_results(parent)
    assert result == f"error: {text}\nPartial output before the run ended:\nhalf an ans"
    assert next(m for m in parent.messages if m.role == "tool").is_error


def test_an_unknown_stop_reason_ends_abnormally():
    result = SubagentResult.model_construct(output="", stop_reason="paused", diagnostic=None)
    assert failure_text(result) == "subagent run ended abnormally (paused)"


async def test_a_start_rejection_is_an_error_result(build_runtime):
    runtime = build_runtime("[plugin.subagent]\nmax_depth = 0\n")
    brain = Brain(delegating_parent(), echo_child)
    parent = await run_parent(runtime, brain)
    (result,) = tool_results(parent)
    assert result.startswith("error: subagent depth 1 exceeds max_depth 0")
    assert result.endswith("[SUBAGENT_DEPTH_EXCEEDED]")


async def test_overlaps_sibling_foreground_delegations(runtime):
    both = anyio.Event()
    waiting = []

    async def child(request):
        waiting.append(request)
        if len(waiting) == 2:
            both.set()
        with anyio.fail_after(scaled(5)):
            await both.wait()
        return f"done {request.messages[-1].content}"

    def parent_answer(request):
        if request.messages[-1].role == "tool":
            return "both done"
        return ModelResponse(
            tool_calls=tuple(
                ToolCall(id=f"d{i}", name="subagent", arguments={"description": "x", "prompt": p})
                for i, p in enumerate(["a", "b"])
            ),
            finish_reason="tool_calls",
        )

    brain = Brain(parent_answer, child)
    parent = await run_parent(runtime, brain)
    assert tool_results(parent) == ["done a", "done b"]


# ------------------------------------------------------------------ background


async def test_background_returns_a_task_id_at_once_and_the_notice_is_the_next_turn(runtime):
    release = anyio.Event()

    async def child(request):
        await release.wait()
        return "the answer"

    brain = Brain(delegating_parent(background=True), child)
    parent = await make_parent(runtime, brain.model)
    async with parent:
        await parent.run("go")
        (result,) = tool_results(parent)
        (header,) = await parent.store.sessions(parent=parent.session_id)
        assert result == (
            f"Started task {header.id}. Its result will arrive in a <task_result> message."
        )
        assert parent.turns == 1
        release.set()
        await wait_for(lambda: parent.turns == 2)
        await parent.when_idle()
    notice = [m.content for m in parent.messages if m.content.startswith("<task_result")][-1]
    assert notice == (
        f'<task_result id="{header.id}" tool="subagent" status="completed">the answer</task_result>'
    )
    assert parent.messages[-1].content == "noted"
    claims = [s.event for s in await parent.store.events(parent.session_id)]
    (claim,) = [e for e in claims if isinstance(e, UserMessage) and e.source.kind == "notice"]
    assert claim.source.sender == header.id


async def test_a_busy_parent_gets_the_notice_at_its_next_step(build_runtime):
    runtime = build_runtime(extra_plugins={"echo-tools": EchoTools().plugin})
    accepted = anyio.Event()

    async def parent_answer(request):
        last = request.messages[-1]
        if last.role == "user" and last.content == "go":
            return delegate("child task", background=True)
        if last.role == "tool" and last.name == "subagent":
            with anyio.fail_after(scaled(5)):  # busy until the child's notice has been accepted
                await accepted.wait()
            return ModelResponse(
                tool_calls=(ToolCall(id="e1", name="echo", arguments={"text": "x"}),),
                finish_reason="tool_calls",
            )
        return f"saw: {last.content}"

    brain = Brain(parent_answer, echo_child)
    parent = await make_parent(runtime, brain.model)

    def watch(event):
        if isinstance(event, InboxAccepted) and event.source.kind == "notice":
            assert event.delivery == "step"
            accepted.set()

    parent.listen(watch)
    async with parent:
        await parent.run("go")
    assert parent.turns == 1
    last = brain.parent_requests[-1].messages[-1]
    assert last.role == "user"
    assert last.content.startswith('<task_result id="ses_')
    assert last.content.endswith('status="completed">child answer to child task</task_result>')


async def test_parent_teardown_cancels_its_background_jobs(runtime):
    async def child(request) -> str:
        await anyio.sleep_forever()
        return "never"

    brain = Brain(delegating_parent(background=True), child)
    parent = await make_parent(runtime, brain.model)
    with anyio.fail_after(scaled(5)):
        async with parent:
            await parent.run("go")
            await wait_for(lambda: len(brain.child_requests) == 1)
    (header,) = await parent.store.sessions(parent=parent.session_id)
    ends = [s.event for s in await parent.store.events(header.id) if s.event.type == "turn/end"]
    assert [e.stop_reason for e in ends] == ["aborted"]
    assert parent.turns == 1  # no notice woke the parent during teardown


# ------------------------------------------------------------------ load-time negotiation


def limited(**capabilities):
    return {"limited": LimitedProvider(capabilities=SubagentCapabilities(**capabilities))}


def test_rejects_a_numeric_max_depth_on_a_provider_without_depth_limit(build_runtime):
    with pytest.raises(CapabilityError) as caught:
        build_runtime('[plugin.subagent]\nprovider = "limited"\nmax_depth = 2\n', limited())
    error = caught.value
    assert error.code == ErrorCode.UNSUPPORTED_CAPABILITY
    assert str(error).startswith(
        'subagent provider "limited" does not support the "depth_limit" capability '
        '(plugin "subagent", setting max_depth = 2 in '
    )
    assert 'set max_depth = "provider-managed"' in str(error)
    assert "plugins here that offer it: spawn, fork" in str(error)


def test_the_default_max_depth_also_needs_depth_limit(build_runtime):
    with pytest.raises(CapabilityError) as caught:
        build_runtime('[plugin.subagent]\nprovider = "limited"\n', limited())
    assert caught.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
    assert '(plugin "subagent", default max_depth in ' in str(caught.value)


async def test_provider_managed_depth_loads_on_a_provider_without_depth_limit(build_runtime):
    runtime = build_runtime(
        '[plugin.subagent]\nprovider = "limited"\nmax_depth = "provider-managed"\n', limited()
    )
    brain = Brain(delegating_parent(), echo_child)
    parent = await run_parent(runtime, brain)
    assert tool_results(parent) == ["child answer to child task"]
    provider = runtime.subagents.get("limited")
    assert provider is not None
    assert provider.started[0].max_depth is None


@pytest.mark.parametrize(
    ("setting", "capability"),
    [
        ('persona = "terse"', "persona"),
        ('tool_filter = { deny = ["subagent"] }', "tool_filter"),
        ('output_schema = { type = "object" }', "output_schema"),
    ],
)
def test_rejects_an_option_the_provider_cannot_enforce(build_runtime, setting, capability):
    with pytest.raises(CapabilityError) as caught:
        build_runtime(
            f'[plugin.subagent]\nprovider = "limited"\nmax_depth = "provider-managed"\n{setting}\n',
            limited(),
        )
    assert caught.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
    assert f'does not support the "{capability}" capability' in str(caught.value)


def test_rejects_continuable_mode_on_a_provider_without_prepare_continuable(build_runtime):
    with pytest.raises(CapabilityError) as caught:
        build_runtime(
            '[plugin.subagent]\nprovider = "limited"\nbackground = "continuable"\n'
            'max_depth = "provider-managed"\n',
            extra_plugins={"limited": LimitedProvider()},
        )
    assert caught.value.code == ErrorCode.UNSUPPORTED_CAPABILITY
    assert 'subagent provider "limited" does not support the "continuable" capability' in str(
        caught.value
    )
    assert 'set background = "one-shot"' in str(caught.value)


def test_rejects_an_unknown_provider(build_runtime):
    with pytest.raises(CapabilityError) as caught:
        build_runtime('[plugin.subagent]\nprovider = "remote"\n')
    assert caught.value.code == ErrorCode.MISSING_REQUIRED_PLUGIN
    assert str(caught.value).startswith('subagent provider "remote" is not loaded in scope')
    assert "plugins here that offer it: spawn, fork" in str(caught.value)


def test_rejects_an_explicit_empty_tool_filter_at_load(build_runtime):
    with pytest.raises(PluginError) as caught:
        build_runtime("[plugin.subagent]\ntool_filter = {}\n")
    assert caught.value.code == ErrorCode.PLUGIN_SETTINGS_INVALID
    assert "an empty tool filter would change nothing" in str(caught.value)
    assert "[plugin.subagent] tool_filter" in str(caught.value)


def test_rejects_an_invalid_output_schema_at_load(build_runtime):
    with pytest.raises(PluginError) as caught:
        build_runtime('[plugin.subagent]\noutput_schema = { type = "array" }\n')
    assert caught.value.code == ErrorCode.PLUGIN_SETTINGS_INVALID
    assert 'an output schema must be a JSON Schema object with "type": "object"' in str(
        caught.value
    )


async def test_a_kernels_tools_are_not_kept_after_the_kernel_is_gone(build_runtime):
    import gc
    import weakref

    import tether_subagent_tools

    made: list[weakref.ref[object]] = []
    for _ in range(3):
        runtime = build_runtime()
        found = runtime.kernel.global_scope.find_plugin("subagent")
        assert found is not None
        assert isinstance(found.obj, tether_subagent_tools.SubagentToolsPlugin)
        made.append(weakref.ref(found.obj))
        parent = await make_parent(runtime, Brain(lambda r: "ok", echo_child).model)
        async with parent:
            await parent.run("hello")
        # The instance holds the tools it handed over: no registry of the module does.
        assert parent.tools.get("subagent") in found.obj.tether_tools()
        del runtime, parent, found
    gc.collect()
    assert [ref() for ref in made] == [None, None, None]


async def test_parallel_background_calls_never_start_more_than_ten_tasks(runtime, tmp_path):
    # The calls of one step run at once (the tool is safe): each must see the ones still
    # starting, or all would pass the room check before any is registered.
    release = anyio.Event()

    async def child(request):
        await release.wait()
        return "done"

    def parent(request):
        if request.messages[-1].role == "user" and request.messages[-1].content == "go":
            calls = [delegate(f"task {n}", background=True, call_id=f"d{n}") for n in range(14)]
            return calls[0].model_copy(update={"tool_calls": tuple(c.tool_calls[0] for c in calls)})
        return "noted"

    brain = Brain(parent, child)
    store = SQLiteStore(tmp_path / "sessions.db")  # its writes yield: the calls interleave
    try:
        agent = await make_parent(runtime, brain.model, store)
        async with agent:
            await agent.run("go")
            results = tool_results(agent)
            release.set()
            await runtime.subagents.tasks.wait_jobs(agent)
    finally:
        await store.aclose()
    started = [r for r in results if r.startswith("Started task ")]
    refused = [r for r in results if r.endswith("[TOO_MANY_BACKGROUND_TASKS]")]
    assert (len(started), len(refused)) == (10, 4)


async def test_parallel_continuable_calls_count_each_task_once(build_runtime, tmp_path):
    # A continuable child is live (working) before its start returns: the place its call held
    # must not count it a second time, or a step of ten calls starts only about half of them.
    release = anyio.Event()

    async def child(request):
        await release.wait()
        return "done"

    def parent(request):
        if request.messages[-1].role == "user" and request.messages[-1].content == "go":
            calls = [delegate(f"task {n}", background=True, call_id=f"d{n}") for n in range(14)]
            return calls[0].model_copy(update={"tool_calls": tuple(c.tool_calls[0] for c in calls)})
        return "noted"

    runtime = build_runtime('[plugin.subagent]\nbackground = "continuable"\n')
    brain = Brain(parent, child)
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        agent = await make_parent(runtime, brain.model, store)
        async with agent:
            await agent.run("go")
            results = tool_results(agent)
            release.set()
            await runtime.subagents.continuation.wait_quiet(agent)
    finally:
        await store.aclose()
    started = [r for r in results if r.startswith("Started task ")]
    refused = [r for r in results if r.endswith("[TOO_MANY_BACKGROUND_TASKS]")]
    assert (len(started), len(refused)) == (10, 4)
