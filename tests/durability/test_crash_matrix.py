"""SIGKILL ``tether run`` at each point of a turn, resume, and check every log of the tree.

Each test starts ``tether run`` in a real process on a real store (a SQLite file; a PostgreSQL
schema too for the tests marked ``@on_both_stores``), waits for the moment (a marker file a tool
touched, an event in the log), kills it with SIGKILL, runs ``tether run --session ROOT`` again,
and then checks with :func:`tether.testing.tree_problems` that every accepted message ran exactly
once, every tool call has exactly one result, every turn is closed once, and no child was left
open.
"""

from __future__ import annotations

import signal
import sys

import anyio
import pytest

from tether.store import AssistantMessage, InboxAccepted, ToolResult, TurnEnded, UserMessage
from tether.store._sqlite_schema import MIGRATIONS

from .conftest import TIMEOUT, kill, on_both_stores, printed, wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


#: A step that stands for an answer the session already holds.
FILLER = '[[steps]]\ntext = "unused"\n\n'


def claims(events) -> list[str]:
    return [e.content for e in events if isinstance(e, UserMessage)]


def ends(events) -> list[str]:
    return [e.stop_reason for e in events if isinstance(e, TurnEnded)]


def results(events) -> list[tuple[str, str]]:
    return [(e.name, e.content) for e in events if isinstance(e, ToolResult)]


def notices(events, sender: str) -> list[UserMessage]:
    return [
        e
        for e in events
        if isinstance(e, UserMessage) and e.source.kind == "notice" and e.source.sender == sender
    ]


def test_killed_in_a_turns_first_model_step_its_message_runs_again_once(make_project):
    # The claim is stored with the first step's answer: killed before it, the message was never
    # taken, so recovery runs it (the unanswered request changed nothing).
    project = make_project()
    project.script('[[steps]]\ndelay = 60\ntext = "never"\n')
    process = project.start("run", "first", "second")
    wait_for(lambda: printed(process, "> first"), "the first turn to start its request")
    (root,) = project.roots()
    kill(process)

    project.script('[[steps]]\ntext = "one"\n\n[[steps]]\ntext = "two"\n\n' * 2, "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "third")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert claims(events) == ["first", "second", "third"]
    assert ends(events) == ["completed", "completed", "completed"]
    assert project.problems(root) == {}


@on_both_stores
def test_killed_in_a_later_model_step_the_turn_is_closed_and_the_queued_prompt_runs_once(
    make_project,
):
    project = make_project()
    project.script(
        '[[steps]]\ntool_calls = [{ name = "quick", arguments = { text = "a" } }]\n\n'
        '[[steps]]\ndelay = 60\ntext = "never"\n'
    )
    process = project.start("run", "first", "second")
    root = wait_for(lambda: project.roots(), "the root session")[0]
    wait_for(lambda: results(project.events(root)), "the first step's tool result")
    kill(process)

    project.script(FILLER + '[[steps]]\ntext = "two"\n\n[[steps]]\ntext = "three"\n', "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "third")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert claims(events) == ["first", "second", "third"]
    assert ends(events) == ["aborted", "completed", "completed"]
    assert project.problems(root) == {}


@on_both_stores
def test_killed_in_a_tool_call_the_call_gets_one_interrupted_result(make_project):
    project = make_project()
    project.script(
        '[[steps]]\ntool_calls = [{ name = "slow", arguments = { text = "a" } }]\n\n'
        '[[steps]]\ntext = "never"\n'
    )
    process = project.start("run", "go")
    wait_for(lambda: (project.markers / "a.started").exists(), "the tool to start")
    kill(process)
    (root,) = project.roots()

    project.script('[[steps]]\ntext = "x"\n\n[[steps]]\ntext = "again"\n', "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "again")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    ((name, content),) = results(events)
    assert name == "slow"
    assert content.startswith("error: interrupted: the process stopped")
    assert ends(events) == ["aborted", "completed"]
    assert project.problems(root) == {}


@on_both_stores
def test_killed_in_an_idempotent_tool_call_the_call_runs_again_and_the_turn_goes_on(
    make_project,
):
    project = make_project()
    project.script(
        '[[steps]]\ntool_calls = [{ name = "lookup", arguments = { text = "a" } }]\n\n'
        '[[steps]]\ntext = "never"\n'
    )
    process = project.start("run", "go")
    wait_for(lambda: (project.markers / "a.lookup").exists(), "the tool to start")
    kill(process)
    (root,) = project.roots()

    # The next driver runs the cut call again, then the turn's next step, then the new prompt
    # (a script's steps are counted from the session's first answer).
    project.script(
        '[[steps]]\ntext = "x"\n\n[[steps]]\ntext = "found it"\n\n[[steps]]\ntext = "again"\n',
        "resume.toml",
    )
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "again")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert results(events) == [("lookup", "looked up a")]
    assert len((project.markers / "a.lookup").read_text().split()) == 2  # it ran again
    assert ends(events) == ["completed", "completed"]
    answers = [e.content for e in events if isinstance(e, AssistantMessage) and e.content]
    assert answers == ["found it", "again"]
    assert project.problems(root) == {}


def test_killed_while_two_safe_tools_run_the_finished_result_is_kept(make_project):
    project = make_project()
    project.script(
        "[[steps]]\ntool_calls = [\n"
        '  { name = "quick", arguments = { text = "done" } },\n'
        '  { name = "slow", arguments = { text = "b" } },\n]\n\n'
        '[[steps]]\ntext = "never"\n'
    )
    process = project.start("run", "go")
    wait_for(lambda: (project.markers / "b.started").exists(), "the slow tool to start")
    root = project.roots()[0]
    wait_for(lambda: results(project.events(root)), "the quick result to be stored")
    kill(process)

    project.script('[[steps]]\ntext = "x"\n\n[[steps]]\ntext = "again"\n', "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "again")
    assert done.returncode == 0, done.stdout + done.stderr
    found = dict(results(project.events(root)))
    assert found["quick"] == "quick:done"  # finished before the kill: kept, not "interrupted"
    assert found["slow"].startswith("error: interrupted")
    assert project.problems(root) == {}


CHILD_IN_A_TOOL = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[tasks.research.steps]]
tool_calls = [{ name = "slow", arguments = { text = "child" } }]

[[tasks.research.steps]]
text = "never"
"""


def test_a_continuable_child_killed_mid_tool_is_repaired_and_its_parent_told_once(make_project):
    project = make_project()
    project.script(CHILD_IN_A_TOOL)
    process = project.start("run", "go")
    wait_for(lambda: (project.markers / "child.started").exists(), "the child's tool to start")
    kill(process)
    (root,) = project.roots()
    (child,) = project.children(root)

    # Step i answers a request holding i assistant messages: the root has two already.
    project.script(
        FILLER * 2 + '[[steps]]\ntext = "noted"\n\n[[steps]]\ntext = "ok"\n', "resume.toml"
    )
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "status?")
    assert done.returncode == 0, done.stdout + done.stderr
    child_events = project.events(child)
    assert ends(child_events) == ["aborted"]
    ((name, content),) = results(child_events)
    assert (name, content.startswith("error: interrupted")) == ("slow", True)
    (notice,) = notices(project.events(root), child)
    assert notice.content == (
        f'<task_result id="{child}" tool="subagent" status="failed">The task was stopped before '
        "it finished.</task_result>"
    )
    assert project.problems(root) == {}

    # Recovering again repairs nothing and tells nobody twice.
    project.script(FILLER * 6, "again.toml")
    done = project.run("run", "--session", root, "--model", "scripted:again.toml", "and now?")
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(notices(project.events(root), child)) == 1
    assert ends(project.events(child)) == ["aborted"]
    assert project.problems(root) == {}


BACKGROUND_CHILD = """\
[[steps]]
[[steps.tool_calls]]
name = "subagent"
arguments = { description = "research", prompt = "look", run_in_background = true }

[[steps]]
delay = 60
text = "never"

[[tasks.research.steps]]
tool_calls = [{ name = "slow", arguments = { text = "child" } }]

[[tasks.research.steps]]
text = "never"
"""


def test_a_one_shot_background_child_killed_mid_tool_is_repaired_and_its_parent_told(
    make_project,
):
    project = make_project("one-shot")
    project.script(BACKGROUND_CHILD)
    process = project.start("run", "go")
    wait_for(lambda: (project.markers / "child.started").exists(), "the child's tool to start")
    kill(process)
    (root,) = project.roots()
    (child,) = project.children(root)

    project.script(FILLER + '[[steps]]\ntext = "noted"\n\n[[steps]]\ntext = "ok"\n', "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "status?")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ends(project.events(child)) == ["aborted"]
    (notice,) = notices(project.events(root), child)
    assert "was stopped before it finished" in notice.content
    assert project.problems(root) == {}


SEND_TARGET = """\
[[steps]]
tool_calls = [{ name = "subagent", arguments = { description = "research", prompt = "look" } }]

[[steps]]
text = "I started a subagent."

[[tasks.research.steps]]
tool_calls = [{ name = "slow", arguments = { text = "child" } }]

[[tasks.research.steps]]
text = "never"
"""


@on_both_stores
def test_a_message_sent_to_a_hosted_child_survives_its_host_being_killed(make_project):
    project = make_project()
    project.script(SEND_TARGET)
    process = project.start("run", "go")
    wait_for(lambda: (project.markers / "child.started").exists(), "the child's tool to start")
    (root,) = project.roots()
    (child,) = project.children(root)
    sent = project.run("sessions", "send", child, "one more thing")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "accepted" in sent.stdout
    # Accepted means in the child's log (its host took it from the mailbox).
    accepted = [e for e in project.events(child) if isinstance(e, InboxAccepted)]
    assert [e.content for e in accepted][-1] == "one more thing"
    kill(process)

    resume = (
        FILLER * 2
        + '[[steps]]\ntext = "ok"\n\n[[steps]]\ntext = "noted"\n\n'
        + '[[tasks.research.steps]]\nexpect = "one more thing"\ntext = "more findings"\n'
    )
    project.script(resume, "resume.toml")
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "status?")
    assert done.returncode == 0, done.stdout + done.stderr
    child_events = project.events(child)
    assert claims(child_events) == ["look", "one more thing"]
    assert ends(child_events) == ["aborted", "completed"]
    # One notice: the child settled after its follow-up (no separate orphan notice).
    (notice,) = notices(project.events(root), child)
    assert notice.content.endswith('status="completed">more findings</task_result>')
    assert project.problems(root) == {}


@on_both_stores
def test_a_message_posted_to_a_driver_killed_before_taking_it_runs_once_when_resumed(
    make_project,
):
    # The driver is stopped (SIGSTOP) so the message stays in the mailbox, untaken, until the
    # driver is killed: `tether sessions send` then says it runs when the session is continued,
    # and continuing it runs the message exactly once, in the order it was accepted.
    project = make_project()
    project.script('[[steps]]\ntext = "one"\n')
    first = project.run("run", "hello")
    assert first.returncode == 0, first.stdout + first.stderr
    (root,) = project.roots()
    project.script(FILLER + '[[steps]]\ndelay = 60\ntext = "never"\n', "slow.toml")
    owner = project.start("run", "--session", root, "--model", "scripted:slow.toml", "busy")
    wait_for(lambda: printed(owner, "> busy"), "the owner's turn to start")
    owner.send_signal(signal.SIGSTOP)
    sender = project.start("sessions", "send", root, "from outside")
    wait_for(lambda: project.mailbox(root) == ["from outside"], "the message to be posted")
    kill(owner)
    assert sender.wait(timeout=TIMEOUT) == 0, sender.output.read_text()
    assert "the process that drove it stopped first" in sender.output.read_text()

    project.script(
        FILLER
        + '[[steps]]\nexpect = "busy"\ntext = "two"\n\n'
        + '[[steps]]\nexpect = "from outside"\ntext = "three"\n\n'
        + '[[steps]]\nexpect = "last"\ntext = "four"\n',
        "resume.toml",
    )
    done = project.run("run", "--session", root, "--model", "scripted:resume.toml", "last")
    assert done.returncode == 0, done.stdout + done.stderr
    events = project.events(root)
    assert claims(events) == ["hello", "busy", "from outside", "last"]
    accepted = [e.content for e in events if isinstance(e, InboxAccepted)]
    assert accepted.count("from outside") == 1
    assert ends(events) == ["completed"] * 4
    assert project.mailbox(root) == []
    assert project.problems(root) == {}


MIGRATING = """
import sqlite3, sys, time
from tether.store._sqlite_schema import MIGRATIONS
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")  # what a migration step does first
for statement in MIGRATIONS[1].split(";"):
    if statement.strip():
        db.execute(statement)
db.execute("PRAGMA user_version = 2")
print("MIGRATING", flush=True)
time.sleep(60)
"""


def test_killed_during_a_migration_the_file_keeps_its_version_and_migrates_next_time(tmp_path):
    import sqlite3
    import subprocess

    from tether.store import SCHEMA_VERSION, SQLiteStore

    db = tmp_path / "s.db"
    old = sqlite3.connect(db)
    old.executescript(MIGRATION_1_FILE)
    old.close()
    process = subprocess.Popen(
        [sys.executable, "-c", MIGRATING, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "MIGRATING"  # mid-transaction now
        kill(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
    check = sqlite3.connect(db)
    assert check.execute("PRAGMA user_version").fetchone() == (1,)
    check.close()

    async def reopen() -> list[object]:
        store = SQLiteStore(db)
        try:
            await store.acquire("ses_old")
            return [stored.event.type for stored in await store.events("ses_old")]
        finally:
            await store.aclose()

    assert anyio.run(reopen) == ["user/message"]
    check = sqlite3.connect(db)
    assert check.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    check.close()


#: A schema-1 file (tether before leases and the mailbox) with one session and one event.
MIGRATION_1_FILE = (
    MIGRATIONS[0]
    + """;
INSERT INTO sessions VALUES ('ses_old', 0, NULL, 'main', NULL, 'user', 0, 0);
INSERT INTO events VALUES ('ses_old', 1, 'user/message',
    '{"type": "user/message", "message_id": "m1", "content": "hi"}');
PRAGMA user_version = 1;
"""
)
