"""``tether sessions branch|rewind`` on a real SQLite store, with a session of real turns."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

from tether.cli import cli
from tether.models import FunctionModel
from tether.runtime import Runtime
from tether.store import RewindEvent, SQLiteStore
from tether.store.replay import fold
from tether.testing import make_kernel, tree_problems

PROFILE = """\
[tether]
store = "sqlite:.tether/sessions.db"

[agent.main]
model = "scripted:none.toml"
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    (tmp_path / "tether.toml").write_text(PROFILE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def tether(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


async def session(project: Path, prompts: list[str]) -> str:
    store = SQLiteStore(project / ".tether" / "sessions.db")
    try:
        runtime = Runtime(make_kernel(project / "tether.toml"), store)
        model = FunctionModel(lambda request: f"answer to {request.messages[-1].content}")
        agent = await runtime.compose(model=model)
        await runtime.run_session(agent, prompts)
        return agent.session_id
    finally:
        await store.aclose()


async def log(project: Path, session_id: str):
    store = SQLiteStore(project / ".tether" / "sessions.db")
    try:
        return [s.event for s in await store.events(session_id)], await tree_problems(
            store, session_id
        )
    finally:
        await store.aclose()


def test_branch_and_rewind_from_the_command_line(project):
    original = anyio.run(session, project, ["one", "two", "three"])

    made = tether("sessions", "branch", original, "--at", "1")
    assert made.exit_code == 0, made.output
    branch, rest = made.output.split(maxsplit=1)
    assert rest.strip() == f"(branch of {original} at turn 1)"
    events, problems = anyio.run(log, project, branch)
    assert problems == {}
    assert [m.content for m in fold(events).history] == ["one", "answer to one"]
    shown = tether("sessions", "show", branch)
    assert f'"from": "{original}"' in shown.output

    lineage = f"branch-of={original}@turn-1"
    listed = [line for line in tether("sessions", "list").output.splitlines() if lineage in line]
    assert [line.split()[0] for line in listed] == [branch]
    assert lineage in tether("sessions", "tree", branch).output.splitlines()[0]
    assert lineage not in tether("sessions", "tree", original).output
    as_json = json.loads(tether("sessions", "list", "--json").output)
    assert [s.get("branch") for s in as_json if s["id"] == branch] == [
        {"from": original, "at_turn": 1}
    ]
    assert json.loads(tether("sessions", "tree", branch, "--json").output)["branch"] == {
        "from": original,
        "at_turn": 1,
    }

    whole = tether("sessions", "branch", original)
    assert "at turn 3)" in whole.output

    rewound = tether("sessions", "rewind", original, "--to", "1")
    assert rewound.exit_code == 0, rewound.output
    assert rewound.output.strip() == f"session {original}: rewound to turn 1"
    events, problems = anyio.run(log, project, original)
    assert problems == {}
    assert isinstance(events[-1], RewindEvent)
    assert [m.content for m in fold(events).history] == ["one", "answer to one"]
    shown = tether("sessions", "show", original)
    assert 'rewind             {"to_turn": 1, "keep": ' in shown.output

    again = tether("sessions", "rewind", original, "--to", "1")
    assert again.output.strip() == (
        f"session {original}: no turn follows turn 1; nothing to rewind"
    )


def test_a_turn_the_session_does_not_have_is_an_error_line(project):
    original = anyio.run(session, project, ["one"])
    for args in (("branch", original, "--at", "4"), ("rewind", original, "--to", "4")):
        result = tether("sessions", *args)
        assert result.exit_code == 2
        assert "[TURN_NOT_FOUND]" in result.output
        assert f'session "{original}" has no ended turn 4 in its history (its turns: 0-1)' in (
            result.output
        )
    missing = tether("sessions", "rewind", "ses_nope", "--to", "0")
    assert missing.exit_code == 2
    assert "[SESSION_NOT_FOUND]" in missing.output
