"""The session host ``temporal``: ``tether run`` and ``tether sessions send`` on a profile that
loads the plugin hand each message to the session's workflow instead of running it here; a
worker's runtime hands its one-shot children to it (``Runtime.child_host``), so that any
worker may run them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from tether.errors import ErrorCode, HostError

from ._settings import Settings

if TYPE_CHECKING:
    from tether.contracts import Caller

__all__ = ("TemporalHost",)


class TemporalHost:
    """Sends to sessions' workflows on the cluster ``settings`` name; connects on first use."""

    name = "temporal"

    def __init__(self, settings: Settings, client: Any = None) -> None:
        self.settings = settings
        self._client: Any = client

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
        steer: bool = False,
    ) -> str:
        """Hand ``content`` to the session's workflow (:func:`tether_temporal._client.send`);
        ``caller``, its sender, travels with it to the worker. ``steer``: for the running
        turn's next step (delivery ``step``; the next turn when none runs)."""
        from ._client import send

        settings = self.settings
        await self._connect()
        with anyio.move_on_after(settings.submit_timeout) as waited:
            return await send(
                self._client,
                settings,
                session_id,
                content,
                agent=agent,
                message_id=message_id,
                trace=trace,
                caller=caller,
                delivery="step" if steer else "turn",
            )
        assert waited.cancelled_caught
        raise HostError(
            ErrorCode.HOST_UNAVAILABLE,
            f"no worker took the message for session {session_id} within "
            f'{settings.submit_timeout:g} s (task queue "{settings.task_queue}")',
            key="[plugin.temporal] task_queue",
            remedy="start a worker on this profile: `tether worker --profile PROFILE`; the "
            "message waits in the cluster and runs once one polls",
        )

    async def cancel(self, session_id: str) -> None:
        """Signal the session's workflow to stop its work (a workflow that does not run has
        none: nothing is sent)."""
        await self._signal(session_id, "cancel")

    async def interrupt(self, session_id: str) -> None:
        """Ask the session's workflow to abort its running turn (what waits stays parked);
        returns once its drive has stopped."""
        from temporalio.client import (
            WorkflowUpdateFailedError,
            WorkflowUpdateRPCTimeoutOrCancelledError,
        )
        from temporalio.service import RPCError, RPCStatusCode

        from ._workflow import workflow_id

        await self._connect()
        handle = self._client.get_workflow_handle(workflow_id(session_id))
        try:
            await handle.execute_update("interrupt")
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return  # its workflow ended: nothing runs
            raise self._unreached(session_id, "interrupt", exc.message) from exc
        except WorkflowUpdateFailedError as exc:
            raise self._unreached(session_id, "interrupt", str(exc.cause or exc)) from exc
        except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
            # The SDK turns the caller's cancellation into this error: a cancelled caller gets
            # its cancellation back (at this checkpoint), any other the timeout said plainly.
            await anyio.lowlevel.checkpoint()
            raise self._unreached(session_id, "interrupt", "the cluster did not answer") from exc

    async def _signal(self, session_id: str, name: str) -> None:
        from temporalio.service import RPCError, RPCStatusCode

        from ._workflow import workflow_id

        await self._connect()
        handle = self._client.get_workflow_handle(workflow_id(session_id))
        try:
            await handle.signal(name)
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return  # its workflow ended: nothing runs
            raise self._unreached(session_id, name, exc.message) from exc

    def _unreached(self, session_id: str, name: str, reason: str) -> HostError:
        return HostError(
            ErrorCode.HOST_UNAVAILABLE,
            f"the {name} for session {session_id} did not reach the Temporal cluster at "
            f"{self.settings.address}: {reason}",
            key="[plugin.temporal] address",
            remedy="check that the cluster runs; the session's turn goes on until it ends",
        )

    async def _connect(self) -> None:
        from ._worker import connect

        settings = self.settings
        if self._client is None:
            try:
                self._client = await connect(settings)
            except Exception as exc:  # the SDK raises RuntimeError (and others) for a dead server
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise HostError(
                    ErrorCode.HOST_UNAVAILABLE,
                    f"the Temporal cluster at {settings.address} cannot be reached: {reason}",
                    key="[plugin.temporal] address",
                    remedy="start it (`temporal server start-dev`) or fix [plugin.temporal] "
                    "address and namespace; nothing was sent",
                ) from exc

    async def aclose(self) -> None:
        self._client = None  # the SDK's client holds no resource that needs closing
