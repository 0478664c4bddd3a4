"""Real processes for the store tests (``store_worker.py``), never left running."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.testing import scaled

WORKER = Path(__file__).with_name("store_worker.py")
#: Generous: the suite must pass on a busy 2-core machine.
TIMEOUT = scaled(60.0)


class Worker:
    """One ``store_worker.py`` process; its output lines arrive through a queue."""

    def __init__(self, *args: object, script: Path = WORKER) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(script), *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.pid = self.process.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)  # the process closed its output: it ended

    def line(self, timeout: float = TIMEOUT) -> str:
        """The next line the worker prints; fails with its stderr if it ended instead."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"worker {self.pid} printed nothing for {timeout} s")
        if line is None:
            self.process.wait()
            assert self.process.stderr is not None
            pytest.fail(f"worker {self.pid} ended: {self.process.stderr.read()}")
        return line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def kill(self, *, reap: bool = True) -> None:
        """SIGKILL; ``reap=False`` leaves a zombie (an exited process its parent has not
        waited for) until the next ``kill()``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if not reap:
            # Wait until it has exited, but leave it unreaped (WNOWAIT): a zombie.
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
            return
        self.process.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)  # it reads to the end before its pipe closes
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., Worker]]:
    """Start workers; every one of them is killed and reaped when the test ends."""
    started: list[Worker] = []

    def start(*args: object) -> Worker:
        worker = Worker(*args)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()
