"""An ACP child's answer reaches the parent's delta listeners as it arrives: a parent tether
whose child is ``tether acp`` of another profile (a real process), heard through
``Runtime.listen_deltas`` as a live view of the children would hear it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest

from tether.agents import Agent
from tether.models import FunctionModel, ModelDelta
from tether.runtime import compose_agent
from tether.store import AssistantMessage, DescriptorEvent, Event, SQLiteStore
from tether.subagents import SubagentStartRequest
from tether.testing import write_profile

from .test_tether_to_tether import (
    TIMEOUT,
    child_profile,
    child_turns,
    one_shot,
    parent_kernel,
    quiet_parent,
)

pytestmark = pytest.mark.anyio


class Heard:
    """What the parent's runtime hears, in order: every agent's deltas, and the events of each
    agent from its first delta on, as ``(session id, delta or event)``."""

    def __init__(self) -> None:
        self.items: list[tuple[str, ModelDelta | Event]] = []
        self._listened: set[str] = set()
        self._changed = anyio.Event()

    def delta(self, agent: Agent, delta: ModelDelta) -> None:
        sid = agent.session_id
        if sid not in self._listened:
            self._listened.add(sid)
            agent.listen(lambda event: self._add(sid, event))
        self._add(sid, delta)

    def _add(self, sid: str, item: ModelDelta | Event) -> None:
        self.items.append((sid, item))
        self._changed.set()
        self._changed = anyio.Event()

    def deltas(self, sid: str, kind: str | None = None) -> list[ModelDelta]:
        return [
            item
            for who, item in self.items
            if who == sid and isinstance(item, ModelDelta) and kind in (None, item.kind)
        ]

    async def wait_for_text(self, sid: str, count: int) -> None:
        while len(self.deltas(sid, "text")) < count:
            await self._changed.wait()


def function_child(folder: Path, code: str) -> Path:
    """A profile served by ``tether acp`` whose model is ``answer`` in ``child_brain.py``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "child_brain.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return write_profile(
        folder,
        '[tether]\nstore = "sqlite:.tether/sessions.db"\n'
        '[agent.main]\nmodel = "function:child_brain:answer"\n',
    )


async def test_an_acp_childs_text_and_reasoning_reach_the_parent_as_deltas(tmp_path):
    child = child_profile(
        tmp_path / "child",
        """
[[steps]]
reasoning = "I should look it up first."
text = "Let me look."
chunks = 4
tool_calls = [{ name = "lookup", arguments = {} }]
[[steps]]
text = "Found it."
chunks = 2
""",
    )
    runtime = parent_kernel(tmp_path / "parent", child)
    heard = Heard()
    unlisten = runtime.listen_deltas(heard.delta)
    try:
        run, result = await one_shot(runtime, tmp_path / "parent.db")
    finally:
        unlisten()
    assert result.output == "Let me look.\n\nFound it."
    texts = [d.text for d in heard.deltas(run.id, "text")]
    assert len(texts) == 6  # four pieces of the first message, two of the second
    assert "".join(texts) == result.output  # the second message begins apart
    reasoning = "".join(d.text for d in heard.deltas(run.id, "reasoning"))
    assert reasoning == "I should look it up first."
    # Every piece came before the child's answer was whole (the mirror logs it once, after).
    mine = [item for who, item in heard.items if who == run.id]
    answer_at = next(i for i, item in enumerate(mine) if isinstance(item, AssistantMessage))
    last_piece = max(i for i, item in enumerate(mine) if isinstance(item, ModelDelta))
    assert last_piece < answer_at
    assert [m.content for m in mine if isinstance(m, AssistantMessage)] == [result.output]


#: A child's model that streams two pieces, then waits for a file named "gate" next to it
#: before its last piece and its answer.
GATED = """
from pathlib import Path

import anyio

from tether.models import ModelDelta

GATE = Path(__file__).with_name("gate")

async def answer(request):
    yield ModelDelta("text", "First piece, ")
    yield ModelDelta("text", "second piece, ")
    while not GATE.exists():
        await anyio.sleep(0.05)
    yield ModelDelta("text", "last piece.")
    yield "First piece, second piece, last piece."
"""


async def test_the_parent_hears_a_childs_pieces_while_the_child_is_still_writing(tmp_path):
    # The gate opens once the parent heard two pieces: they came before the answer was done.
    child = function_child(tmp_path / "child", GATED)
    runtime = parent_kernel(tmp_path / "parent", child)
    heard = Heard()
    unlisten = runtime.listen_deltas(heard.delta)
    store = SQLiteStore(tmp_path / "parent.db")
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet_parent))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("go", parent)
                )
                await heard.wait_for_text(run.id, 2)
                early = [d.text for d in heard.deltas(run.id, "text")]
                answered = [e for _, e in heard.items if isinstance(e, AssistantMessage)]
                (tmp_path / "child" / "gate").touch()
                result = await run.result()
                await run.dispose()
    finally:
        unlisten()
        await store.aclose()
    assert early == ["First piece, ", "second piece, "]
    assert answered == []
    assert result.output == "First piece, second piece, last piece."
    assert "".join(d.text for d in heard.deltas(run.id, "text")) == result.output


@pytest.mark.parametrize("listening", [True, False])
async def test_a_childs_retried_step_is_a_retry_for_the_parent_and_not_in_its_answer(
    tmp_path, listening
):
    # The child tether's model streams a piece, fails recoverably, and answers on its retry:
    # the child marks the void piece, and the parent drops it from the child's answer, whether
    # the parent streams the child's turn (a listener) or not.
    child = function_child(
        tmp_path / "child",
        """
        from tether.errors import ErrorCode, ModelError
        from tether.models import ModelDelta

        attempts = 0

        async def answer(request):
            global attempts
            attempts += 1
            if attempts == 1:
                yield ModelDelta("text", "A first dra")
                raise ModelError(ErrorCode.MODEL_REQUEST_FAILED, "cut", recoverable=True)
            yield ModelDelta("text", "The real ")
            yield ModelDelta("text", "answer.")
            yield "The real answer."
        """,
    )
    runtime = parent_kernel(tmp_path / "parent", child)
    heard = Heard()
    unlisten = runtime.listen_deltas(heard.delta) if listening else lambda: None
    try:
        run, result = await one_shot(runtime, tmp_path / "parent.db")
    finally:
        unlisten()
    assert result.output == "The real answer."
    expected = [("text", "A first dra"), ("retry", ""), ("text", "The real "), ("text", "answer.")]
    assert [(d.kind, d.text) for d in heard.deltas(run.id)] == (expected if listening else [])


async def test_a_child_cancelled_mid_stream_keeps_what_the_parent_heard(tmp_path):
    child = function_child(tmp_path / "child", GATED)  # the gate never opens
    runtime = parent_kernel(tmp_path / "parent", child)
    heard = Heard()
    unlisten = runtime.listen_deltas(heard.delta)
    store = SQLiteStore(tmp_path / "parent.db")
    try:
        with anyio.fail_after(TIMEOUT):
            parent = await compose_agent(runtime, store, model=FunctionModel(quiet_parent))
            async with parent:
                run = await runtime.subagents.start(
                    "tether-child", SubagentStartRequest("go", parent)
                )
                await heard.wait_for_text(run.id, 2)
                await run.dispose()
                result = await run.result()
            mirror = [s.event for s in await store.events(run.id)]
    finally:
        unlisten()
        await store.aclose()
    assert result.stop_reason == "aborted"
    (kept,) = [e for e in mirror if isinstance(e, AssistantMessage)]
    assert (kept.content, kept.partial) == ("First piece, second piece, ", True)
    (partial,) = [e for e in mirror if isinstance(e, DescriptorEvent) and e.kind == "acp/partial"]
    assert partial.data == {"text": "First piece, second piece, ", "reason": "cancelled"}
    assert [t.stop_reason for t in await child_turns(child)] == ["aborted"]
