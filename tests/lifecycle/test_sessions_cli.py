"""``tether sessions close|delete|prune|list`` on real SQLite stores, with sessions made by
real ``tether run``s (a root and the continuable child it delegated to)."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from tether.cli import cli
from tether.errors import ErrorCode
from tether.store import SessionHeader, SQLiteStore, TurnStarted

PROFILE = """\
[tether]
plugins = ["spawn", "subagent"]
store = "sqlite:.tether/sessions.db"

[plugin.subagent]
background = "continuable"

[agent.main]
model = "scripted:script.toml"
"""
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
DAY = 86400.0


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "tether.toml").write_text(PROFILE)
    (tmp_path / "script.toml").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TETHER_DISABLE_PLUGIN_AUTOLOAD", raising=False)  # first-party plugins
    return tmp_path


def tether(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def db(project: Path) -> Path:
    return project / ".tether" / "sessions.db"


def read(project: Path, call: Any) -> Any:
    async def go() -> Any:
        store = SQLiteStore(db(project))
        try:
            return await call(store)
        finally:
            await store.aclose()

    return anyio.run(go)


def header(project: Path, session_id: str) -> SessionHeader:
    return read(project, lambda store: store.header(session_id))


def log(project: Path, session_id: str) -> list[Any]:
    async def events(store: SQLiteStore) -> list[Any]:
        return [s.event for s in await store.events(session_id)]

    return read(project, events)


def ids(project: Path) -> set[str]:
    async def listed(store: SQLiteStore) -> set[str]:
        return {h.id for h in await store.sessions()}

    return read(project, listed)


def create(project: Path, headers: Sequence[SessionHeader]) -> None:
    async def write(store: SQLiteStore) -> None:
        for one in headers:
            await store.create(one, [TurnStarted(turn=1)])
            await store.release(one.id)

    read(project, write)


def one_error_line(result: Result, code: ErrorCode) -> str:
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("ERROR: ")
    assert line.endswith(f"[{code}]")
    return line


def root_and_child() -> tuple[str, str]:
    """``tether run`` leaves a root session and its settled continuable child."""
    result = tether("run", "go")
    assert result.exit_code == 0, result.output
    (child,) = re.findall(r"^<- subagent: Started task (ses_\w+)\.", result.stdout, re.M)
    return result.stdout.splitlines()[-1].split()[1], child


# ---------------------------------------------------------------- close


def test_closing_a_root_closes_its_child_and_neither_takes_a_message(project):
    root, child = root_and_child()
    logs = {sid: log(project, sid) for sid in (root, child)}

    result = tether("sessions", "close", root)

    assert result.exit_code == 0, result.output
    assert result.stdout == f"closed {root} and 1 session below it: {child}\n"
    assert header(project, root).closed_at is not None
    assert header(project, child).closed_at == header(project, root).closed_at
    send = tether("sessions", "send", "--model", "scripted:script.toml", child, "more")
    line = one_error_line(send, ErrorCode.SESSION_CLOSED)
    assert f"session {child} was closed at " in line
    followup = tether("run", "--session", root, "and again")
    one_error_line(followup, ErrorCode.SESSION_CLOSED)
    # A closed root says so too, not that nobody drives it.
    to_root = tether("sessions", "send", root, "more")
    assert f"session {root} was closed at " in one_error_line(to_root, ErrorCode.SESSION_CLOSED)
    assert {sid: log(project, sid) for sid in (root, child)} == logs  # nothing was written
    tree = tether("sessions", "tree", root).stdout.splitlines()
    assert "depth=0  closed" in tree[0]
    assert "depth=1  closed  research" in tree[1]
    shown = tether("sessions", "show", child)  # still readable
    assert shown.exit_code == 0, shown.output
    assert "closed_at: " in shown.stdout
    again = tether("sessions", "close", root)
    assert again.stdout == f"session {root} was closed already\n"


def test_list_says_which_sessions_are_closed_and_filters_them(project):
    now = time.time()
    create(
        project,
        [
            SessionHeader(id="ses_open", created_at=now - 10),
            SessionHeader(id="ses_shut", created_at=now - 5, closed_at=now - 1),
            SessionHeader(id="ses_free", created_at=now, detached=True, parent_session="ses_open"),
        ],
    )
    listed = tether("sessions", "list").stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["ses_free", "ses_shut", "ses_open"]
    assert "  closed=" in listed[1]
    assert "closed=" not in listed[0] + listed[2]
    assert listed[0].endswith("  detached")
    closed = tether("sessions", "list", "--closed").stdout.splitlines()
    assert [line.split()[0] for line in closed] == ["ses_shut"]
    opened = tether("sessions", "list", "--open", "--limit", "1").stdout.splitlines()
    assert [line.split()[0] for line in opened] == ["ses_free"]


# ---------------------------------------------------------------- delete


def test_deleting_a_parent_closes_its_child_which_stays_readable(project):
    root, child = root_and_child()
    child_log = log(project, child)

    result = tether("sessions", "delete", root)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"deleted {root}",
        f"closed 1 session below it (kept, readable): {child}",
    ]
    assert ids(project) == {child}
    assert header(project, child).closed_at is not None
    assert log(project, child) == child_log
    assert tether("sessions", "show", child).exit_code == 0
    gone = tether("sessions", "show", root)
    one_error_line(gone, ErrorCode.SESSION_NOT_FOUND)


def test_a_detached_child_survives_its_parents_deletion(project):
    (project / "tether.toml").write_text(
        PROFILE.replace('background = "continuable"', 'background = "continuable"\ndetached = true')
    )
    root, child = root_and_child()
    assert header(project, child).detached is True
    assert header(project, root).detached is False

    result = tether("sessions", "delete", root)

    assert result.stdout == f"deleted {root}\n"
    assert header(project, child).closed_at is None  # it outlives its parent
    assert tether("sessions", "close", root).exit_code == 2  # gone: SESSION_NOT_FOUND


def test_deleting_a_tree_removes_every_session_below_and_their_workspaces(project):
    root, child = root_and_child()
    create(project, [SessionHeader(id="ses_other", created_at=time.time())])
    workspaces = project / ".tether" / "workspaces"
    for sid in (root, child, "ses_other"):
        (workspaces / sid / "notes").mkdir(parents=True)
        (workspaces / sid / "notes" / "a.txt").write_text("kept while the session is")

    result = tether("sessions", "delete", "--tree", root)

    assert result.exit_code == 0, result.output
    assert result.stdout == f"deleted {root} and 1 session below it: {child}\n"
    assert ids(project) == {"ses_other"}
    assert sorted(p.name for p in workspaces.iterdir()) == ["ses_other"]


def test_an_open_session_a_live_process_drives_is_deleted_only_once_closed(project, spawn):
    tether("sessions", "list")  # makes the store's file
    holder = spawn("hold", db(project), "ses_held")
    assert holder.line() == "READY"

    busy = tether("sessions", "delete", "ses_held")

    line = one_error_line(busy, ErrorCode.SESSION_BUSY)
    assert "close it first (tether sessions close ses_held)" in line
    assert ids(project) == {"ses_held"}  # nothing was deleted
    assert tether("sessions", "close", "ses_held").exit_code == 0
    deleted = tether("sessions", "delete", "ses_held")
    assert deleted.exit_code == 0, deleted.output
    assert ids(project) == set()


# ---------------------------------------------------------------- prune


def aged(project: Path) -> None:
    """Sessions of every age: old and closed, old and open, recent and closed, recent."""
    now = time.time()
    create(
        project,
        [
            SessionHeader(id="ses_old_closed", created_at=now - 60 * DAY, closed_at=now - 40 * DAY),
            SessionHeader(id="ses_old_open", created_at=now - 45 * DAY),
            SessionHeader(id="ses_new_closed", created_at=now - 60 * DAY, closed_at=now - DAY),
            SessionHeader(id="ses_new", created_at=now - DAY),
            SessionHeader(
                id="ses_kid",
                created_at=now - DAY,
                parent_session="ses_old_open",
                origin="subagent",
            ),
        ],
    )


def test_prune_prints_what_it_would_remove_and_changes_nothing(project):
    aged(project)
    before = ids(project)

    result = tether("sessions", "prune")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "would delete 2 sessions older than 30d:"
    # Oldest first: closed 40 days ago, or, open, created 45 days ago.
    assert [line.split()[0] for line in lines[1:3]] == ["ses_old_open", "ses_old_closed"]
    assert lines[3] == "would close 1 session below them: ses_kid"
    assert lines[4] == "nothing was changed; run again with --yes to delete them"
    assert ids(project) == before
    assert header(project, "ses_kid").closed_at is None


def test_prune_with_yes_removes_them_and_closes_their_children(project):
    aged(project)

    result = tether("sessions", "prune", "--yes")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "deleted 2 sessions older than 30d",
        "closed 1 session below them: ses_kid",
    ]
    assert ids(project) == {"ses_new_closed", "ses_new", "ses_kid"}
    assert header(project, "ses_kid").closed_at is not None


def test_prune_closed_only_and_older_than(project):
    aged(project)

    result = tether("sessions", "prune", "--closed", "--older-than", "12h", "--yes")

    assert result.stdout.splitlines() == ["deleted 2 sessions older than 12h"]
    assert ids(project) == {"ses_old_open", "ses_new", "ses_kid"}


def test_prune_takes_its_default_age_from_the_profiles_retention(project):
    (project / "tether.toml").write_text(PROFILE + '\n[tether.sessions]\nretention = "2w"\n')
    now = time.time()
    create(project, [SessionHeader(id="ses_3w", created_at=now - 21 * DAY)])

    result = tether("sessions", "prune")

    assert result.stdout.splitlines()[0] == "would delete 1 session older than 2w:"


def test_prune_leaves_an_open_session_a_live_process_drives(project, spawn):
    tether("sessions", "list")
    holder = spawn("hold", db(project), "ses_held")
    assert holder.line() == "READY"

    result = tether("sessions", "prune", "--older-than", "1s", "--yes")
    if "no sessions" in result.stdout:  # created less than a second ago: wait for its age
        time.sleep(1.1)
        result = tether("sessions", "prune", "--older-than", "1s", "--yes")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "left 1 session a live process runs: ses_held (close them first)"
    )
    assert ids(project) == {"ses_held"}


def test_a_bad_retention_is_profile_invalid_and_says_how_to_write_one(project):
    (project / "tether.toml").write_text(PROFILE + '\n[tether.sessions]\nretention = "30 days"\n')

    line = one_error_line(tether("sessions", "prune"), ErrorCode.PROFILE_INVALID)

    assert "[tether.sessions] retention" in line
    assert '("30d", "12h")' in line


def test_a_bad_older_than_is_a_usage_error(project):
    result = tether("sessions", "prune", "--older-than", "soon")

    assert result.exit_code == 2
    assert "--older-than = 'soon' is not an age" in result.output
