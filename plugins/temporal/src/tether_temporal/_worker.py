"""``tether worker``: a Temporal worker that hosts the sessions of one profile."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import anyio
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from tether.errors import ErrorCode, PluginError, StoreError
from tether.loading import Kernel
from tether.runtime import Runtime, profile_store
from tether.store import DeltaRelay

from ._activities import SessionActivities
from ._host import TemporalHost
from ._relay import DeltaPublisher
from ._settings import Settings
from ._workflow import SessionWorkflow, drive_queue

__all__ = ("connect", "run_worker", "settings_of")

log = logging.getLogger("tether.temporal")

#: Short activities one worker runs at once: opening sessions and posting messages (local
#: activities, run inside the workflow tasks of this worker), and answering a failed drive's
#: messages (``tether.fail_waiting``, an ordinary activity).
SHORT_ACTIVITIES = 64


def settings_of(kernel: Kernel) -> Settings:
    """The ``[plugin.temporal]`` settings of a loaded profile; a profile that does not load
    the plugin is ``PLUGIN_NOT_FOUND``-like, said plainly."""
    plugin = kernel.global_scope.find_plugin("temporal")
    if plugin is None or not isinstance(plugin.settings, Settings):
        raise PluginError(
            ErrorCode.PLUGIN_SETTINGS_INVALID,
            "this profile does not load the temporal plugin",
            file=kernel.profile.path,
            key="[tether] plugins",
            remedy='add "temporal" to [tether] plugins (and a [plugin.temporal] table if the '
            "cluster is not at 127.0.0.1:7233)",
        )
    return plugin.settings


async def connect(settings: Settings) -> Client:
    """A client of the cluster ``settings`` name."""
    return await Client.connect(settings.address, namespace=settings.namespace)


async def run_worker(
    kernel: Kernel,
    *,
    ready: Callable[[], None] | None = None,
    stop: anyio.Event | None = None,
) -> None:
    """Host the profile's sessions until ``stop`` is set (or the task is cancelled): one
    runtime on the profile's store, the session workflow, and its activities, on the task
    queue of ``[plugin.temporal]``. ``ready`` is called once the worker polls."""
    settings = settings_of(kernel)
    store = profile_store(kernel)
    if not store.durable:
        await store.aclose()
        raise StoreError(
            ErrorCode.STORE_SPEC_INVALID,
            "a worker needs a store that every worker and client shares; "
            f'"{kernel.profile.tether.store}" keeps nothing past the process',
            file=kernel.profile.path,
            key="[tether] store",
            remedy='use "postgresql://..." (tether-postgres), or a "sqlite:PATH" that every '
            "worker on this host opens",
        )
    try:
        client = await connect(settings)
        async with Runtime.open(kernel, store) as runtime:
            # This worker's one-shot children go to the cluster too: any worker may run them.
            runtime.child_host = TemporalHost(settings, client)
            # A turn cut in a model step (a worker lost mid-request) goes on at that step on
            # the next worker, as a retried activity would.
            runtime.resume_cut_turns = True
            activities = SessionActivities(runtime, store, settings.heartbeat_timeout / 3)
            sessions = Worker(
                client,
                task_queue=settings.task_queue,
                workflows=[SessionWorkflow],
                activities=[
                    activities.open_session,
                    activities.post_message,
                    activities.fail_waiting,
                ],
                # The session workflow imports nothing of tether's, but its module's package
                # does: without passing them through, the sandbox re-imports all of tether for
                # every new session (0.7-1 s of CPU each, benchmarks/temporal.py).
                workflow_runner=SandboxedWorkflowRunner(
                    restrictions=SandboxRestrictions.default.with_passthrough_modules(
                        "tether", "tether_temporal"
                    )
                ),
                max_concurrent_activities=SHORT_ACTIVITIES,
                max_concurrent_local_activities=SHORT_ACTIVITIES,
                graceful_shutdown_timeout=timedelta(seconds=5),
            )
            # Drives on a queue of their own: a worker polls for one only while it has room
            # for it (max_sessions), and still takes workflow tasks and posts meanwhile.
            drives = Worker(
                client,
                task_queue=drive_queue(settings.task_queue),
                activities=[activities.drive_session],
                max_concurrent_activities=settings.max_sessions,
                graceful_shutdown_timeout=timedelta(seconds=5),
                max_heartbeat_throttle_interval=timedelta(seconds=settings.heartbeat_timeout / 3),
            )
            async with sessions, drives, anyio.create_task_group() as group:
                if isinstance(store, DeltaRelay):
                    # The pieces of answers reach clients that follow the sessions live.
                    publisher = DeltaPublisher(store)
                    runtime.listen_deltas(publisher.hear)
                    group.start_soon(publisher.run)
                if ready is not None:
                    ready()
                await (stop or anyio.Event()).wait()
                group.cancel_scope.cancel()
    finally:
        await store.aclose()
