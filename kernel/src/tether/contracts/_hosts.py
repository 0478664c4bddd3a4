"""The session host contract: what runs a profile's sessions somewhere other than the calling
process (``tether_session_hosts``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

__all__ = ("SessionHost",)


@runtime_checkable
class SessionHost(Protocol):
    """Runs the sessions of a profile somewhere other than the calling process."""

    name: str
    """Names the host in messages: ``"temporal"``."""

    async def send(
        self,
        session_id: str,
        content: str,
        *,
        agent: str | None = None,
        new: bool = False,
        message_id: str | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> str:
        """Hand ``content`` to the session as its next message (a follow-up); return its
        message id once it is stored durably. ``new``: the session does not exist yet and is
        created for ``agent`` (the profile's agent name, resolved). The message's turn runs
        elsewhere; its events reach the profile's store, where the caller reads them.

        ``message_id`` names the message (default: a new id). A message with that id already
        accepted by the session (in its log or mailbox) is not stored again: the session is
        only driven, so that what it holds runs (a child created with its first prompt in
        its log, :func:`tether.subagents.start_child`).

        ``trace``: the sender's trace context (W3C keys such as ``traceparent``), stored with
        the message (``InboxAccepted.trace``) so that the turn it starts, wherever it runs,
        continues the sender's trace (:class:`tether.agents.Tracer`).

        A host may also take ``caller: Caller | None = None`` (optional, so it is not in this
        signature): who sends the message (docs/callers.md), to record on it (and, for a
        ``new`` session, as its initiator) once the agent's caller gates admitted it
        (``CALLER_REFUSED`` otherwise, nothing stored). A host without it is called as
        before, and its sessions run as their initiator.

        A host may also take ``steer: bool = False``: the message is for the session's
        running turn's next step (a steer; its next turn when no turn runs), as
        ``tether sessions steer`` sends it. A host without it cannot be steered: the command
        says so (``HOST_UNAVAILABLE``)."""
        ...

    async def cancel(self, session_id: str) -> None:
        """Stop the session's work: abort its running turn (it ends ``aborted``) and drop
        the messages it accepted and has not begun (``inbox/discarded``). Nothing to stop is
        not an error. Returns once the request is delivered; the caller reads the turn's end
        from the store."""
        ...

    async def interrupt(self, session_id: str) -> None:
        """Abort the session's running turn (it ends ``aborted``), as Ctrl-C does to a local
        one: the messages it accepted and has not begun stay parked, and run when the next
        message arrives. No running turn: nothing happens. Returns once the turn has stopped
        (its end is in the store) or was never begun (its message parked)."""
        ...

    async def aclose(self) -> None:
        """Release what the host holds (connections); idempotent."""
        ...
