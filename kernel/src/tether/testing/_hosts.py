"""``RuntimeSessionHost``: a session host that drives sessions in a runtime of this process.

It does what a cluster's worker does (take a message durably, restore the session from the
shared store, run what waits, settle), without the cluster: a plugin's tests, and tether's
own, use it to run children and sessions "elsewhere" (another runtime, another lease) and
check that nothing relies on the parent's process holding them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..agents import admit_caller, new_header, resolve_agent_name
from ..contracts import Admission
from ..store import InboxAccepted, MessageSource, SessionStore
from ..subagents._child import new_message_id

if TYPE_CHECKING:
    from ..agents import Agent
    from ..contracts import Caller
    from ..runtime import Runtime

__all__ = ("RuntimeSessionHost",)

log = logging.getLogger("tether.testing")


class RuntimeSessionHost:
    """A :class:`tether.runtime.SessionHost` whose driver is ``runtime`` (open, with a store
    shared with the senders): each message is posted to the session's mailbox, and the
    session is driven in a task of the runtime's until it is quiet. ``drives`` lists the
    sessions it drove, in order."""

    name = "runtime"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.drives: list[str] = []
        self._driving: dict[str, Agent | None] = {}
        self._again: set[str] = set()
        self._discard: set[str] = set()

    @property
    def store(self) -> SessionStore:
        store = self.runtime.store
        assert store is not None, "the host's runtime needs a store"
        return store

    async def send(
        self,
        session_id: str,
        content: str,
        *,
        agent: str | None = None,
        new: bool = False,
        message_id: str | None = None,
        trace: Mapping[str, str] | None = None,
        caller: Caller | None = None,
    ) -> str:
        store = self.store
        message_id = message_id or new_message_id()
        if new:
            preset = self.runtime.preset(resolve_agent_name(self.runtime.kernel, agent))
            admit_caller(preset.caller_gates, Admission(session_id, preset.name, caller, "session"))
            header = new_header(session_id=session_id, agent=preset.name, model=preset.model_spec)
            if caller is not None:
                header = header.model_copy(update={"caller": caller})
            await store.create(header)
            await store.release(session_id)
        elif caller is not None:
            name = (await store.header(session_id)).agent
            preset = self.runtime.preset(resolve_agent_name(self.runtime.kernel, name))
            admit_caller(
                preset.caller_gates, Admission(session_id, preset.name, caller, "followup")
            )
        if not await _holds(store, session_id, message_id):
            await store.post(
                session_id,
                InboxAccepted(
                    message_id=message_id,
                    content=content,
                    source=MessageSource(kind="followup", caller=caller),
                    trace=dict(trace) if trace else None,
                ),
            )
        if session_id in self._driving:
            self._again.add(session_id)  # the running drive looks again before it ends
        else:
            self._driving[session_id] = None
            self.runtime.start_soon(self._drive, session_id)
        return message_id

    async def cancel(self, session_id: str) -> None:
        if session_id not in self._driving:
            return
        agent = self._driving[session_id]
        if agent is None:
            self._discard.add(session_id)  # not open yet: it drops what waits once it is
        else:
            await agent.cancel(keep_inbox=False)

    async def interrupt(self, session_id: str) -> None:
        agent = self._driving.get(session_id)
        if agent is not None:
            agent.interrupt()
            await agent.when_idle()  # the turn's end is stored

    async def aclose(self) -> None:
        return None

    async def _drive(self, session_id: str) -> None:
        runtime = self.runtime
        try:
            while True:
                self._again.discard(session_id)
                self.drives.append(session_id)
                agent = await runtime.compose(session_id=session_id)
                async with runtime.hold(agent, recover=True) as held:  # as a worker's drive
                    self._driving[session_id] = agent
                    if session_id in self._discard:
                        self._discard.discard(session_id)
                        await agent.cancel(keep_inbox=False)
                    else:
                        await agent.loop.run_parked()
                    await held.settle()
                self._driving[session_id] = None
                if session_id not in self._again:
                    return
        except Exception:
            log.exception("the drive of session %s failed", session_id)
        finally:
            self._driving.pop(session_id, None)
            self._discard.discard(session_id)


async def _holds(store: SessionStore, session_id: str, message_id: str) -> bool:
    """Whether the session accepted ``message_id`` already (its mailbox or its log)."""
    if any(m.message_id == message_id for m in await store.mailbox(session_id)):
        return True
    events = await store.events(session_id)
    return any(
        isinstance(s.event, InboxAccepted) and s.event.message_id == message_id for s in events
    )
