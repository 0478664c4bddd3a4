"""``[plugin.temporal]``: where the Temporal cluster is, and how its workers host sessions."""

from __future__ import annotations

from pydantic import Field

import tether

__all__ = ("Settings",)


class Settings(tether.PluginSettings):
    """The settings of the ``temporal`` plugin (global layer); every key has a default that
    reaches a local dev server (``temporal server start-dev``)."""

    address: str = Field(default="127.0.0.1:7233", min_length=1)
    """``HOST:PORT`` of the Temporal frontend."""
    namespace: str = Field(default="default", min_length=1)
    """The Temporal namespace the session workflows run in."""
    task_queue: str = Field(default="tether", min_length=1)
    """The task queue workers poll and clients submit to: every worker on it must run the same
    profile (the same agents and plugins)."""
    max_sessions: int = Field(default=200, ge=1)
    """Sessions one worker drives at once (its concurrent ``drive`` activities); more wait."""
    heartbeat_timeout: float = Field(default=5.0, gt=0)
    """Seconds without a heartbeat after which a worker driving a session counts as dead and
    another worker takes the session over (a heartbeat is sent every third of this)."""
    turn_timeout: float = Field(default=3600.0, gt=0)
    """Seconds one drive of a session (its queued turns) may take at most."""
    submit_timeout: float = Field(default=60.0, gt=0)
    """Seconds ``tether run`` waits for a worker to take a message before ``HOST_UNAVAILABLE``
    (the message then waits in the cluster for one)."""
    idle_timeout: float = Field(default=600.0, gt=0)
    """Seconds a session's workflow waits for another message before it ends (the next
    message starts it again; the session itself is in the store)."""
