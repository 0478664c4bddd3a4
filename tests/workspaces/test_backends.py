"""The built-in workspace backends with real processes: ``local`` (a plain subprocess in the
folder) and ``userns`` (a user-namespace sandbox that cannot read outside its workspace)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import anyio
import pytest

from tether.contracts import WorkspaceBackend
from tether.errors import ErrorCode, WorkspaceError
from tether.testing import scaled
from tether.workspaces import LocalBackend, UsernsBackend, Workspace

pytestmark = pytest.mark.anyio

#: Lines the host's files have that a sandboxed command must never print.
SECRET = "host-secret-4711"


@pytest.fixture
def userns() -> UsernsBackend:
    return UsernsBackend()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file beside the workspace (in its parent folder) holding :data:`SECRET`."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET + "\n")
    return secret


async def sandbox(backend: UsernsBackend, tmp_path: Path) -> Workspace:
    workspace = await backend.open(tmp_path / "ws", owner="ses_a")
    (workspace.root / "notes.txt").write_text("mine\n")
    return workspace


async def sh(backend: WorkspaceBackend, workspace: Workspace, script: str, **kwargs):
    return await backend.run(workspace, ["sh", "-c", script], timeout=scaled(20), **kwargs)


def test_the_builtin_backends_keep_the_contract():
    for backend in (LocalBackend(), UsernsBackend()):
        assert isinstance(backend, WorkspaceBackend)
    assert (LocalBackend().isolated, UsernsBackend().isolated) == (False, True)


# ------------------------------------------------------------------ local


async def test_local_open_makes_the_folder_resolved_and_is_idempotent(tmp_path: Path):
    backend = LocalBackend()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    first = await backend.open(tmp_path / "link" / "ws", owner="ses_a")
    again = await backend.open(tmp_path / "link" / "ws", owner="ses_a")
    assert first == again
    assert first.root == tmp_path.resolve() / "real" / "ws"
    assert first.root.is_dir()
    assert (first.backend, first.owner, first.kind) == ("local", "ses_a", "session")


async def test_local_runs_in_the_folder_with_stdin_and_env(tmp_path: Path):
    backend = LocalBackend()
    workspace = await backend.open(tmp_path / "ws", owner="ses_a")
    result = await sh(
        backend, workspace, 'pwd; cat; echo "$GREETING" >&2', stdin=b"in\n", env={"GREETING": "hi"}
    )
    assert result.exit_code == 0
    assert result.stdout == f"{workspace.root}\nin\n"
    assert result.stderr == "hi\n"
    assert not result.truncated
    assert not result.timed_out
    failed = await sh(backend, workspace, "exit 3")
    assert failed.exit_code == 3


async def test_local_output_is_cut_to_the_limit_and_the_rest_drained(tmp_path: Path):
    backend = LocalBackend()
    workspace = await backend.open(tmp_path / "ws", owner="ses_a")
    result = await sh(
        backend, workspace, "head -c 1000000 /dev/zero | tr '\\0' x", output_limit=1000
    )
    assert result.exit_code == 0  # never blocked on a full pipe
    assert result.stdout == "x" * 1000
    assert result.truncated


async def test_local_timeout_kills_the_whole_process_group(tmp_path: Path):
    backend = LocalBackend()
    workspace = await backend.open(tmp_path / "ws", owner="ses_a")
    started = time.monotonic()
    result = await backend.run(
        workspace, ["sh", "-c", "sleep 60 & echo $! > child.pid; wait"], timeout=0.5
    )
    assert result.timed_out
    assert time.monotonic() - started < scaled(10)
    child = int((workspace.root / "child.pid").read_text())
    with anyio.fail_after(scaled(5)):
        while _alive(child):
            await anyio.sleep(0.02)


async def test_local_kills_what_a_command_leaves_running(tmp_path: Path):
    backend = LocalBackend()
    workspace = await backend.open(tmp_path / "ws", owner="ses_a")
    result = await sh(backend, workspace, "sleep 60 & echo $! > child.pid")
    assert result.exit_code == 0
    assert not result.timed_out
    child = int((workspace.root / "child.pid").read_text())
    with anyio.fail_after(scaled(5)):
        while _alive(child):
            await anyio.sleep(0.02)


async def test_remove_deletes_the_folder_without_following_links_and_is_idempotent(
    tmp_path: Path, outside: Path
):
    backend = LocalBackend()
    workspace = await backend.open(tmp_path / "ws", owner="ses_a")
    (workspace.root / "up").symlink_to(tmp_path)
    (workspace.root / "secret").symlink_to(outside)
    await backend.remove(workspace)
    await backend.remove(workspace)
    assert not workspace.root.exists()
    assert outside.read_text() == SECRET + "\n"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie nobody reaped yet is gone for our purpose
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------ userns


async def test_userns_runs_in_the_workspace_and_writes_there(userns, tmp_path: Path):
    workspace = await sandbox(userns, tmp_path)
    result = await sh(userns, workspace, "pwd; cat notes.txt; echo made > new.txt; ls /")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["/workspace", "mine"]
    assert sorted(lines[2:]) == sorted(
        ["bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp", "usr", "workspace"]
        if os.path.islink("/lib64") or os.path.isdir("/lib64")
        else ["bin", "dev", "etc", "lib", "proc", "sbin", "tmp", "usr", "workspace"]
    )
    assert (workspace.root / "new.txt").read_text() == "made\n"


@pytest.mark.parametrize(
    "script",
    [
        "cat ../secret.txt",
        "cat ../../secret.txt",
        "cat ../../etc/passwd",
        "cat /etc/passwd",
        "cat /etc/hostname",
        "cat {secret}",
        "cat /proc/self/root{secret}",
        "cat /proc/1/root{secret}",
        "ln -s {secret} s && cat s",
        "ln -s .. up && cat up/secret.txt",
        "ln {secret} hard && cat hard",
        "cd / && cat .{secret}",
        "mount --bind / /tmp && cat /tmp{secret}",
    ],
)
async def test_userns_cannot_read_outside_its_workspace(userns, tmp_path: Path, outside, script):
    workspace = await sandbox(userns, tmp_path)
    result = await sh(userns, workspace, script.format(secret=outside))
    assert SECRET not in result.stdout + result.stderr
    assert result.exit_code != 0


async def test_userns_links_planted_in_the_workspace_do_not_reach_the_host(
    userns, tmp_path: Path, outside
):
    workspace = await sandbox(userns, tmp_path)
    (workspace.root / "to-secret").symlink_to(outside)
    (workspace.root / "to-hostname").symlink_to("/etc/hostname")
    (workspace.root / "to-parent").symlink_to(tmp_path)
    result = await sh(
        userns, workspace, "cat to-secret; cat to-hostname; ls to-parent; cat to-parent/secret.txt"
    )
    assert SECRET not in result.stdout + result.stderr
    assert "secret.txt" not in result.stdout
    assert result.exit_code != 0


async def test_userns_cannot_write_outside_its_workspace(userns, tmp_path: Path):
    workspace = await sandbox(userns, tmp_path)
    result = await sh(
        userns,
        workspace,
        "for f in /usr/x /x /etc/x /bin/x ../x; do echo no > $f && echo WROTE $f; done; "
        "echo scratch > /tmp/x && cat /tmp/x",
    )
    assert "WROTE" not in result.stdout
    assert result.stdout == "scratch\n"  # /tmp is a tmpfs of the sandbox's own
    assert not (tmp_path / "x").exists()


async def test_userns_sees_only_its_own_processes(userns, tmp_path: Path):
    workspace = await sandbox(userns, tmp_path)
    result = await sh(userns, workspace, "ls /proc | grep -c '^[0-9]'")
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout) <= 3  # sh, ls, grep: the host's processes are not there


async def test_userns_environment_is_not_the_hosts(userns, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TETHER_HOST_ONLY", "leaked")
    workspace = await sandbox(userns, tmp_path)
    result = await sh(userns, workspace, 'echo "[$TETHER_HOST_ONLY] $HOME $X"', env={"X": "given"})
    assert result.stdout == "[] /workspace given\n"


async def test_userns_timeout_ends_the_sandbox(userns, tmp_path: Path):
    workspace = await sandbox(userns, tmp_path)
    started = time.monotonic()
    result = await userns.run(workspace, ["sh", "-c", "sleep 60"], timeout=1.0)
    assert result.timed_out
    assert time.monotonic() - started < scaled(10)


async def test_userns_unavailable_says_why_and_how_to_fix(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    backend = UsernsBackend()
    with pytest.raises(WorkspaceError) as info:
        await backend.open(tmp_path / "ws", owner="ses_a")
    assert info.value.code is ErrorCode.WORKSPACE_UNAVAILABLE
    assert '"unshare"' in info.value.message
    assert "util-linux" in (info.value.remedy or "")
    assert not (tmp_path / "ws").exists()


async def test_userns_refused_by_the_kernel_says_why(tmp_path: Path, monkeypatch):
    # A stand-in unshare that fails as a kernel refusing user namespaces makes it fail.
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "unshare"
    fake.write_text(
        "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    for name in ("setpriv", "pivot_root", "sh"):
        found = shutil.which(name)
        assert found is not None, f"{name} is needed for this test"
        (tools / name).symlink_to(found)
    monkeypatch.setenv("PATH", str(tools))
    backend = UsernsBackend()
    with pytest.raises(WorkspaceError) as info:
        await backend.open(tmp_path / "ws", owner="ses_a")
    assert info.value.code is ErrorCode.WORKSPACE_UNAVAILABLE
    assert "Operation not permitted" in info.value.message
    assert "unprivileged_userns_clone" in (info.value.remedy or "")
