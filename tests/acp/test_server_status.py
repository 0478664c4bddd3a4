"""``tether acp``'s tool calls: a status that never goes backwards, and images as image blocks.

A tool call goes out ``pending`` with its answer; it becomes ``in_progress`` when the kernel
runs it (for a tool that needs approval: once the client allowed it), then ``completed`` or
``failed``. These tests drive a real ``tether acp`` process with the ACP SDK's client side (the
helpers of test_server.py) over every path a call can take: approved, refused, cancelled while
the question is open, approved and failing; and a real MCP server's image (the reference
"everything" server's ``get-tiny-image``) reaching the client as an ACP image content block.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import AllowedOutcome, DeniedOutcome, McpServerStdio, RequestPermissionResponse

from tether.store import ToolResult
from tether.testing import write_profile

from ..mcp.servers import everything_server
from .test_server import TIMEOUT, Recorder, events, served, text

pytestmark = pytest.mark.anyio

PLUGIN = """
import tether
from tether.agents import Tool, ToolError

ANY = {"type": "object"}


def delete(args, ctx):
    return "deleted " + args["path"]


def explode(args, ctx):
    raise ToolError("the disk is on fire")


def look(args, ctx):
    return "looked at " + args["path"]


@tether.hookimpl
def tether_tools():
    return [
        Tool("delete", "Delete a file.", delete, ANY, needs_approval=True),
        Tool("explode", "Explode.", explode, ANY, needs_approval=True),
        Tool("look", "Look at a file.", look, ANY, safe=True),
    ]
"""

#: How far each status is along a call's life: it may only stay or move on.
RANK = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2}


def make_profile(folder: Path, script: str) -> Path:
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    (folder / "plugins" / "risky.py").write_text(PLUGIN, encoding="utf-8")
    write_profile(folder, script, "script.toml")
    return write_profile(
        folder,
        '[tether]\nplugins = ["risky"]\nplugin_dirs = ["plugins"]\n'
        'store = "sqlite:.tether/sessions.db"\n[agent.main]\nmodel = "scripted:script.toml"\n',
    )


class Asker(Recorder):
    """A client that answers permission requests with ``answer`` (an option id), or with
    ``"wait"`` holds the question open until :attr:`release` is set, then answers
    ``cancelled`` (as ACP asks of a client that cancelled the prompt). :attr:`trail` keeps every
    status it was told and every question, in order: ``(what, tool call id, status)``."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer
        self.trail: list[tuple[str, str, str]] = []
        self.asked = anyio.Event()
        self.release = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = update.session_update
        if kind in ("tool_call", "tool_call_update") and update.status is not None:
            self.trail.append((kind, update.tool_call_id, update.status))
        await super().session_update(session_id, update, **kwargs)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        self.trail.append(("request_permission", tool_call.tool_call_id, str(tool_call.status)))
        self.asked.set()
        if self.answer == "wait":
            await self.release.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        outcome = AllowedOutcome(outcome="selected", option_id=self.answer)
        return RequestPermissionResponse(outcome=outcome)

    def statuses(self) -> dict[str, list[str]]:
        """Each call's statuses in the order they came (a question counts as its status)."""
        seen: dict[str, list[str]] = {}
        for _, call_id, status in self.trail:
            seen.setdefault(call_id, []).append(status)
        return seen


def assert_monotone(client: Asker) -> None:
    """No call's status goes backwards, and nothing follows its end."""
    for call_id, statuses in client.statuses().items():
        ranks = [RANK[s] for s in statuses]
        assert ranks == sorted(ranks), (call_id, statuses)
        assert all(r < 2 for r in ranks[:-1]), (call_id, statuses)


def script(risky: str) -> str:
    """Two safe looks (one batch) and then ``risky``, a tool that needs approval."""
    return f"""
    [[steps]]
    text = "Looking first."
    tool_calls = [
        {{ name = "look", arguments = {{ path = "a.md" }} }},
        {{ name = "look", arguments = {{ path = "b.md" }} }},
        {{ name = "{risky}", arguments = {{ path = "notes.md" }} }},
    ]

    [[steps]]
    text = "Done."
    """


@pytest.mark.parametrize(
    ("risky", "answer", "expected"),
    [
        ("delete", "allow", ["pending", "pending", "in_progress", "completed"]),
        ("delete", "reject", ["pending", "pending", "failed"]),
        ("delete", "wait", ["pending", "pending", "failed"]),
        ("explode", "allow", ["pending", "pending", "in_progress", "failed"]),
    ],
    ids=["approved", "refused", "cancelled", "approved-then-failed"],
)
async def test_a_tool_calls_status_never_goes_backwards(tmp_path, risky, answer, expected):
    profile = make_profile(tmp_path, script(risky))
    client = Asker(answer)
    replies: list[Any] = []
    with anyio.fail_after(TIMEOUT):
        async with served(profile, client=client) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id

            async def prompt() -> None:
                replies.append(await conn.prompt(session_id=sid, prompt=text("Clean up")))

            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                if answer == "wait":  # the person cancels the prompt while being asked
                    await client.asked.wait()
                    await conn.cancel(session_id=sid)
                    # The server gives up its question itself: the prompt is answered before
                    # the client answers it (answering first could refuse the call instead).
                    while not replies:
                        await anyio.sleep(0.01)
                    client.release.set()
    assert replies[0].stop_reason == ("cancelled" if answer == "wait" else "end_turn")
    assert_monotone(client)
    statuses = client.statuses()
    assert statuses["call_1_3"] == expected
    # The safe looks ran as one batch: both started before either ended.
    assert statuses["call_1_1"] == statuses["call_1_2"] == ["pending", "in_progress", "completed"]
    order = [(call_id, status) for _, call_id, status in client.trail]
    starts = [order.index((c, "in_progress")) for c in ("call_1_1", "call_1_2")]
    ends = [order.index((c, "completed")) for c in ("call_1_1", "call_1_2")]
    assert max(starts) < min(ends), client.trail
    # Every call was announced pending before anything else was said about it.
    announced = [(c, s) for what, c, s in client.trail if what == "tool_call"]
    assert announced == [(f"call_1_{n}", "pending") for n in (1, 2, 3)]


async def test_session_load_replays_each_call_pending_then_its_end(tmp_path):
    profile = make_profile(tmp_path, script("delete"))
    client = Asker("allow")
    with anyio.fail_after(TIMEOUT):
        async with served(profile, client=client) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=text("Clean up"))
        replay = Asker("allow")
        async with served(profile, client=replay) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert_monotone(replay)
    assert replay.statuses() == {f"call_1_{n}": ["pending", "completed"] for n in (1, 2, 3)}


# ------------------------------------------------------------------------ images

IMAGE_SCRIPT = """
[[steps]]
text = "Fetching the picture."
tool_calls = [{ name = "everything__get-tiny-image", arguments = {} }]

[[steps]]
expect = "[image: image/png"
text = "Here it is."
"""


@pytest.fixture
def everything() -> list[str]:
    return everything_server()  # skips (fails under CI=true) when it cannot be installed


def images_of(update: Any) -> list[Any]:
    blocks = [c.content for c in update.content or [] if c.type == "content"]
    return [b for b in blocks if b.type == "image"]


async def test_an_mcp_tools_image_reaches_the_client_as_an_image_block(tmp_path, everything):
    profile = make_profile(tmp_path, IMAGE_SCRIPT)
    server = McpServerStdio(name="everything", command=everything[0], args=everything[1:], env=[])
    client = Asker("allow")
    with anyio.fail_after(TIMEOUT * 2):
        async with served(profile, client=client) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])).session_id
            reply = await conn.prompt(session_id=sid, prompt=text("Show me the tiny image"))
            live = [u for _, u in client.updates if u.session_update == "tool_call_update"]
            client.updates.clear()
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[server])
            replayed = [u for _, u in client.updates if u.session_update == "tool_call_update"]
    assert reply.stop_reason == "end_turn"
    (result,) = [u for u in live if u.status == "completed"]
    (image,) = images_of(result)
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")
    # The text comes first and keeps its note of the image, for a client that shows none.
    first = result.content[0].content
    assert first.type == "text"
    assert "[image: image/png, " in first.text
    assert image.data not in first.text
    # The image is the one the tool gave, as stored; session/load replays it the same way.
    (stored,) = [e for e in await events(profile, sid) if isinstance(e, ToolResult)]
    assert [(i.mime_type, i.data) for i in stored.images] == [("image/png", image.data)]
    (again,) = replayed
    assert [(i.mime_type, i.data) for i in images_of(again)] == [("image/png", image.data)]


async def test_a_result_without_images_is_one_text_block(tmp_path):
    profile = make_profile(tmp_path, script("delete"))
    client = Asker("allow")
    with anyio.fail_after(TIMEOUT):
        async with served(profile, client=client) as (conn, _, _):
            await conn.initialize(protocol_version=1)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=text("Clean up"))
    ends = [
        u
        for _, u in client.updates
        if u.session_update == "tool_call_update" and u.status == "completed"
    ]
    assert [[c.content.type for c in u.content] for u in ends] == [["text"]] * 3
