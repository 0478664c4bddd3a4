"""Oversized tool results: saved whole to ``.tether/results/<call id>.txt`` in the workspace,
the model (and the log) get a preview with the path, ``read_file`` reads the file back; a
result under the limit is untouched; the preview is what a restored session, a replay and a
compaction see."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tether
import tether_files
from tether.agents import AgentLimits, Tool
from tether.models import FunctionModel, ModelRequest, ModelResponse, ToolCall
from tether.runtime import Runtime
from tether.store import SQLiteStore, ToolResult
from tether.store.replay import fold

pytestmark = pytest.mark.anyio

PROFILE = """
[tether]
plugins = ["big", "files"]

[agent.main]
{agent}
"""


class Big:
    """An inline plugin whose ``big`` tool returns ``lines`` numbered lines of ``width``."""

    def __init__(self) -> None:
        def big(arguments: dict[str, Any], context: Any) -> str:
            width = arguments.get("width", 20)
            return "\n".join(
                f"{n:06d} " + "x" * (width - 7) for n in range(1, arguments["lines"] + 1)
            )

        self.tool = Tool(
            "big",
            "Return many lines.",
            big,
            {
                "type": "object",
                "properties": {"lines": {"type": "integer"}, "width": {"type": "integer"}},
                "required": ["lines"],
            },
        )

    @tether.hookimpl
    def tether_tools(self) -> list[Tool]:
        return [self.tool]


def step(*calls: ToolCall) -> ModelResponse:
    return ModelResponse(tool_calls=calls, finish_reason="tool_calls")


async def session(
    tether_kernel,
    tmp_path: Path,
    responses: list[ModelResponse],
    *,
    agent: str = "",
    limits: AgentLimits | None = None,
    prepare: Any = None,
):
    kernel = tether_kernel(
        PROFILE.format(agent=agent), {"big": Big(), "files": tether_files.FilesPlugin}
    )
    queue = list(responses)
    model = FunctionModel(lambda request: queue.pop(0) if queue else "done")
    folder = tmp_path / "workspace"
    folder.mkdir(exist_ok=True)
    store = SQLiteStore(tmp_path / "sessions.db")
    runtime = Runtime(kernel, store)
    composed = await runtime.compose(model=model, cwd=folder, limits=limits)
    if prepare is not None:
        prepare(composed.workspace.root)
    async with composed:
        await composed.run("go")
    return composed, model, store, runtime, folder


async def test_an_oversized_result_is_saved_and_the_model_reads_a_preview_and_pages_it(
    tether_kernel, tmp_path
):
    agent, model, store, _, _ = await session(
        tether_kernel,
        tmp_path,
        [
            step(ToolCall(id="call_1", name="big", arguments={"lines": 5000})),
            step(
                ToolCall(
                    id="r1",
                    name="read_file",
                    arguments={"path": ".tether/results/call_1.txt", "offset": 2500, "limit": 2},
                )
            ),
        ],
    )
    try:
        root = agent.workspace.root
        saved = root / ".tether" / "results" / "call_1.txt"
        full = "\n".join(f"{n:06d} " + "x" * 13 for n in range(1, 5001))
        assert saved.read_text() == full  # 104,999 characters, over the 80,000 default
        tool_messages = [m for m in agent.messages if m.role == "tool"]
        preview, page = (m.content for m in tool_messages)
        lines = preview.splitlines()
        assert lines[0] == (
            "[this result is 104,999 characters in 5,000 lines, more than the 80,000 a tool "
            "result may have: it was saved in full to .tether/results/call_1.txt in the "
            'workspace. Read it with read_file (path ".tether/results/call_1.txt", offset = '
            "the first line, limit = how many lines), or search it with search_files; read "
            "only the parts you need.]"
        )
        assert lines[1:3] == ["First 10 lines:", "000001 xxxxxxxxxxxxx"]
        assert "[... 4,985 lines not shown ...]" in lines
        assert lines[-6:] == [
            "Last 5 lines (from line 4,996):",
            *(f"{n:06d} xxxxxxxxxxxxx" for n in range(4996, 5001)),
        ]
        assert len(preview) < 1_500
        assert page == (
            "  2500\t002500 xxxxxxxxxxxxx\n  2501\t002501 xxxxxxxxxxxxx\n"
            "[lines 2500-2501 of 5000; read on with offset=2502]"
        )
        # What the model was sent, and what the log keeps, is the preview.
        assert all(len(m.content) < 2_000 for r in model.requests for m in r.messages)
        logged = [s.event for s in await store.events(agent.session_id)]
        results = [e for e in logged if isinstance(e, ToolResult)]
        assert results[0].content == preview
    finally:
        await store.aclose()


async def test_a_large_result_under_the_limit_is_untouched(tether_kernel, tmp_path):
    agent, _, store, _, _ = await session(
        tether_kernel, tmp_path, [step(ToolCall(id="c1", name="big", arguments={"lines": 3800}))]
    )
    try:
        (result,) = [m.content for m in agent.messages if m.role == "tool"]
        assert len(result) == 79_799  # 3,800 lines of 20 characters, under 80,000
        assert result.startswith("000001 ")
        assert result.endswith("003800 xxxxxxxxxxxxx")
        assert not (agent.workspace.root / ".tether").exists()
    finally:
        await store.aclose()


async def test_the_limit_is_an_agent_setting_and_zero_disables_it(tether_kernel, tmp_path):
    agent, _, store, _, _ = await session(
        tether_kernel,
        tmp_path,
        [step(ToolCall(id="c1", name="big", arguments={"lines": 100}))],
        agent="limits = { tool_result_max_chars = 1000 }",
    )
    await store.aclose()
    (preview,) = [m.content for m in agent.messages if m.role == "tool"]
    assert preview.startswith("[this result is 2,099 characters in 100 lines, more than the 1,000")
    (tmp_path / "off").mkdir()
    off, _, store, _, _ = await session(
        tether_kernel,
        tmp_path / "off",
        [step(ToolCall(id="c1", name="big", arguments={"lines": 5000}))],
        limits=AgentLimits(tool_result_max_chars=0),
    )
    try:
        (whole,) = [m.content for m in off.messages if m.role == "tool"]
        assert len(whole) == 104_999
    finally:
        await store.aclose()


async def test_a_restored_session_a_replay_and_a_compaction_see_the_preview(
    tether_kernel, tmp_path
):
    agent, _, store, _, folder = await session(
        tether_kernel, tmp_path, [step(ToolCall(id="c1", name="big", arguments={"lines": 5000}))]
    )
    await store.aclose()
    (preview,) = [m.content for m in agent.messages if m.role == "tool"]
    store = SQLiteStore(tmp_path / "sessions.db")
    try:
        folded = fold([s.event for s in await store.events(agent.session_id)])
        assert [m.content for m in folded.history if m.role == "tool"] == [preview]
        kernel = tether_kernel(
            PROFILE.format(agent='compaction = "manual"'),
            {"big": Big(), "files": tether_files.FilesPlugin},
        )
        summaries: list[ModelRequest] = []

        def answer(request: ModelRequest) -> str:
            summaries.append(request)
            return "summary: the big tool returned 5,000 numbered lines, saved to a file"

        runtime = Runtime(kernel, store)
        restored = await runtime.compose(
            model=FunctionModel(answer), cwd=folder, session_id=agent.session_id
        )
        async with restored:
            assert [m.content for m in restored.messages if m.role == "tool"] == [preview]
            assert await restored.compact() is not None
            await restored.run("and now?")
        assert all(len(m.content) < 2_000 for r in summaries for m in r.messages)
    finally:
        await store.aclose()


async def test_a_hostile_call_id_is_kept_inside_the_results_folder(tether_kernel, tmp_path):
    agent, _, store, _, _ = await session(
        tether_kernel,
        tmp_path,
        [step(ToolCall(id="../../../escape", name="big", arguments={"lines": 5000}))],
    )
    await store.aclose()
    results = agent.workspace.root / ".tether" / "results"
    (saved,) = results.iterdir()
    assert saved.name.startswith("_.._.._escape-")
    assert saved.name.endswith(".txt")
    assert not (tmp_path.parent / "escape.txt").exists()
    (preview,) = [m.content for m in agent.messages if m.role == "tool"]
    assert f".tether/results/{saved.name}" in preview


async def test_when_the_results_folder_leads_outside_the_result_is_cut_instead(
    tether_kernel, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()

    def prepare(root: Path) -> None:
        (root / ".tether").symlink_to(outside)

    agent, _, store, _, _ = await session(
        tether_kernel,
        tmp_path,
        [step(ToolCall(id="c1", name="big", arguments={"lines": 5000}))],
        prepare=prepare,
    )
    await store.aclose()
    assert list(outside.iterdir()) == []
    (cut,) = [m.content for m in agent.messages if m.role == "tool"]
    assert len(cut) < 80_000 + 600
    assert cut.splitlines()[-1].startswith(
        "[cut: this result is 104,999 characters, more than the 80,000 a tool result may have, "
        "and it could not be saved to .tether/results/c1.txt in the workspace (path "
        '".tether/results/c1.txt" leads through a symbolic link out of the workspace'
    )
