"""Real processes for the tests: the environment they run tether in, and a process killed with
SIGKILL once it reports READY (the crash tests' first half)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from tether.store import Event, SQLiteStore

__all__ = ("kill_at_ready", "needs_sigint", "plugin_env", "read_log", "wait_for_ready")

#: For a test that sends SIGINT (Ctrl-C) to a process it started: skipped where SIGINT is
#: ignored (a shell's background job), as the process inherits that, or is not a signal.
needs_sigint = pytest.mark.skipif(
    sys.platform == "win32" or signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
    reason="SIGINT is ignored here, so the processes the tests start ignore it (or not POSIX)",
)


def plugin_env() -> dict[str, str]:
    """This process's environment for a child process that loads plugins by entry point (the
    suite turns entry-point autoloading off for itself)."""
    return {k: v for k, v in os.environ.items() if k != "TETHER_DISABLE_PLUGIN_AUTOLOAD"}


def wait_for_ready(
    process: subprocess.Popen[str], timeout: float, errors: Path | None = None
) -> list[str]:
    """The words after ``READY`` on the first such line the process prints (fails on a
    timeout, or when the process exits first: with what it wrote to ``errors``, if given)."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(deadline - time.monotonic(), 0.01)):
                continue
            line = process.stdout.readline()
            if not line:
                code = process.wait()
                said = f": {errors.read_text()}" if errors is not None else ""
                raise AssertionError(f"the first process exited early ({code}){said}")
            if line.startswith("READY "):
                return line.split()[1:]
    raise AssertionError("the first process never reported READY")


def kill_at_ready(
    command: Sequence[str], timeout: float, errors: Path | None = None, cwd: Path | None = None
) -> list[str]:
    """Run ``command`` (with :func:`plugin_env`) until it reports ``READY``, SIGKILL it, and
    return the words it reported; its standard error goes to ``errors`` (else nowhere). The
    process is never left running."""
    stderr = errors.open("w") if errors is not None else None
    try:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            text=True,
            env=plugin_env(),
        )
        try:
            words = wait_for_ready(process, timeout, errors)
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=timeout) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
    finally:
        if stderr is not None:
            stderr.close()
    return words


def read_log(db: Path, session_id: str) -> list[Event]:
    """The events of ``session_id`` in the SQLite store ``db`` (from synchronous code)."""

    async def read() -> list[Event]:
        store = SQLiteStore(db)
        try:
            return [stored.event for stored in await store.events(session_id)]
        finally:
            await store.aclose()

    return anyio.run(read)
