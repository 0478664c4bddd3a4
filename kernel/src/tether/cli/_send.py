"""``tether sessions send``: a person's message to a stored session, printed.

The runtime delivers it (:meth:`tether.runtime.Runtime.send`: posted to the session's
mailbox, then followed while a live process drives the tree, or driven here when none does);
on a profile whose sessions run on a session host, the runtime follows it there
(:meth:`tether.runtime.Runtime.follow`). This module prints what happens.
docs/continuable-children.md#continuing-a-child-yourself says what each sender prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..contracts import Caller
    from ..loading import Kernel
    from ..models import ModelDelta
    from ..store import Event
    from ._group import Interruption

__all__ = ("send",)


async def send(
    interruption: Interruption,
    kernel: Kernel,
    model_spec: str | None,
    session_id: str,
    message: str,
    wait: bool,
    caller: Caller | None = None,
) -> str:
    """Deliver ``message`` to ``session_id`` as the person who owns it (``caller``, checked by
    the session's gates first); the stop reason of the turn that ran it (``completed`` when it
    was handed to another process and not waited for)."""
    from ..runtime import Runtime, profile_session_host, profile_store
    from ._run import debugging, run_on_host

    host = profile_session_host(kernel)
    if host is not None:
        # A session of the cluster: its host runs the message (a continuable child under its
        # root, on a worker: docs/scale-out.md). Checked here, before anything is sent.
        store = profile_store(kernel)
        try:
            await Runtime(kernel, store).send(session_id, message, caller=caller).check()
        except BaseException:
            await host.aclose()
            raise
        finally:
            await store.aclose()
        return await run_on_host(
            host,
            kernel,
            None,
            session_id,
            [message],
            debugging(),
            interruption.stoppable(),
            caller=caller,
        )
    store = profile_store(kernel)
    try:
        sent = Runtime(kernel, store).send(
            session_id,
            message,
            model=model_spec,
            wait=wait,
            hear=_printer(),
            hear_delta=_retry_notes,
            caller=caller,
        )
        interruption.on_interrupt(sent.interrupt)  # a child driven here: its turn is aborted
        stop = await sent.deliver(interruption.stoppable())
        if sent.handed_to is not None:
            owner = sent.handed_to
            click.echo(
                f"message accepted for {session_id}: the process that drives it "
                f"(pid {owner.pid} on {owner.host}) runs it"
            )
        elif sent.left_queued:
            click.echo(
                f"message accepted for {session_id}: the process that drove it stopped first; "
                f"it runs when the session is continued (`tether run --session {session_id}`)"
            )
        elif sent.stopped_waiting:
            click.echo(
                f"note: stopped waiting; the message stays queued for {session_id} and runs "
                f"once, in order (`tether sessions show {session_id}` shows its turn)",
                err=True,
            )
        click.echo(f"session {session_id}")
        return stop
    finally:
        await store.aclose()


def _retry_notes(delta: ModelDelta) -> None:
    """Show a ``retry`` delta of the child's as ``tether run`` does, on standard error."""
    from ._run import retry_line

    if delta.kind == "retry" and (delta.attempt or delta.text):
        click.echo(retry_line(delta), err=True)


def _printer() -> Callable[[Event], None]:
    from ._run import debugging, printer

    show: Any = printer(None, debug=debugging())
    return show
