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
    from ..contracts import Caller, SessionHost
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
    steer: bool = False,
) -> str:
    """Deliver ``message`` to ``session_id`` as the person who owns it (``caller``, checked by
    the session's gates first); the stop reason of the turn that ran it (``completed`` when it
    was handed to another process and not waited for). ``steer``: for the running turn's
    next step (``tether sessions steer``)."""
    from ..runtime import Runtime, profile_session_host, profile_store
    from ._run import debugging, run_on_host

    host = profile_session_host(kernel)
    if host is not None and steer:
        return await _steer_on_host(interruption, host, kernel, session_id, message, wait, caller)
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
            steer=steer,
        )
        interruption.on_interrupt(sent.interrupt)  # a child driven here: its turn is aborted
        stop = await sent.deliver(interruption.stoppable())
        if sent.handed_to is not None:
            owner = sent.handed_to
            runs = "takes it at its running turn's next step" if steer else "runs it"
            click.echo(
                f"{'steer' if steer else 'message'} accepted for {session_id}: the process "
                f"that drives it (pid {owner.pid} on {owner.host}) {runs}"
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


async def _steer_on_host(
    interruption: Interruption,
    host: SessionHost,
    kernel: Kernel,
    session_id: str,
    message: str,
    wait: bool,
    caller: Caller | None,
) -> str:
    """Steer a session of the cluster: its host takes the message for the running turn's
    next step (a host whose ``send`` takes ``steer``, as tether-temporal's does); with
    ``wait``, the turn that takes it is printed from the shared store as it is written."""
    from ..errors import ErrorCode, HostError
    from ..ground import takes_keyword
    from ..runtime import Runtime, follow_message, profile_store

    store = profile_store(kernel)
    try:
        sent = Runtime(kernel, store).send(session_id, message, caller=caller, steer=True)
        await sent.check()
        if not takes_keyword(type(host).send, "steer"):
            raise HostError(
                ErrorCode.HOST_UNAVAILABLE,
                f'the session host "{host.name}" cannot steer a running turn',
                remedy=f"send the message as the session's next turn: "
                f"`tether sessions send {session_id} ...`",
            )
        last = (await store.events(session_id))[-1:]
        steering: Any = host  # its send takes steer (checked above), not in the contract
        message_id = await steering.send(session_id, message, steer=True, caller=caller)
        if not wait:
            click.echo(
                f"steer accepted for {session_id}: the cluster takes it at the running turn's "
                "next step (or as the session's next turn)"
            )
            click.echo(f"session {session_id}")
            return "completed"
        stop = "interrupted"  # Ctrl-C stops the waiting; the turn goes on in the cluster
        with interruption.stoppable():
            stop = await follow_message(
                store, session_id, message_id, last[0].seq if last else 0, _printer()
            )
        click.echo(f"session {session_id}")
        return stop
    finally:
        await host.aclose()
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
