"""The command group, its shared options, and the ERROR-line contract."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from .._version import __version__

if TYPE_CHECKING:
    from anyio import CancelScope
    from anyio.abc import TaskStatus

    from ..kernel import Kernel
    from ..plugins import PluginCatalog

__all__ = ("INTERRUPTED_STATUS", "Interruption", "cli", "load", "profile_option")

DEBUG_ENV = "TETHER_DEBUG"

#: The exit status after Ctrl-C: 128 + SIGINT, what a shell reports for a process SIGINT ended.
INTERRUPTED_STATUS = 130
#: How long the exit after Ctrl-C waits for worker threads to end (idle ones end at once; a tool
#: the aborted turn abandoned may run for long, and Python's exit would wait for it).
THREADS_EXIT_WAIT = 0.05

_T = TypeVar("_T")


class _TetherGroup(click.Group):
    """Turns a :class:`tether.TetherError` into one ``ERROR:`` line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        from ..errors import TetherError

        try:
            return super().invoke(ctx)
        except TetherError as exc:
            if ctx.meta.get("tether.debug"):
                raise
            click.echo(f"ERROR: {exc}", err=True)
            ctx.exit(2)


@click.group(cls=_TetherGroup)
@click.version_option(__version__, "--version", prog_name="tether", message="%(prog)s %(version)s")
@click.option(
    "--debug",
    is_flag=True,
    envvar=DEBUG_ENV,
    help="Show the traceback of a startup error instead of one ERROR line.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """tether: an agent-harness microkernel for context control."""
    ctx.meta["tether.debug"] = debug


profile_option = click.option(
    "--profile",
    "profile",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The profile to load (default: tether.toml in the current directory).",
)


def load(profile: Path | None, catalog: PluginCatalog | None = None) -> Kernel:
    """Load the kernel for ``--profile`` (or tether.toml in the current directory)."""
    from ..kernel import load_kernel

    return load_kernel(profile, catalog=catalog)


def run_async(function: Any, *args: Any) -> Any:
    """``anyio.run(function, *args)``, importing anyio only for the commands that need it (so
    ``tether --version`` and ``tether plugins`` do not pay for it)."""
    import anyio

    return anyio.run(function, *args)


class Interruption:
    """Ctrl-C (SIGINT) during a command that :func:`run_interruptible` runs.

    The first SIGINT means stop, promptly: it prints ``[interrupted ...]`` on standard error,
    calls the :meth:`on_interrupt` callbacks (an agent's ``interrupt``, which aborts its turn and
    parks its queued messages) and cancels the :meth:`stoppable` scopes (what the command waits
    for: turns, children), so the command winds down through its ordinary teardown, prints what
    it always prints last, and exits with :data:`INTERRUPTED_STATUS`. A second SIGINT ends the
    process at once, with the same status, whatever it was waiting for.
    """

    def __init__(self) -> None:
        self.requested = False
        """Whether Ctrl-C came (or :meth:`interrupt` was called)."""
        self._callbacks: list[Callable[[], None]] = []
        self._scopes: list[CancelScope] = []

    def on_interrupt(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` at the first Ctrl-C (at once if it already came)."""
        self._callbacks.append(callback)
        if self.requested:
            callback()

    def stoppable(self) -> CancelScope:
        """A cancel scope for the command's work, cancelled by the first Ctrl-C (already
        cancelled if it came: work not started by then is not started)."""
        import anyio

        scope = anyio.CancelScope()
        self._scopes.append(scope)
        if self.requested:
            scope.cancel()
        return scope

    def interrupt(self) -> None:
        """What the first Ctrl-C does (see the class docstring); later calls do nothing."""
        if self.requested:
            return
        self.requested = True
        click.echo("[interrupted: stopping; press Ctrl-C again to exit at once]", err=True)
        for callback in self._callbacks:
            callback()
        for scope in self._scopes:
            scope.cancel()

    async def _receive(self, *, task_status: TaskStatus[None]) -> None:
        """Turn SIGINTs into :meth:`interrupt`, then an exit, until the command is done.

        A receiver task, not a ``KeyboardInterrupt``: the signal is handled on the event loop,
        which sync tools no longer block (they run in worker threads), and nothing is
        interrupted halfway through an append.
        """
        import anyio

        before = signal.getsignal(signal.SIGINT)
        try:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                task_status.started()
                async for _ in signals:
                    if self.requested:
                        _exit_at_once()
                    self.interrupt()
        finally:
            # Leaving the receiver resets SIGINT to Python's default; after a first Ctrl-C the
            # next one must still end the process at once, through the rest of the exit.
            if self.requested:
                signal.signal(signal.SIGINT, _exit_at_once_on_signal)
            elif before is not None:
                signal.signal(signal.SIGINT, before)

    def exit(self) -> NoReturn:
        """Exit with :data:`INTERRUPTED_STATUS`, without waiting for abandoned tools."""
        sys.stdout.flush()
        sys.stderr.flush()
        deadline = time.monotonic() + THREADS_EXIT_WAIT
        for thread in threading.enumerate():
            if thread is threading.main_thread() or thread.daemon:
                continue
            thread.join(max(deadline - time.monotonic(), 0.0))
            if thread.is_alive():
                # A tool the aborted turn abandoned still runs in its worker thread; Python's
                # exit would wait for it. Everything the command had to write is written.
                os._exit(INTERRUPTED_STATUS)
        raise SystemExit(INTERRUPTED_STATUS)


def _exit_at_once() -> NoReturn:
    """The second Ctrl-C: end the process now. The log keeps what is in it; a turn left open
    is closed (``aborted``) when the session is continued."""
    try:
        click.echo("[interrupted again: exiting now]", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(INTERRUPTED_STATUS)


def _exit_at_once_on_signal(signum: int, frame: object) -> None:
    _exit_at_once()


def _can_receive_sigint() -> bool:
    """Whether this process can watch SIGINT on its event loop: not on Windows (no signals
    there; Ctrl-C stays a ``KeyboardInterrupt``), only from the main thread, and not when
    SIGINT is ignored (a background job started by a shell: Ctrl-C is not meant for it)."""
    return (
        sys.platform != "win32"
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    )


def run_interruptible(
    function: Callable[..., Awaitable[_T]], interruption: Interruption, *args: Any
) -> _T:
    """``run_async(function, interruption, *args)`` with Ctrl-C meaning stop (see
    :class:`Interruption`): after the first Ctrl-C, the command exits with status 130 once
    ``function`` returns, instead of going on."""
    result = run_async(_watching_sigint, function, interruption, args)
    if interruption.requested:
        interruption.exit()
    return result


async def _watching_sigint(
    function: Callable[..., Awaitable[_T]], interruption: Interruption, args: tuple[Any, ...]
) -> _T:
    import anyio

    if not _can_receive_sigint():
        return await function(interruption, *args)
    results: list[_T] = []
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        await group.start(interruption._receive)
        try:
            results.append(await function(interruption, *args))
        except Exception as exc:  # raised below as itself, not in the task group's group
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return results[0]
