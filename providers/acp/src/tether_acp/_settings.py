"""``[plugin.acp]``: the ACP agents this plugin offers as subagent providers, and how ``tether
acp`` serves this profile's agent (``[plugin.acp.serve]``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

import tether

from ._files import DEFAULT_MAX_FILE_BYTES

__all__ = ("AcpAgentSettings", "AcpServeSettings", "Settings", "command_problem")

_RELATIVE = (
    "{what} must be an absolute path: {path!s} is relative, and relative paths are resolved "
    "against the profile file, which these settings do not come from"
)


class AcpAgentSettings(BaseModel):
    """One external agent spoken to over ACP on stdio; a subagent provider named ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")
    """The provider name a delegation tool binds (``provider = "NAME"``)."""
    command: str = Field(min_length=1)
    """The program to start, e.g. ``npx`` or ``gemini``; found on PATH. Checked when the
    agent is first needed (``tether check``, a run that can delegate), not when a profile is
    merely read (``tether sessions list`` runs without the agent installed)."""
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    """Added to tether's own environment for the agent's process."""
    cwd: tether.ProfilePath | None = None
    """Where the process starts and the ``cwd`` of its ACP sessions (default: the parent
    agent's working directory). Relative to the profile file that sets it; always sent to the
    agent as an absolute path, as ACP requires."""
    roots: tuple[tether.ProfilePath, ...] | None = None
    """The folders the child may read and write through ``fs/*`` (default: the parent agent's
    working directory). Relative to the profile file; every other path is refused."""
    terminal: Literal[False] = False
    """Terminals (``terminal/*``) are not offered to ACP children."""
    permission: Literal["deny", "allow_once", "ask"] = "ask"
    """What a ``session/request_permission`` gets: ``ask`` (the default, as for local
    children): forwarded to whoever hosts the root (the interactive ``tether run``, or the ACP
    client when tether is served over ACP), denied when nobody can answer or when the
    delegating agent's own approvals are denied; ``deny``; or ``allow_once`` for the tool kinds
    in ``allow_kinds`` (others denied)."""
    allow_kinds: tuple[str, ...] = ()
    """With ``allow_once``: the ACP tool kinds allowed (``read``, ``edit``, ``execute``, ...)."""
    auth_method: str | None = Field(default=None, min_length=1)
    """The ``authenticate`` method to use, by the id the agent lists in ``authMethods`` (e.g.
    ``openai-api-key`` for the Codex adapter). Set: tether authenticates right after
    ``initialize``. Unset: only when the agent answers ``session/new`` (or ``session/load``)
    with "authentication required", and only with the one method it lists; an agent that
    lists several stops with an error naming them."""
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, gt=0)
    """The largest file ``fs/read_text_file`` returns whole, the most text one ``line``/``limit``
    read returns, and the largest content ``fs/write_text_file`` writes, in bytes."""
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
    guardrails: Literal["forward", "exempt"] | None = None
    """What becomes of the guardrails a parent passes down to its children
    (docs/guardrails.md): ``forward``: the agent is a tether (``tether acp``): their names are
    sent in ``_meta["tether/guardrails"]`` of ``session/new`` and ``session/load``, and it
    checks the session it opens with them (or refuses it); ``exempt``: the profile lets the
    agent run unchecked inside (its result is still checked as ``remote_result``). Unset: an
    agent with such guardrails, that sees this one, fails to compose (``GUARDRAIL_INVALID``)."""

    @field_validator("cwd")
    @classmethod
    def _cwd_absolute(cls, cwd: Path | None) -> Path | None:
        if cwd is not None and not cwd.is_absolute():
            raise ValueError(_RELATIVE.format(what="cwd", path=cwd))
        return cwd

    @field_validator("roots")
    @classmethod
    def _roots_absolute(cls, roots: tuple[Path, ...] | None) -> tuple[Path, ...] | None:
        for root in roots or ():
            if not root.is_absolute():
                raise ValueError(_RELATIVE.format(what="every root", path=root))
        return roots

    @model_validator(mode="after")
    def _kinds_need_allow_once(self) -> AcpAgentSettings:
        if self.allow_kinds and self.permission != "allow_once":
            raise ValueError('allow_kinds applies to permission = "allow_once"')
        return self


class AcpServeSettings(BaseModel):
    """``[plugin.acp.serve]``: how ``tether acp`` serves this profile's agent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trust_meta_caller: bool = False
    """Take the caller a client names in ``_meta["tether/caller"]`` (of ``session/new``,
    ``session/load`` or ``session/prompt``: ``{"id": ..., "name": ..., "claims": {...}}``) as
    who sends (docs/callers.md). Only for a client that vouches for its people (an editor's
    own sign-in, a gateway): ``tether acp`` cannot check what it says. ``false`` (the
    default): every message's caller is the one running ``tether acp`` (``TETHER_CALLER``, or
    the OS user), and a ``_meta`` caller is ignored."""


class Settings(tether.PluginSettings):
    """``[plugin.acp]`` with one ``[[plugin.acp.agents]]`` table per external agent, and how
    this profile's agent is served (``[plugin.acp.serve]``)."""

    agents: tuple[AcpAgentSettings, ...] = ()
    serve: AcpServeSettings | None = None

    @field_validator("agents")
    @classmethod
    def _unique(cls, agents: tuple[AcpAgentSettings, ...]) -> tuple[AcpAgentSettings, ...]:
        names = [agent.name for agent in agents]
        if len(set(names)) != len(names):
            raise ValueError("two ACP agents share a name; give each its own")
        return agents

    @model_validator(mode="after")
    def _something(self) -> Settings:
        if not self.agents and self.serve is None:
            raise ValueError(
                "name at least one agent under [[plugin.acp.agents]], or say how this "
                "profile's agent is served under [plugin.acp.serve]"
            )
        return self


def command_problem(spec: AcpAgentSettings) -> str | None:
    """Why ``spec``'s command cannot be started, or ``None`` when it is an executable."""
    if shutil.which(spec.command) is None:
        return f"command {spec.command!r} of ACP agent {spec.name!r} is not an executable on PATH"
    return None
