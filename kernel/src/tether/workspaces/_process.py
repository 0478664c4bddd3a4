"""Running one command for a workspace backend: a time limit that kills its whole process
group, and output cut to a limit while the rest is drained (a command never blocks on a full
pipe)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from ..contracts import CommandResult

__all__ = ("KILL_GRACE", "run_process")

#: How long a command's process group has to leave after SIGTERM before SIGKILL.
KILL_GRACE = 0.5
#: The chunk read from a pipe at a time.
_CHUNK = 65_536


class _Output:
    """What one pipe said, kept up to ``limit`` bytes (the rest is read and dropped)."""

    __slots__ = ("data", "limit", "truncated")

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.limit = limit
        self.truncated = False

    async def drain(self, stream: ByteReceiveStream | None) -> None:
        if stream is None:
            return
        async for chunk in stream:
            room = self.limit - len(self.data)
            if len(chunk) > room:
                self.truncated = True
            if room > 0:
                self.data += chunk[:room]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def _signal_group(process: Process, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)  # the command leads its own group (start_new_session)


async def _stop(process: Process) -> None:
    """End the command's whole process group: SIGTERM, then SIGKILL after a grace."""
    with anyio.CancelScope(shield=True):
        _signal_group(process, signal.SIGTERM)
        with anyio.move_on_after(KILL_GRACE):
            await process.wait()
            return
        _signal_group(process, signal.SIGKILL)
        await process.wait()


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None,
    stdin: bytes | None,
    output_limit: int,
) -> CommandResult:
    """Run ``argv`` in ``cwd`` (its own process group); after ``timeout`` seconds the group is
    killed and the result says ``timed_out``. ``output_limit`` bounds each of stdout and
    stderr; the exit code of a command killed by a signal is ``-signal``."""
    process = await anyio.open_process(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out, err = _Output(output_limit), _Output(output_limit)
    timed_out = False
    try:
        with anyio.move_on_after(timeout) as deadline:
            async with anyio.create_task_group() as group:
                group.start_soon(out.drain, process.stdout)
                group.start_soon(err.drain, process.stderr)
                if process.stdin is not None:
                    async with process.stdin:
                        # A command that does not read it all closes the pipe early.
                        if stdin:
                            with contextlib.suppress(
                                anyio.BrokenResourceError, anyio.ClosedResourceError
                            ):
                                await process.stdin.send(stdin)
                await process.wait()
                # What it left running in its group (``cmd &``) would hold the pipes open.
                _signal_group(process, signal.SIGKILL)
        timed_out = deadline.cancelled_caught
    finally:
        if process.returncode is None:
            await _stop(process)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    code = process.returncode if process.returncode is not None else -int(signal.SIGKILL)
    return CommandResult(
        exit_code=code,
        stdout=out.text(),
        stderr=err.text(),
        truncated=out.truncated or err.truncated,
        timed_out=timed_out,
    )
