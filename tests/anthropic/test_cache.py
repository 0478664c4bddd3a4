"""The prompt-cache breakpoints follow tether's layout: a 10-turn session with a compaction,
run by ``tether run`` against a local server whose prompt cache behaves as Anthropic documents
(``simulated.py``). Each request reads what the one before it wrote, the compaction resets the
cache exactly once, the layout is the same bytes as recorded, and ``tether sessions stats``
shows what was read and written."""

from __future__ import annotations

import itertools
import json
import os
import re
from typing import Any

import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.models import Message, ModelRequest, ToolCall, ToolSchema
from tether_anthropic import MessagesModel

from .conftest import RECORDED
from .simulated import PromptCache, prefix_blocks, unmarked

pytestmark = pytest.mark.anyio

#: The breakpoint layout of the session below, request by request (regenerate with
#: TETHER_UPDATE_RECORDINGS=1 after a deliberate change, and read the difference).
LAYOUT = RECORDED / "cache_layout_10_turns.json"
PROMPTS = [f"Look up item {n}." if n % 2 else f"Tell me about item {n}." for n in range(1, 11)]
ANSWER = "Item {n} is well documented; " + "here is what the notes say about it. " * 20

NOTES = """\
import tether
from tether.agents import Tool

RESULT = "The notes on this item: " + "a long paragraph of facts and figures. " * 20


@tether.hookimpl
def tether_tools():
    return [Tool("lookup", "Look an item up in the notes.", lambda arguments, context: RESULT)]
"""


def respond(body: dict[str, Any]) -> dict[str, Any]:
    """The model: a summary when asked for one; a lookup for a "Look up" prompt, then the
    answer once its result is in."""
    last = body["messages"][-1]["content"]
    text = " ".join(block.get("text", "") for block in last)
    if "[Compaction]" in text:
        return _text("So far: the user asked about items one to five; each was answered.")
    asked = re.findall(r"item (\d+)\.", text)
    if asked and text.strip().startswith("Look up"):
        call = {"type": "tool_use", "id": f"toolu_{asked[-1]}", "name": "lookup", "input": {}}
        call["input"] = {"item": int(asked[-1])}
        return {"content": [call], "stop_reason": "tool_use"}
    n = asked[-1] if asked else "?"
    if not asked:  # a tool result: answer the turn's question
        n = body["messages"][-2]["content"][-1]["id"].removeprefix("toolu_")
    return _text(ANSWER.format(n=n))


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def layout(body: dict[str, Any]) -> list[list[Any]]:
    """The marked blocks of a request: where each is, its index in the prefix, its type."""
    return [
        [where, index, block["type"]]
        for index, (where, block) in enumerate(prefix_blocks(body))
        if "cache_control" in block
    ]


def stripped(body: dict[str, Any]) -> list[str]:
    """The prefix the cache hashes, block by block, as bytes of JSON (marks removed)."""
    return [json.dumps([w, unmarked(b)], sort_keys=True) for w, b in prefix_blocks(body)]


@pytest.fixture
def session(server, tmp_path, monkeypatch):
    """The 10-turn session, compacted after turn 5: ``(profile, session id, server)``."""
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.chdir(tmp_path)
    server.responder = respond
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "notes.py").write_text(NOTES, encoding="utf-8")
    (tmp_path / "instructions.md").write_text(
        "You answer questions about the items in the notes. " * 30, encoding="utf-8"
    )
    profile = tmp_path / "tether.toml"
    profile.write_text(
        f"""
[tether]
plugins = ["anthropic", "notes"]
plugin_dirs = ["plugins"]
store = "sqlite:sessions.db"

[agent.main]
model = "anthropic:claude-sonnet-4-5@{server.url}"
instructions = "instructions.md"
context_window = 8000
compaction = {{ mode = "manual", keep = 0.1 }}
""",
        encoding="utf-8",
    )
    prompts = [*PROMPTS[:5], "/compact", *PROMPTS[5:]]
    result = CliRunner().invoke(cli, ["run", "--profile", str(profile), *prompts])
    assert result.exit_code == 0, result.output
    (session_id,) = re.findall(r"^session (ses_\w+)$", result.stdout, re.M)
    return profile, session_id, server


def kinds(server) -> list[str]:
    """Per request: ``compaction`` (the summary request) or ``turn``."""
    return [
        "compaction" if "[Compaction]" in json.dumps(body["messages"][-1]) else "turn"
        for body in server.bodies()
    ]


def test_each_request_reads_what_the_one_before_wrote_and_the_compaction_resets_once(session):
    _, _, server = session
    bodies, usages, purposes = server.bodies(), server.usages, kinds(server)
    assert purposes.count("compaction") == 1
    assert len(bodies) == 10 + 5 + 1  # a turn each, a tool step each odd one, the summary
    first = layout(bodies[0])
    base = usages[0]["cache_creation_input_tokens"] - _tokens_after(bodies[0], first[0][1])
    turns = [(b, u) for b, u, p in zip(bodies, usages, purposes, strict=True) if p == "turn"]
    resets = 0
    for (before, was), (after, now) in itertools.pairwise(turns):
        written = was["cache_read_input_tokens"] + was["cache_creation_input_tokens"]
        if stripped(after)[: len(stripped(before))] == stripped(before):
            assert now["cache_read_input_tokens"] == written  # all of it, read back
            assert now["cache_read_input_tokens"] > was["cache_read_input_tokens"]
        else:
            resets += 1
            # Only the tools and the base prompt survive a compaction: read, not written.
            assert now["cache_read_input_tokens"] == base
            assert after["messages"][0]["content"][0]["text"].startswith("<conversation_summary>")
    assert resets == 1
    summary = purposes.index("compaction")
    # The summary request is the session's own request: it reads the history's cache too.
    assert usages[summary]["cache_read_input_tokens"] > base
    assert all(u["input_tokens"] == 0 for u in usages)  # everything sent is behind a mark


def _tokens_after(body: dict[str, Any], index: int) -> int:
    from .simulated import tokens

    return sum(tokens(block) for _, block in prefix_blocks(body)[index + 1 :])


def test_the_breakpoint_layout_is_the_recorded_one_byte_for_byte(session):
    _, _, server = session
    found = [layout(body) for body in server.bodies()]
    text = json.dumps(found, indent=1) + "\n"
    if os.environ.get("TETHER_UPDATE_RECORDINGS"):
        LAYOUT.write_text(text, encoding="utf-8")
    assert text == LAYOUT.read_text(encoding="utf-8")
    for marks in found:
        assert len(marks) <= 4
        assert marks[0][0] == "system"  # after the tools and the base prompt
    # Each request's middle mark is where the request before it ended (its last mark), the
    # same block at the same place; but for the first request after the compaction.
    bodies = server.bodies()
    moved = 0
    for before, after in itertools.pairwise(bodies):
        end = layout(before)[-1][1]
        middle = [mark[1] for mark in layout(after)[1:-1]]
        if middle == [end] and stripped(after)[: end + 1] == stripped(before)[: end + 1]:
            moved += 1
    assert moved >= len(bodies) - 3  # all but the summary request and the one after it


def test_stats_show_the_cache_read_and_written_per_request(session):
    profile, session_id, server = session
    result = CliRunner().invoke(
        cli, ["sessions", "stats", session_id, "--profile", str(profile), "--json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["sessions"][0]["requests"]
    assert [(row["cached_tokens"], row["cache_write_tokens"]) for row in rows] == [
        (u["cache_read_input_tokens"], u["cache_creation_input_tokens"]) for u in server.usages
    ]
    table = CliRunner().invoke(cli, ["sessions", "stats", session_id, "--profile", str(profile)])
    assert table.exit_code == 0, table.output
    assert "written" in table.output


async def test_a_step_of_many_calls_still_reads_the_previous_request(server):
    """The API looks back 20 blocks from a mark: a step that adds more (12 calls and their
    results) is read back through the mark where the previous request ended."""
    calls = tuple(ToolCall(id=f"t{n}", name="look", arguments={"n": n}) for n in range(12))
    asked = Message(role="user", content="Look at twelve things.")
    before = ModelRequest(
        system=("Base prompt.",), tools=(ToolSchema(name="look"),), messages=(asked,)
    )
    after = before.model_copy(
        update={
            "messages": (
                asked,
                Message(role="assistant", tool_calls=calls),
                *(Message(role="tool", tool_call_id=c.id, content=f"seen {c.id}") for c in calls),
            )
        }
    )
    model = MessagesModel("anthropic:claude-x", "claude-x", base_url=server.url, api_key="k")
    try:
        first, second = model.body(before), model.body(after)
    finally:
        await model.aclose()
    cache = PromptCache()
    cache.usage(first)
    whole = sum(
        cache.usage(dict(first))[key]
        for key in ("cache_read_input_tokens", "cache_creation_input_tokens")
    )
    assert PromptCache(set(cache.entries)).usage(second)["cache_read_input_tokens"] == whole
    # Without that mark only the base prompt would be read: 25 blocks were added.
    del second["messages"][0]["content"][-1]["cache_control"]
    assert PromptCache(set(cache.entries)).usage(second)["cache_read_input_tokens"] < whole
