"""A session records the model it runs: ``tether run --session`` uses it, ``--model`` replaces
it (logged in the session), and a session from before models keeps the profile's model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tether.store import DescriptorEvent, SessionHeader, SQLiteStore
from tether.testing import scaled, write_profile

TETHER = str(Path(sys.executable).parent / "tether")
#: Generous: the suite runs on a busy 2-core machine.
TIMEOUT = scaled(60)

MODELS = """\
def profile(request):
    return "from the profile model"


def other(request):
    return "from the other model"


def third(request):
    return "from the third model"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS, encoding="utf-8")
    write_profile(
        tmp_path,
        '[tether]\nstore = "sqlite:sessions.db"\n[agent.main]\nmodel = "function:models:profile"\n',
    )
    return tmp_path


def tether(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [TETHER, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={k: v for k, v in os.environ.items() if k != "TETHER_DEBUG"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def session_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout.splitlines()[-1].removeprefix("session ")


def stored(project: Path, session: str) -> tuple[SessionHeader, list[DescriptorEvent]]:
    async def read() -> tuple[SessionHeader, list[DescriptorEvent]]:
        store = SQLiteStore(project / "sessions.db")
        try:
            header = await store.header(session)
            changes = [
                s.event
                for s in await store.events(session)
                if isinstance(s.event, DescriptorEvent) and s.event.kind == "model"
            ]
            return header, changes
        finally:
            await store.aclose()

    return anyio.run(read)


def test_a_new_session_records_the_model_it_was_started_with(project):
    session = session_of(tether(project, "run", "--model", "function:models:other", "hi"))
    header, changes = stored(project, session)
    assert header.model == "function:models:other"
    assert changes == []  # a starting model is no change
    again = tether(project, "run", "--session", session, "more")
    assert "from the other model" in again.stdout
    assert "from the profile model" not in again.stdout
    listed = tether(project, "sessions", "list").stdout
    assert f"{session}  " in listed
    assert "  agent=main  model=function:models:other" in listed


def test_a_session_started_on_the_profile_model_records_it(project):
    session = session_of(tether(project, "run", "hi"))
    assert stored(project, session)[0].model == "function:models:profile"


def test_model_overrides_the_recorded_one_is_logged_and_then_kept(project):
    session = session_of(tether(project, "run", "--model", "function:models:other", "hi"))
    switched = tether(project, "run", "--session", session, "--model", "function:models:third", "x")
    assert "from the third model" in switched.stdout
    header, changes = stored(project, session)
    assert header.model == "function:models:third"
    assert [c.data for c in changes] == [
        {"old": "function:models:other", "new": "function:models:third"}
    ]
    kept = tether(project, "run", "--session", session, "y")
    assert "from the third model" in kept.stdout
    # Naming the recorded model again changes nothing and logs nothing.
    tether(project, "run", "--session", session, "--model", "function:models:third", "z")
    assert len(stored(project, session)[1]) == 1


def test_a_session_from_before_models_uses_the_profile_model_until_one_is_given(project):
    async def legacy() -> None:
        store = SQLiteStore(project / "sessions.db")
        try:
            await store.create(SessionHeader(id="ses_legacy", created_at=1.0, agent="main"))
        finally:
            await store.aclose()

    anyio.run(legacy)
    first = tether(project, "run", "--session", "ses_legacy", "hi")
    assert "from the profile model" in first.stdout
    header, changes = stored(project, "ses_legacy")
    assert (header.model, changes) == (None, [])  # still following the profile
    tether(project, "run", "--session", "ses_legacy", "--model", "function:models:other", "x")
    header, changes = stored(project, "ses_legacy")
    assert header.model == "function:models:other"
    assert [c.data for c in changes] == [{"old": None, "new": "function:models:other"}]


def test_context_names_the_sessions_recorded_model(project):
    session = session_of(tether(project, "run", "--model", "function:models:other", "hi"))
    shown = tether(project, "context", "--session", session)
    assert shown.stdout.splitlines()[0] == "agent main  model function:models:other"


def test_a_recorded_model_that_cannot_be_used_says_how_to_continue(project):
    session = session_of(tether(project, "run", "--model", "function:models:other", "hi"))
    (project / "models.py").write_text("def profile(request):\n    return 'p'\n")
    result = subprocess.run(
        [TETHER, "run", "--session", session, "more"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f'ERROR: session "{session}" runs model "function:models:other", ')
    assert "pass --model SPEC to continue the session on another model" in line
    assert line.endswith("[MODEL_SPEC_UNKNOWN]")
    moved = tether(project, "run", "--session", session, "--model", "function:models:profile", "x")
    assert "> x" in moved.stdout
