"""Who ``tether run`` and ``tether sessions send`` send as: the OS user, ``--caller`` (with
``--caller-name``, ``--claim``), or ``TETHER_CALLER`` (``TETHER_CALLER_NAME``,
``TETHER_CALLER_CLAIMS``); what cannot be read is ``CALLER_INVALID`` (docs/callers.md)."""

from __future__ import annotations

import getpass
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tether.cli import cli
from tether.contracts import Caller
from tether.testing import scaled, write_profile

ROOT = Path(__file__).parents[2]

PROFILE = """
[tether]
store = "sqlite:sessions.db"

[agent.main]
model = "function:tests.callers.brains:main"
{gate}
"""


def _profile(tmp_path: Path, gate: str = "") -> Path:
    return write_profile(tmp_path, PROFILE.format(gate=gate))


def _initiators(tmp_path: Path) -> list[Caller | None]:
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        rows = db.execute("SELECT caller FROM sessions").fetchall()
    return [None if text is None else Caller.model_validate_json(text) for (text,) in rows]


def _run(profile: Path, *args: str, env: dict[str, str] | None = None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_CALLER")}
    environ.update(env or {})
    return CliRunner().invoke(cli, ["run", "--profile", str(profile), *args], env=environ)


def test_tether_run_sends_as_the_os_user_in_a_real_process(tmp_path):
    profile = _profile(tmp_path)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_CALLER")}
    done = subprocess.run(
        [sys.executable, "-m", "tether", "run", "--profile", str(profile), "hello"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environ,
        timeout=scaled(60),
    )
    assert done.returncode == 0, done.stderr
    assert _initiators(tmp_path) == [Caller(id=f"os:{getpass.getuser()}", via="cli")]


def test_caller_options_name_the_caller_and_its_claims(tmp_path):
    profile = _profile(tmp_path)
    options = ["--caller", "team:billing", "--caller-name", "Billing team"]
    claims = ["--claim", "team=billing", "--claim", "seats=5", "--claim", "admin=true"]
    done = _run(profile, *options, *claims, "hello")
    assert done.exit_code == 0, done.output
    assert _initiators(tmp_path) == [
        Caller(
            id="team:billing",
            name="Billing team",
            via="cli",
            claims={"team": "billing", "seats": 5, "admin": True},
        )
    ]


def test_the_environment_names_the_caller_when_no_option_does(tmp_path):
    profile = _profile(tmp_path)
    env = {
        "TETHER_CALLER": "a2a:nightly-job",
        "TETHER_CALLER_NAME": "Nightly job",
        "TETHER_CALLER_CLAIMS": '{"plan": "enterprise"}',
    }
    done = _run(profile, "hello", env=env)
    assert done.exit_code == 0, done.output
    expected = Caller(
        id="a2a:nightly-job", name="Nightly job", via="env", claims={"plan": "enterprise"}
    )
    assert _initiators(tmp_path) == [expected]
    # An option wins over the environment.
    done = _run(profile, "--caller", "os:root", "again", env=env)
    assert done.exit_code == 0, done.output
    assert Caller(id="os:root", via="cli") in _initiators(tmp_path)


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (
            ["--caller", "billing team"],
            {},
            'ERROR: the caller "billing team" is not a caller id (--caller); a caller id is 1 '
            "to 200 printable characters without spaces, such as os:alice or team:billing "
            "[CALLER_INVALID]",
        ),
        (
            ["--claim", "team"],
            {},
            "ERROR: the claim 'team' is not KEY=VALUE (--claim); write each claim as --claim "
            "KEY=VALUE, such as --claim team=billing [CALLER_INVALID]",
        ),
        (
            [],
            {"TETHER_CALLER": "ci:bot", "TETHER_CALLER_CLAIMS": '["billing"]'},
            "ERROR: the caller's claims cannot be read: it is a JSON list, not an object "
            '(TETHER_CALLER_CLAIMS); set it to a JSON object, such as {"team": "billing", '
            '"plan": "enterprise"} [CALLER_INVALID]',
        ),
    ],
)
def test_a_caller_that_cannot_be_read_is_caller_invalid(tmp_path, args, env, line):
    profile = _profile(tmp_path)
    done = _run(profile, *args, "hello", env=env)
    assert done.exit_code != 0
    assert line in done.output
    assert not (tmp_path / "sessions.db").exists() or _initiators(tmp_path) == []


def test_a_caller_the_profile_refuses_starts_nothing(tmp_path):
    profile = _profile(tmp_path, 'callers = { allow = ["team:*"] }')
    done = _run(profile, "--caller", "os:mallory", "hello")
    assert done.exit_code != 0
    assert (
        'ERROR: caller "os:mallory" may not start a session (agent "main"): only callers team:* '
        'may (refused by gate "profile")' in done.output
    )
    assert "[CALLER_REFUSED]" in done.output
    assert _initiators(tmp_path) == []
    done = _run(profile, "--caller", "team:billing", "hello")
    assert done.exit_code == 0, done.output
    assert _initiators(tmp_path) == [Caller(id="team:billing", via="cli")]


def test_sessions_send_asks_the_gate_before_it_posts(tmp_path):
    profile = _profile(tmp_path, 'callers = { allow = ["team:*"] }')
    done = _run(profile, "--caller", "team:billing", "hello")
    assert done.exit_code == 0, done.output
    session_id = done.output.strip().splitlines()[-1].removeprefix("session ")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_CALLER")}
    args = ["sessions", "send", "--profile", str(profile), "--caller", "os:mallory"]
    sent = CliRunner().invoke(cli, [*args, session_id, "let me in"], env=environ)
    assert sent.exit_code != 0
    assert f'caller "os:mallory" may not send to session {session_id}' in sent.output
    assert "[CALLER_REFUSED]" in sent.output
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        assert db.execute("SELECT count(*) FROM mailbox").fetchone() == (0,)
