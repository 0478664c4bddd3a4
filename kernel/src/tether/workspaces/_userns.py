"""The ``userns`` workspace backend: each command in a user-namespace sandbox (util-linux
``unshare``), where the workspace is the only writable place and nothing else of the host's
files can be read.

Inside the sandbox the root is a fresh, read-only ``tmpfs`` holding only: ``/workspace`` (the
workspace, bound read-write, the working folder), ``/usr`` and the ``/bin``, ``/sbin`` and
``/lib*`` of the host (bound read-only, or their ``usr/`` links), ``/etc/alternatives`` and
``/etc/ld.so.cache`` (read-only: what programs need to start; nothing else of ``/etc``), the
``/dev`` nodes ``null``, ``zero``, ``full``, ``random`` and ``urandom``, a fresh ``/proc`` of
the sandbox's own process namespace, and a ``tmpfs`` ``/tmp``. The old root is detached
(``pivot_root``, then a lazy unmount) and the command runs with no capabilities and
``no_new_privs``. The network is the host's.

It needs unprivileged user namespaces; a kernel or a security module that refuses them makes
:meth:`UsernsBackend.open` raise ``WORKSPACE_UNAVAILABLE`` saying why and how to allow them.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..contracts import CommandResult, Workspace
from ..errors import ErrorCode, WorkspaceError
from ._local import make_folder, remove_folder

__all__ = ("SANDBOX_ROOT", "SANDBOX_SETUP", "UsernsBackend")

#: Where the workspace is inside the sandbox.
SANDBOX_ROOT = "/workspace"
#: The sandbox's environment: nothing of the host's but what ``env`` adds.
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
    "HOME": SANDBOX_ROOT,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}
#: How long the check that user namespaces work may take.
PROBE_TIMEOUT = 10.0

#: The sandbox's setup, run by ``sh`` as root of the new user namespace: ``$1`` is the
#: workspace, the rest the command. The workspace is entered first (``cd``), so that binding
#: ``.`` still reaches it once a ``tmpfs`` covers ``/tmp`` (where the new root is built).
SANDBOX_SETUP = r"""
set -eu
cd "$1"; shift
mount -t tmpfs -o mode=0755,size=8m tether-sandbox /tmp
r=/tmp
mkdir "$r/usr" "$r/workspace" "$r/proc" "$r/tmp" "$r/dev" "$r/etc" "$r/.old"
ro() { mount --rbind "$1" "$2"; mount -o remount,bind,ro "$2"; }
ro /usr "$r/usr"
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$r/$d"
  elif [ -d "/$d" ]; then mkdir "$r/$d"; ro "/$d" "$r/$d"; fi
done
for f in null zero full random urandom; do
  touch "$r/dev/$f"; mount --bind "/dev/$f" "$r/dev/$f"
done
e="$r/etc"
if [ -d /etc/alternatives ]; then
  mkdir "$e/alternatives"; ro /etc/alternatives "$e/alternatives"
fi
if [ -f /etc/ld.so.cache ]; then touch "$e/ld.so.cache"; ro /etc/ld.so.cache "$e/ld.so.cache"; fi
mount --no-canonicalize --bind . "$r/workspace"
mount -t proc -o nosuid,nodev,noexec proc "$r/proc"
mount -t tmpfs -o mode=1777,size=256m tether-tmp "$r/tmp"
mount -o remount,bind,ro "$r"
cd "$r"
pivot_root . .old
umount -l /.old
cd /workspace
exec setpriv --bounding-set=-all --inh-caps=-all --no-new-privs -- "$@"
"""

#: The namespaces: a user namespace mapping us to its root, our own mounts and processes.
_UNSHARE = ("--user", "--map-root-user", "--mount", "--pid", "--fork", "--kill-child")

_REMEDY = (
    "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
    "user.max_user_namespaces > 0; on Ubuntu 24.04 and later also "
    "kernel.apparmor_restrict_unprivileged_userns=0), or use the local backend: "
    '[tether] workspace = { backend = "local" }'
)


class UsernsBackend:
    """Workspaces as folders of this machine; each command in a sandbox of its own (see the
    module docstring), where ``argv`` sees the workspace as ``/workspace``."""

    name = "userns"
    isolated = True

    def __init__(self) -> None:
        self._checked: WorkspaceError | bool | None = False  # False: not checked yet
        self._unshare = "unshare"

    async def _check(self) -> None:
        """That ``unshare`` and ``setpriv`` exist and user namespaces work here (once)."""
        if self._checked is False:
            self._checked = await self._probe()
        if isinstance(self._checked, WorkspaceError):
            raise self._checked

    async def _probe(self) -> WorkspaceError | None:
        from ._process import run_process
        for tool in ("unshare", "setpriv", "pivot_root"):
            if shutil.which(tool) is None:
                return WorkspaceError(
                    ErrorCode.WORKSPACE_UNAVAILABLE,
                    f'the userns workspace backend needs "{tool}", which is not on PATH',
                    remedy="install util-linux (apt-get install util-linux), or use "
                    '[tether] workspace = { backend = "local" }',
                )
        self._unshare = shutil.which("unshare") or "unshare"
        try:
            result = await run_process(
                [self._unshare, *_UNSHARE, "true"],
                cwd=Path("/"),
                timeout=PROBE_TIMEOUT,
                env=None,
                stdin=None,
                output_limit=4_000,
            )
        except OSError as exc:
            result = CommandResult(exit_code=-1, stdout="", stderr=str(exc))
        if result.exit_code != 0:
            why = " ".join(result.stderr.split()) or f"exit status {result.exit_code}"
            return WorkspaceError(
                ErrorCode.WORKSPACE_UNAVAILABLE,
                f"the userns workspace backend cannot make a user namespace here: {why}",
                remedy=_REMEDY,
            )
        return None

    async def open(self, root: Path, *, owner: str) -> Workspace:
        """The workspace at ``root``, created if missing; ``WORKSPACE_UNAVAILABLE`` when this
        machine cannot make the sandbox (checked once per backend)."""
        await self._check()
        return Workspace(root=make_folder(root), backend=self.name, owner=owner)

    async def run(
        self,
        workspace: Workspace,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit: int = 100_000,
    ) -> CommandResult:
        """Run ``argv`` in the sandbox, in ``/workspace``, with :data:`SANDBOX_ENV` and
        ``env`` over it; a time limit kills the sandbox (its process namespace ends with its
        first process)."""
        await self._check()
        if not argv:
            raise WorkspaceError(
                ErrorCode.WORKSPACE_INVALID,
                "no command to run in the workspace",
                remedy="pass the program and its arguments",
            )
        from ._process import run_process  # loading a profile imports no process machinery

        return await run_process(
            [
                self._unshare,
                *_UNSHARE,
                "sh",
                "-c",
                SANDBOX_SETUP,
                "sandbox",
                str(workspace.root),
                *argv,
            ],
            cwd=workspace.root,
            timeout=timeout,
            env={**SANDBOX_ENV, **(env or {})},
            stdin=stdin,
            output_limit=output_limit,
        )

    async def remove(self, workspace: Workspace) -> None:
        """Delete the workspace's folder (idempotent)."""
        import anyio.to_thread

        await anyio.to_thread.run_sync(remove_folder, workspace.root)
