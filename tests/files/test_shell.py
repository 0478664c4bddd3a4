"""The ``shell`` tool: behind approval by default (refused with nobody to ask, run when the
permission host allows), run without asking when ``shell = "allow"``, in the workspace folder,
as real subprocesses, stopped at its timeout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.agents import PermissionQuestion

from .conftest import call

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(os.name != "posix", reason="/bin/sh")]


async def test_a_command_without_approval_is_refused_and_does_not_run(files_run):
    run = await files_run([call("shell", 1, command="touch ran.txt")])
    assert run.texts == ['error: tool "shell" needs approval, and there is nobody to ask']
    assert not (run.root / "ran.txt").exists()


@pytest.mark.parametrize(("answer", "ran"), [("allow", True), ("reject", False)])
async def test_the_permission_host_decides_whether_a_command_runs(files_run, answer, ran):
    questions: list[PermissionQuestion] = []

    async def host(question: PermissionQuestion) -> str | None:
        questions.append(question)
        return answer

    run = await files_run(
        [call("shell", 1, command="echo made > ran.txt && pwd && echo oops >&2")], host=host
    )
    (question,) = questions
    assert question.title.startswith('shell({"command": "echo made > ran.txt')
    assert (run.root / "ran.txt").exists() is ran
    if ran:
        assert run.texts == [f"exit code: 0\nstdout:\n{run.root}\nstderr:\noops"]
    else:
        assert run.texts == ['error: tool "shell" was not approved']


async def test_shell_allow_runs_without_asking_argv_as_given(files_run):
    async def host(question: PermissionQuestion) -> str | None:
        raise AssertionError("asked")

    run = await files_run(
        [
            call("shell", 1, argv=["sh", "-c", 'printf "%s" "$1"; exit 3', "sh", "a; rm -rf x"]),
            call("shell", 2, command="sleep 30", timeout=0.5),
            call("shell", 3, argv=["no-such-program-here"]),
            call("shell", 4),
        ],
        settings='shell = "allow"',
        host=host,
    )
    argv, slow, missing, nothing = run.texts
    assert argv == "exit code: 3\nstdout:\na; rm -rf x"
    assert slow.startswith("timed out after 0.5 s (stopped); exit code: ")
    assert missing == "error: there is no program 'no-such-program-here'"
    assert nothing == "error: give command (a command line) or argv (a list)"


async def test_an_agent_whose_policy_is_allow_runs_commands_it_would_otherwise_ask_for(
    files_run,
):
    run = await files_run([call("shell", 1, command="echo hello")], agent='approval = "allow"')
    assert run.texts == ["exit code: 0\nstdout:\nhello"]


def beside(root: Path) -> None:
    """A secret in the folder that holds the session's workspace (made before it is)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    (root.parent / "secret.txt").write_text("host-secret-4711\n")


async def test_in_a_sandboxed_session_workspace_the_tools_and_the_shell_see_only_it(
    files_run, tmp_path
):
    (tmp_path / "secret.txt").write_text("host-secret-4711\n")
    run = await files_run(
        [
            call("write_file", 1, path="notes.md", content="mine\n"),
            call("shell", 2, command="cat notes.md; pwd; ls; cat ../secret.txt"),
            call("shell", 3, argv=["cat", str(tmp_path / "secret.txt")]),
            call("read_file", 4, path="../secret.txt"),
        ],
        settings='shell = "allow"',
        tether='workspace = { kind = "session", backend = "userns" }',
        cwd=False,
        prepare=beside,
    )
    workspace = run.agent.workspace
    assert (workspace.kind, workspace.backend) == ("session", "userns")
    assert workspace.root.parent.name == "workspaces"  # a folder of the session's own
    written, own, absolute, read = run.texts
    assert written == "created notes.md: 5 bytes, 1 lines"
    assert own.startswith("exit code: 1\nstdout:\nmine\n/workspace\nnotes.md\n")
    assert "notes.md" in own
    assert "host-secret-4711" not in own + absolute + read
    assert absolute.startswith("exit code: 1")
    assert read.endswith("[PATH_OUTSIDE_WORKSPACE]")
