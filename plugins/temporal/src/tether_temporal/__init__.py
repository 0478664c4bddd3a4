"""tether-temporal: sessions driven by Temporal workflows, hosted by ``tether worker``.

A profile that loads ``"temporal"`` (with ``[plugin.temporal]`` naming the cluster) and a store
every worker shares (``postgresql://...``) runs the same agents on any number of workers: each
session is a workflow (``tether-session/ID``) that accepts messages durably and has a worker
drive the session whenever one waits. See docs/scale-out.md.

``temporalio`` is imported only by the worker and the clients, never when a profile loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import tether
from tether.runtime import SessionHost

from ._settings import Settings

if TYPE_CHECKING:
    import click

    from ._client import new_message_id, new_session_id, send, wait_for_turn
    from ._worker import connect, run_worker

__all__ = (
    "Settings",
    "connect",
    "new_message_id",
    "new_session_id",
    "run_worker",
    "send",
    "wait_for_turn",
)


def __getattr__(name: str) -> object:
    # The client and worker functions import temporalio (over a second): only when used.
    if name in ("connect", "run_worker"):
        from . import _worker

        return getattr(_worker, name)
    if name in ("new_message_id", "new_session_id", "send", "wait_for_turn"):
        from . import _client

        return getattr(_client, name)
    raise AttributeError(f"module 'tether_temporal' has no attribute {name!r}")


@tether.hookimpl
def tether_settings_model() -> type[Settings]:
    return Settings


@tether.hookimpl
def tether_session_hosts(settings: Settings) -> list[SessionHost]:
    """The cluster runs this profile's sessions (``tether run``, ``tether sessions send``)."""
    from ._host import TemporalHost

    return [TemporalHost(settings)]


@tether.hookimpl
def tether_cli_commands() -> list[click.Command]:
    """``tether worker`` (declared in the entry points, group ``tether.commands``)."""
    from ._cli import worker_command

    return [worker_command]
