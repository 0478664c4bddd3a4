"""Deadlines for the benchmarks: a stuck scenario fails with a message, never waits forever.

Not a benchmark: the benchmarks import it (``python benchmarks/NAME.py`` puts this folder on
``sys.path``).

    with scenario("background children (4000)", seconds=600):
        ...

A watchdog thread starts with the block. When the block outlives its deadline, the watchdog
interrupts the main thread (as Ctrl-C would: ``finally`` blocks run, ``async with`` blocks
leave, ``subprocess.run`` kills its child), and the block ends with :class:`ScenarioStuck`, a
``SystemExit`` that prints what was stuck and exits 1. A main thread that does not come back
within :data:`GRACE` seconds (blocked where no interrupt reaches it) gets its stack dumped and
the process ends at once (status 3), after its child processes. Deadlines are multiplied by the test
suite's time scale (``TETHER_TEST_TIME_SCALE``, docs/testing.md), so one setting makes a busy
machine's runs generous.

:func:`refused` fails a benchmark at once when a call it made was refused (a tool result that
ends with an error code, such as the eleventh working task's ``TOO_MANY_BACKGROUND_TASKS``):
the scenario would otherwise wait for work that never started. Call it from the benchmark's own
flow, not from inside a model function (where the agent would record it as the model's error).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from tether.testing import scaled

__all__ = ("DEADLINE", "EXIT_STUCK", "GRACE", "ScenarioStuck", "refused", "scenario")

#: Seconds a scenario may take unless it says otherwise (before the time scale): far more than
#: any figure needs on an idle machine, so only a stuck one reaches it.
DEADLINE = 600.0
#: The exit status of a benchmark whose stuck main thread did not stop when interrupted.
EXIT_STUCK = 3
#: Seconds the main thread has to leave a block after the interrupt, before the hard exit.
GRACE = 30.0


#: A tool result that is an error: ``... [CODE]`` (tether's error line).
_ERROR_RESULT = re.compile(r"\[[A-Z][A-Z_]+\]\s*$")


class ScenarioStuck(SystemExit):
    """A scenario outlived its deadline, or a call it needed was refused: the interpreter
    prints the message on stderr and exits 1."""

    def __init__(self, message: str) -> None:
        super().__init__(f"benchmark failed: {message}")


def _descendants(pid: int) -> list[int]:
    """The live descendants of ``pid`` (from /proc; empty where there is none)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        found.extend(children)
        frontier.extend(children)
    return found


def _hard_exit(message: str) -> None:
    sys.stderr.write(f"benchmark failed: {message}; the main thread did not stop, its stack:\n")
    faulthandler.dump_traceback(all_threads=True)
    for pid in _descendants(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    sys.stderr.flush()
    os._exit(EXIT_STUCK)


def _stuck_in(exc: BaseException) -> ScenarioStuck | None:
    """The :class:`ScenarioStuck` ``exc`` is or holds (task groups wrap it in a group)."""
    if isinstance(exc, ScenarioStuck):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _stuck_in(inner)
            if found is not None:
                return found
    return None


@contextlib.contextmanager
def scenario(name: str, seconds: float = DEADLINE) -> Iterator[None]:
    """Run the block with a deadline of ``scaled(seconds)``; past it, fail the benchmark with
    :class:`ScenarioStuck` naming ``name`` (call it from the main thread)."""
    limit = scaled(seconds)
    message = f"{name} did not finish within {limit:g} s (stuck; TETHER_TEST_TIME_SCALE scales it)"
    done = threading.Event()
    expired = threading.Event()
    main = threading.main_thread().ident or 0

    def watch() -> None:
        if done.wait(limit):
            return
        expired.set()
        # A real signal to the main thread: it also cuts a blocking call (a sleep, a wait on
        # a process) short, which _thread.interrupt_main does not.
        signal.pthread_kill(main, signal.SIGINT)
        if not done.wait(GRACE):
            _hard_exit(message)

    # A process started in the background by a shell ignores SIGINT, and then the interrupt
    # does nothing: Python's own handler for the block (asyncio's runner, which anyio.run
    # uses, replaces it with one that cancels the main task, as on Ctrl-C).
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    watchdog = threading.Thread(target=watch, name=f"deadline: {name}", daemon=True)
    watchdog.start()
    try:
        yield
    except BaseException as exc:
        if expired.is_set():  # whatever the interrupt ended as (KeyboardInterrupt, a group)
            raise ScenarioStuck(message) from None
        stuck = _stuck_in(exc)
        if stuck is not None:  # refused() inside a task group: its message, not a traceback
            raise stuck from None
        raise
    finally:
        done.set()
        if not callable(handler):
            signal.signal(signal.SIGINT, handler)
    if expired.is_set():  # the interrupt was swallowed, but the block did end: still too late
        raise ScenarioStuck(message)


def refused(texts: Iterable[str], what: str) -> None:
    """Fail the benchmark when one of ``texts`` (tool results) is an error with a code, such
    as ``... [TOO_MANY_BACKGROUND_TASKS]``: ``what`` says which calls they answer."""
    errors = [text for text in texts if _ERROR_RESULT.search(text)]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ScenarioStuck(f"{what}: a call was refused: {errors[0]}{more}")
