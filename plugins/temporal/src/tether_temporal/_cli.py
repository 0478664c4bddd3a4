"""``tether worker``."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from pathlib import Path

import anyio
import click

__all__ = ("worker_command",)


@click.command("worker")
@click.option(
    "--profile",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The profile to host (default: tether.toml in the current directory).",
)
def worker_command(profile: Path | None) -> None:
    """Host the profile's sessions as a Temporal worker until SIGTERM or Ctrl-C.

    Connects to the cluster of [plugin.temporal] (address, namespace, task_queue), runs the
    session workflows and their activities with the profile's agents on its store (which every
    worker and client must share: PostgreSQL), and prints "worker ready" once it polls.
    """
    from tether.cli import load

    from ._worker import run_worker

    kernel = load(profile)

    async def main() -> None:
        stop = anyio.Event()

        def ready() -> None:
            click.echo(f"worker ready (pid {os.getpid()})")

        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

            async def watch() -> None:
                async for _ in signals:
                    stop.set()
                    return

            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                await run_worker(kernel, ready=ready, stop=stop)
                group.cancel_scope.cancel()

    anyio.run(main)
    # The Temporal SDK's core can abort while the interpreter shuts down (sdk-python#300):
    # everything is released by now, so leave without the interpreter's teardown. What the
    # process's libraries asked to do at exit runs first (tether-otel's providers export the
    # spans and metrics they still hold), as at a normal exit.
    atexit._run_exitfuncs()  # pyright: ignore[reportPrivateUsage]
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
