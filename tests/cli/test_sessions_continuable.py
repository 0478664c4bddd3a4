"""``tether sessions send`` (the person who owns a root session continues its child) and
``tether sessions tree`` paging, on real SQLite stores."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from tether.agents import new_header
from tether.cli import cli
from tether.store import (
    AssistantMessage,
    InboxAccepted,
    SessionHeader,
    SQLiteStore,
    TurnEnded,
    UserMessage,
)

PROFILE = """\
[tether]
plugins = ["spawn", "subagent"]
store = "sqlite:.tether/sessions.db"

[plugin.subagent]
background = "continuable"

[agent.main]
model = "scripted:script.toml"
"""
# The root delegates and answers; `tether run` waits for the child to settle, and the root
# takes the settlement notice as a turn of its own.
SCRIPT = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[steps]]
expect = 'status="completed"'
text = "The subagent is done."

[[tasks.research.steps]]
text = "first findings"
"""
# What the child answers when the person continues it (--model scripted:more.toml).
MORE = """\
[[tasks.research.steps]]
expect = "dig deeper"
text = "deeper findings"
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text(SCRIPT)
    (tmp_path / "more.toml").write_text(MORE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)  # first-party plugins
    return tmp_path


def tether(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def store_of(project: Path) -> SQLiteStore:
    return SQLiteStore(project / ".tether" / "sessions.db")


def events(project: Path, session_id: str) -> list[Any]:
    async def read() -> list[Any]:
        store = store_of(project)
        try:
            return [stored.event for stored in await store.events(session_id)]
        finally:
            await store.aclose()

    return anyio.run(read)


def create(project: Path, headers: Sequence[SessionHeader]) -> None:
    async def write() -> None:
        store = store_of(project)
        try:
            for header in headers:
                await store.create(header)
        finally:
            await store.aclose()

    anyio.run(write)


def ids(lines: list[str]) -> list[str]:
    return [re.search(r"ses_\w+", line)[0] for line in lines]  # type: ignore[index]


@pytest.fixture
def root_and_child(project) -> tuple[str, str]:
    """``tether run`` left a root session and its settled continuable child."""
    result = tether("run", "go")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-2] == "The subagent is done."
    (child,) = re.findall(r"^<- subagent: Started task (ses_\w+)\.", result.stdout, re.M)
    return lines[-1].split()[1], child


def one_error_line(result: Result, code: str) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("ERROR: ")
    assert line.endswith(f"[{code}]")
    return line


# ---------------------------------------------------------------- tether sessions send


def test_send_continues_a_child_as_the_owner_of_its_root_session(project, root_and_child):
    root, child = root_and_child
    root_log, child_log = events(project, root), events(project, child)

    result = tether("sessions", "send", "--model", "scripted:more.toml", child, "dig deeper")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["> dig deeper", "deeper findings", f"session {child}"]
    log = events(project, child)
    assert log[: len(child_log)] == child_log
    added = log[len(child_log) :]
    assert [e.type for e in added] == [
        "inbox/accepted",
        "turn/start",
        "user/message",
        "assistant/message",
        "turn/end",
    ]
    accepted, claim = added[0], added[2]
    assert isinstance(accepted, InboxAccepted)
    assert isinstance(claim, UserMessage)
    assert claim.message_id == accepted.message_id
    assert claim.content == "dig deeper"
    assert claim.source.kind == "user"  # the person, not an agent
    assert isinstance(added[3], AssistantMessage)
    assert added[3].content == "deeper findings"
    assert isinstance(added[4], TurnEnded)
    assert added[4].stop_reason == "completed"
    # The root session hosted the child but was not told anything.
    assert events(project, root) == root_log


def test_send_reaches_a_grandchild_through_the_root_above_its_parent(project):
    # The child delegates in turn and takes its own child's notice as a turn.
    (project / "script.toml").write_text(
        SCRIPT.replace(
            '[[tasks.research.steps]]\ntext = "first findings"',
            """[[tasks.research.steps]]
tool_calls = [{ name = "subagent", arguments = { description = "deeper", prompt = "dig" } }]
[[tasks.research.steps]]
text = "research waits"
[[tasks.research.steps]]
expect = 'status="completed"'
text = "research is done"
[[tasks.deeper.steps]]
text = "deep findings"
""",
        )
    )
    (project / "more.toml").write_text('[[tasks.deeper.steps]]\ntext = "more deep findings"\n')
    run = tether("run", "go")
    assert run.exit_code == 0, run.output
    root = run.stdout.splitlines()[-1].split()[1]
    tree = tether("sessions", "tree", root).stdout.splitlines()
    assert tree[2].endswith("depth=2  deeper")
    grandchild = ids(tree)[2]
    middle_log = events(project, ids(tree)[1])

    result = tether("sessions", "send", "--model", "scripted:more.toml", grandchild, "again")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["> again", "more deep findings", f"session {grandchild}"]
    assert events(project, grandchild)[-2].content == "more deep findings"
    assert events(project, ids(tree)[1]) == middle_log  # its parent is not live: no notice


def test_send_exits_1_when_the_childs_turn_does_not_complete(project, root_and_child):
    _, child = root_and_child
    (project / "empty.toml").write_text("[tasks.research]\nsteps = []\n")

    result = tether("sessions", "send", "--model", "scripted:empty.toml", child, "more")

    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "> more"
    assert lines[1].startswith("[turn 2 stopped: error]")
    assert lines[-1] == f"session {child}"
    assert events(project, child)[-1].stop_reason == "error"


def test_send_to_an_unknown_session_is_one_error_line(project):
    line = one_error_line(tether("sessions", "send", "ses_nope", "more"), "SESSION_NOT_FOUND")
    assert 'no session "ses_nope"' in line


def test_send_to_a_root_session_says_to_continue_it_with_run(project, root_and_child):
    root, _ = root_and_child
    root_log = events(project, root)

    line = one_error_line(tether("sessions", "send", root, "more"), "NOT_RESUMABLE")

    assert f"tether run --session {root}" in line
    assert events(project, root) == root_log


def test_send_below_a_root_no_person_started_is_unauthorized(project):
    root = new_header(agent="main", origin="subagent")
    child = new_header(agent="main", parent_session=root.id, origin="subagent")
    create(project, [root, child])

    line = one_error_line(tether("sessions", "send", child.id, "more"), "UNAUTHORIZED")

    assert child.id in line
    assert events(project, child.id) == []


def test_send_to_a_child_whose_ancestor_is_gone_is_unauthorized(project):
    child = new_header(agent="main", parent_session="ses_gone", origin="subagent")
    create(project, [child])

    line = one_error_line(tether("sessions", "send", child.id, "more"), "UNAUTHORIZED")

    assert '"ses_gone" is not in the store' in line


def test_send_to_a_one_shot_child_is_not_resumable(project):
    root = new_header(agent="main")
    child = new_header(agent="main", parent_session=root.id, origin="subagent")
    create(project, [root, child])

    one_error_line(tether("sessions", "send", child.id, "more"), "NOT_RESUMABLE")

    assert events(project, child.id) == []


# ---------------------------------------------------------------- tether sessions tree paging


@pytest.fixture
def forest(project) -> tuple[str, list[str]]:
    """A root with 30 children, the first with a child of its own: 32 sessions in all, and
    their ids in pre-order."""
    root = new_header(agent="main", session_id="ses_root", label="root")
    root = root.model_copy(update={"created_at": 1000.0})
    headers = [root]
    order = [root.id]
    for n in range(30):
        child = new_header(
            agent="main", parent_session=root.id, origin="subagent", delegation_depth=1
        )
        child = child.model_copy(update={"created_at": 1001.0 + n, "label": f"task {n}"})
        headers.append(child)
        order.append(child.id)
        if n == 0:
            grandchild = new_header(
                agent="main", parent_session=child.id, origin="subagent", delegation_depth=2
            )
            grandchild = grandchild.model_copy(update={"created_at": 2000.0})
            headers.append(grandchild)
            order.append(grandchild.id)
    create(project, headers)
    return root.id, order


def test_tree_pages_through_a_large_forest_in_pre_order(project, forest):
    root, order = forest
    whole = tether("sessions", "tree", root)
    assert whole.exit_code == 0, whole.output
    assert ids(whole.stdout.splitlines()) == order  # all 32 fit in the default page

    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        result = tether("sessions", "tree", root, "--limit", "10", "--offset", str(offset))
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        more = re.fullmatch(r"\.\.\. (\d+) more; run again with --offset (\d+)", lines[-1])
        if more:
            assert int(more[1]) == len(order) - int(more[2])
            offset = int(more[2])
            lines = lines[:-1]
            assert len(lines) == 10
        else:
            offset = None
        pages.extend(lines)
    assert pages == whole.stdout.splitlines()
    assert len(pages) == 32


def test_tree_prints_200_lines_by_default_and_says_how_many_remain(project):
    root = new_header(agent="main")
    children = [
        new_header(agent="main", parent_session=root.id, origin="subagent").model_copy(
            update={"created_at": root.created_at + 1 + n}
        )
        for n in range(250)
    ]
    create(project, [root, *children])

    result = tether("sessions", "tree", root.id)

    lines = result.stdout.splitlines()
    assert len(lines) == 201
    assert lines[-1] == "... 51 more; run again with --offset 200"
    assert ids(lines[1:-1]) == [c.id for c in children[:199]]
    rest = tether("sessions", "tree", root.id, "--offset", "200").stdout.splitlines()
    assert ids(rest) == [c.id for c in children[199:]]


def test_tree_says_so_when_the_offset_is_past_the_end(project, forest):
    root, _ = forest
    result = tether("sessions", "tree", root, "--offset", "32")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no sessions from offset 32: the tree has 32\n"


def test_tree_json_is_the_whole_tree_with_its_total(project, forest):
    root, order = forest
    document = json.loads(tether("sessions", "tree", root, "--json").stdout)
    assert document["id"] == root
    assert document["total"] == 32
    assert len(document["children"]) == 30
    assert [c["id"] for c in document["children"][0]["children"]] == [order[2]]


def test_tree_json_with_paging_options_is_the_page(project, forest):
    root, order = forest
    result = tether("sessions", "tree", root, "--json", "--limit", "5", "--offset", "1")
    page = json.loads(result.stdout)
    assert page["total"] == 32
    assert (page["offset"], page["limit"], page["next_offset"]) == (1, 5, 6)
    assert [s["id"] for s in page["sessions"]] == order[1:6]
    assert [s["level"] for s in page["sessions"]] == [1, 2, 1, 1, 1]
    last = json.loads(tether("sessions", "tree", root, "--json", "--offset", "30").stdout)
    assert [s["id"] for s in last["sessions"]] == order[30:]
    assert last["next_offset"] is None
