"""``[plugin.acp]``: the ACP agents this plugin offers as subagent providers."""

from __future__ import annotations

import shutil
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import tether

__all__ = ("AcpAgentSettings", "Settings")


class AcpAgentSettings(BaseModel):
    """One external agent spoken to over ACP on stdio; a subagent provider named ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    """The provider name a delegation tool binds (``provider = "NAME"``)."""
    command: str = Field(min_length=1)
    """The program to start, e.g. ``npx`` or ``gemini``; found on PATH."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    """Added to tether's own environment for the agent's process."""
    cwd: tether.ProfilePath | None = None
    """Where the process starts (default: the parent agent's working directory). Relative to
    the profile file that sets it."""
    roots: tuple[tether.ProfilePath, ...] | None = None
    """The folders the child may read and write through ``fs/*`` (default: the parent agent's
    working directory). Relative to the profile file; every other path is refused."""
    terminal: Literal[False] = False
    """Terminals (``terminal/*``) are not offered to ACP children."""
    permission: Literal["deny", "allow_once", "ask"] = "deny"
    """What a ``session/request_permission`` gets: ``deny`` (the default, as delegated children
    have their approvals pinned to deny), ``allow_once`` for the tool kinds in ``allow_kinds``
    (others denied), or ``ask``: forwarded to whoever hosts the root (the interactive ``tether
    run``, or the ACP client when tether is served over ACP); denied when nobody can answer."""
    allow_kinds: tuple[str, ...] = ()
    """With ``allow_once``: the ACP tool kinds allowed (``read``, ``edit``, ``execute``, ...)."""
    startup_timeout: float = Field(default=30.0, gt=0)
    """Seconds to start the process, ``initialize`` and open the session."""
    prompt_timeout: float = Field(default=1800.0, gt=0)
    """Seconds one prompt may take before the child is stopped with an error."""
    keep_warm: float = Field(default=60.0, ge=0)
    """Seconds a settled continuable child's process and ACP session stay up, so a follow-up
    reaches a warm session instead of starting the process again (0: end it at once). Never
    longer than the parent agent that owns the child."""
    cancel_grace: float = Field(default=5.0, ge=0)
    """Seconds a cancelled prompt may take to answer before the process group is ended."""

    @field_validator("command")
    @classmethod
    def _on_path(cls, command: str) -> str:
        # Fails at startup (tether check, tether run), not at the child's first turn.
        if shutil.which(command) is None:
            raise ValueError(
                f"command {command!r} is not an executable on PATH; install the agent or give "
                "its full path"
            )
        return command

    @model_validator(mode="after")
    def _kinds_need_allow_once(self) -> AcpAgentSettings:
        if self.allow_kinds and self.permission != "allow_once":
            raise ValueError('allow_kinds applies to permission = "allow_once"')
        return self


class Settings(tether.PluginSettings):
    """``[plugin.acp]`` with one ``[[plugin.acp.agents]]`` table per external agent."""

    agents: tuple[AcpAgentSettings, ...] = Field(default=(), validate_default=True)

    @field_validator("agents")
    @classmethod
    def _unique(cls, agents: tuple[AcpAgentSettings, ...]) -> tuple[AcpAgentSettings, ...]:
        if not agents:
            raise ValueError("name at least one agent under [[plugin.acp.agents]]")
        names = [agent.name for agent in agents]
        if len(set(names)) != len(names):
            raise ValueError("two ACP agents share a name; give each its own")
        return agents
